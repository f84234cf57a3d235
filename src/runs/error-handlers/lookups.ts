import { type Configure, normalizeConfigure } from "../../flows/graph.ts";
import type { Run, Store } from "../../store/types.ts";
import type { FailureEvent } from "./types.ts";

// What the error handlers read of a run from the store when the event does not tell it: a run
// ended by recovery, or owed notifications taken over at start (docs/error-handlers.md).

/**
 * A run a custom handler started, known from the store when no mark of it is held here (it
 * executed on another node, or this process restarted): it has a parent but no initiator, its
 * parameter is a handler's event about that parent, and its parent had already ended when it was
 * created. A sub-flow's child is created while its parent runs; a run started through the API
 * with a `parentRunId` and no user (the header is optional there) has a parameter of its own.
 */
export async function startedByHandler(store: Store, run: Run): Promise<boolean> {
  if (run.parentRunId === null || run.initiator !== null) return false;
  if (!isEventAbout(run.runParam, run.parentRunId)) return false;
  const parent = await store.getRun(null, run.parentRunId);
  return parent?.endTime != null && parent.endTime <= run.createTime;
}

/** Whether a run's parameter is the event a handler is given about run `id` (custom.ts). */
function isEventAbout(runParam: string | null, id: string): boolean {
  try {
    const p = JSON.parse(runParam ?? "null") as Partial<FailureEvent> | null;
    return p?.runId === id && (p.event === "run.failure" || p.event === "run.timeout");
  } catch {
    return false;
  }
}

/** A flow run's configuration when the event does not carry it (recovery, shutdown). */
export async function configureOf(store: Store, run: Run): Promise<Configure | undefined> {
  if (run.elementType !== "DPL" || run.version === null) return undefined;
  const rev = await store.flowRevision(run.elementId, Number(run.version));
  return rev ? normalizeConfigure(rev.configure) : undefined;
}
