import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { systemClock } from "../../src/clock.ts";
import { normalizeConfigure } from "../../src/flows/graph.ts";
import { createErrorHandlers, type ErrorHandlerDeps } from "../../src/runs/error-handlers/index.ts";
import type { StartRequest } from "../../src/runs/flow-run-prepare.ts";
import { createRunEvents } from "../../src/runs/run-events.ts";
import type { ErrorHandlerResult, Run, RunEnd } from "../../src/store/types.ts";
import { newRun } from "../helpers/runs.ts";

const FAILED: RunEnd = { status: "FAILURE", endTime: 2, summary: "boom", error: "boom" };

/** A flow run record as the store would answer it, ended FAILURE. */
function failedRun(id: string): Run {
  return {
    ...newRun({ id, elementType: "DPL", elementName: "loops", version: "1", status: "FAILURE" }),
    startTime: 1,
    endTime: 2,
    duration: 1,
    summary: "boom",
    result: null,
    error: "boom",
    stdout: null,
    stderr: null,
    detail: null,
    rerunOf: null,
  };
}

describe("error handlers: a custom handler's own run", () => {
  it("calls no handlers when it fails, even when its end comes before its start is answered", async () => {
    // The flow's handler is the flow itself: each failing handler run calling the handlers again
    // would loop. The guard must not rest on the start being answered before the run's end is
    // published (today the end waits for a later commit; nothing promises it): this fake start
    // publishes the end first, every time.
    const events = createRunEvents({ clock: systemClock });
    const configure = normalizeConfigure({
      errorHandlers: { custom: { element: { elementName: "loops", elementType: "DPL" } } },
    });
    const started: string[] = [];
    const recorded: ErrorHandlerResult[] = [];
    const publishEnd = (runId: string) =>
      events.publish({
        type: "ended",
        runId,
        end: FAILED,
        run: { id: runId, elementType: "DPL", triggerType: "API", createTime: 1, startTime: 1 },
        configure,
      });
    const deps = {
      store: {
        getRun: async (_scope: unknown, id: string) => failedRun(id),
        addErrorHandlerResult: async (_id: string, r: ErrorHandlerResult) => {
          recorded.push(r);
        },
      },
      flows: {
        async start(req: StartRequest) {
          const id = req.runId ?? `handler-run-${started.length}`;
          started.push(id);
          // Bounded, so that a broken guard shows as a count instead of running forever.
          if (started.length <= 3) publishEnd(id);
          return id;
        },
        waitForEnd: async (_scope: unknown, id: string) => failedRun(id),
      },
      tasks: { submit: async () => "task" },
      events,
      clock: systemClock,
      logger: { error() {}, warn() {} },
      config: {
        smtpUrl: undefined,
        smtpFrom: "sluice@test.local",
        language: "en",
        allowPrivateWebhooks: false,
        attempts: 1,
        backoffMs: 1,
        webhookTimeoutMs: 1000,
        customWaitS: 1,
      },
    } as unknown as ErrorHandlerDeps;
    const handlers = createErrorHandlers(deps);
    publishEnd("the-failed-run");
    await handlers.idle();
    assert.equal(started.length, 1, `handler runs started: ${started.join(", ")}`);
    assert.deepEqual(
      recorded.map((r) => [r.kind, r.ok, r.runId]),
      [["custom", false, started[0]]],
      "the failed run's one result names the handler run",
    );
  });
});
