import type { NewRun } from "../store/types.ts";

/**
 * Runs this process queued and has not yet started, kept in memory with their parsed parameter so
 * that their start reads nothing back (docs/run-limits.md, "Queued runs"). Only within a budget
 * of their parameters' JSON bytes: a tenant's thousands of waiting runs with large parameters
 * held them all, and forty of 8 MiB exhausted a 256 MiB heap. A run not kept is started from
 * its stored record, as every run is in a cluster.
 */
export interface QueuedHere {
  /** Keeps the run if its parameter fits what is left of the budget. */
  keep(rec: NewRun, parameter: unknown): void;
  get(runId: string): { rec: NewRun; parameter: unknown } | undefined;
  delete(runId: string): void;
}

/** What the parameters of the runs kept take at most, as JSON text. */
export const QUEUED_PARAMS_KEPT_BYTES = 16 * 1024 * 1024;

export function createQueuedHere(maxBytes = QUEUED_PARAMS_KEPT_BYTES): QueuedHere {
  const runs = new Map<string, { rec: NewRun; parameter: unknown; bytes: number }>();
  let bytes = 0;
  return {
    keep(rec, parameter) {
      // JSON text length in UTF-16 units: a close enough measure of what the value holds.
      const size = rec.runParam?.length ?? 0;
      if (runs.has(rec.id) || bytes + size > maxBytes) return;
      runs.set(rec.id, { rec, parameter, bytes: size });
      bytes += size;
    },
    get: (runId) => runs.get(runId),
    delete(runId) {
      const kept = runs.get(runId);
      if (!kept) return;
      runs.delete(runId);
      bytes -= kept.bytes;
    },
  };
}
