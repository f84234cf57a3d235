import { newId } from "../../src/ids.ts";
import type { NewRun } from "../../src/store/types.ts";

let seq = 0;

/**
 * A new QUEUED run record of a script in scope app1/space1, any field overridden; each call's
 * creation time is later than the one before, so "oldest first" orders follow the calls.
 */
export function newRun(over: Partial<NewRun> = {}): NewRun {
  return {
    id: newId(),
    scope: { app: "app1", space: "space1" },
    elementId: "1",
    elementType: "PY",
    elementName: "script",
    folderId: "f1",
    version: null,
    triggerType: "ASYNC",
    status: "QUEUED",
    runName: null,
    runParam: null,
    initiator: null,
    parentRunId: null,
    inProcess: false,
    nodeId: null,
    createTime: 1_700_000_000_000 + seq++,
    ...over,
  };
}
