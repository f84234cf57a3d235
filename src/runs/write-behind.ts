import type { NewRun, Run, RunEnd, Store } from "../store/types.ts";

/**
 * Write-behind for run-sync (flows and script tasks): no caller knows a sync run's ID before it is
 * answered, so a run that ends within the grace is written once, already ended. A longer one is
 * inserted STARTED when the grace elapses, so monitoring shows it and a timed-out wait can name a
 * durable run. A process that dies within the grace leaves no trace of a run nobody was told of.
 */
// 100 ms rather than less: under load a short task's run-sync takes tens of ms, and every one
// past the grace costs a second write (insert, then update of every monitoring index), which
// loads the machine further. A run shows in monitoring at most 100 ms after it starts.
export const SYNC_WRITE_BEHIND_MS = 100;

export interface PendingRecord {
  rec: NewRun;
  /** The insert once it started: the STARTED record (grace elapsed) or the final one. */
  inserted: Promise<void> | null;
  /** The record was first written already ended (the run ended within the grace). */
  wroteEnded: boolean;
}

/**
 * The grace elapsed: inserts the STARTED record. Its failure reaches whoever awaits
 * `pending.inserted` next (the run's end, or the answer), maybe minutes later; until then the
 * rejection must not count as unhandled, which would end the process (docs/errors.md, "Bad input").
 */
export function insertStarted(store: Pick<Store, "insertRun">, pending: PendingRecord): void {
  if (pending.inserted) return;
  const inserted = store.insertRun(pending.rec);
  inserted.catch(() => {});
  pending.inserted = inserted;
}

/**
 * Records a run's end: one insert of the ended run while the grace has not elapsed, else the
 * update of the STARTED record (once its insert is done). True when this call recorded the end;
 * a store failure is thrown for the caller to log or answer.
 */
export async function recordEnd(
  store: Pick<Store, "insertRun" | "endRun">,
  pending: PendingRecord | undefined,
  id: string,
  end: RunEnd,
): Promise<boolean> {
  if (pending && !pending.inserted) {
    pending.inserted = store.insertRun(pending.rec, end);
    pending.wroteEnded = true;
    await pending.inserted;
    return true;
  }
  await pending?.inserted;
  return store.endRun(id, end);
}

/** The run as stored by `insertRun(rec, end)`, without reading it back. */
export function endedRun(rec: NewRun, end: RunEnd): Run {
  const startTime = rec.startTime ?? rec.createTime;
  return {
    ...rec,
    startTime,
    status: end.status,
    endTime: end.endTime,
    duration: end.endTime - startTime,
    summary: end.summary,
    result: end.result ?? null,
    error: end.error ?? null,
    stdout: end.stdout ?? null,
    stderr: end.stderr ?? null,
    detail: end.detail ?? null,
    rerunOf: rec.rerunOf ?? null,
  };
}
