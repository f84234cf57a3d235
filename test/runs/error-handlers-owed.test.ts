import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { systemClock } from "../../src/clock.ts";
import { normalizeConfigure } from "../../src/flows/graph.ts";
import { createErrorHandlers, type ErrorHandlerDeps } from "../../src/runs/error-handlers/index.ts";
import { owedEnd } from "../../src/runs/error-handlers/owed.ts";
import { createRunEvents } from "../../src/runs/run-events.ts";
import type { ErrorHandlerResult, Run, RunEnd } from "../../src/store/types.ts";
import { newRun } from "../helpers/runs.ts";

/** The mark of owed notifications (docs/error-handlers.md, "Durable") as the handlers see it. */

const T0 = 1_700_000_000_000;
const FAILED: RunEnd = { status: "FAILURE", endTime: T0 + 2, summary: "boom", error: "boom" };
const WITH = normalizeConfigure({
  errorHandlers: { email: { to: ["ops@example.com"] }, bot: { webhookUrl: "http://10.0.0.1/" } },
});
const WITHOUT = normalizeConfigure({});

function failedRun(id: string): Run {
  return {
    ...newRun({ id, elementType: "DPL", version: "1", status: "FAILURE" }),
    startTime: T0 + 1,
    endTime: T0 + 2,
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

/** Handlers over a fake store that counts what is read, recorded and cleared. */
function handlers(recordedBefore: ErrorHandlerResult[] = []) {
  const events = createRunEvents({ clock: systemClock });
  const calls = { reads: 0, cleared: [] as string[][], recorded: [] as ErrorHandlerResult[] };
  const deps = {
    store: {
      getRun: async (_: unknown, id: string) => {
        calls.reads++;
        return failedRun(id);
      },
      flowRevision: async () => ({ configure: WITH }),
      errorHandlerResults: async () => recordedBefore,
      addErrorHandlerResult: async (_: string, r: ErrorHandlerResult) => {
        calls.recorded.push(r);
      },
    },
    notices: {
      clear: async (runId: string, holder: string) => {
        calls.cleared.push([runId, holder]);
        return true;
      },
    },
    flows: {},
    tasks: {},
    events,
    clock: systemClock,
    logger: { error() {}, warn() {} },
    // No SMTP and private addresses refused: both handlers fail at once, without retries.
    config: {
      smtpUrl: undefined,
      smtpFrom: "sluice@test.local",
      language: "en",
      allowPrivateWebhooks: false,
      attempts: 3,
      backoffMs: 1,
      webhookTimeoutMs: 1000,
      customWaitS: 1,
      concurrency: 4,
    },
  } as unknown as ErrorHandlerDeps;
  return { h: createErrorHandlers(deps), events, calls };
}

const facts = (id: string) => ({
  id,
  elementType: "DPL" as const,
  triggerType: "API" as const,
  createTime: T0,
  startTime: T0,
});

describe("owed error-handler notifications", () => {
  it("only a flow FAILURE whose release names handlers is marked", () => {
    assert.equal(owedEnd(FAILED, "DPL", WITH, "n1").notifyBy, "n1");
    assert.equal(owedEnd(FAILED, "DPL", WITHOUT, "n1").notifyBy, undefined);
    assert.equal(owedEnd(FAILED, "DPL", undefined, "n1").notifyBy, undefined);
    assert.equal(owedEnd(FAILED, "PY", WITH, "n1").notifyBy, undefined);
    const ok: RunEnd = { status: "SUCCESS", endTime: T0, summary: null };
    assert.equal(owedEnd(ok, "DPL", WITH, "n1"), ok, "the very end, untouched");
  });

  it("the mark is cleared once every outcome is recorded; an unmarked end reads and clears nothing", async () => {
    const { h, events, calls } = handlers();
    events.publish({
      type: "ended",
      runId: "r1",
      end: { ...FAILED, notifyBy: "n1" },
      run: facts("r1"),
      configure: WITH,
    });
    await h.idle();
    assert.deepEqual(calls.recorded.map((r) => r.kind).sort(), ["bot", "email"]);
    assert.deepEqual(calls.cleared, [["r1", "n1"]]);
    const before = { reads: calls.reads, cleared: calls.cleared.length };
    events.publish({
      type: "ended",
      runId: "r2",
      end: FAILED,
      run: facts("r2"),
      configure: WITHOUT,
    });
    events.publish({
      type: "ended",
      runId: "r3",
      end: { status: "SUCCESS", endTime: T0, summary: null },
      run: facts("r3"),
      configure: WITH,
    });
    await h.idle();
    assert.deepEqual({ reads: calls.reads, cleared: calls.cleared.length }, before);
  });

  it("a mark taken over sends only the handlers whose outcome is not recorded, then clears it", async () => {
    const bot: ErrorHandlerResult = {
      kind: "bot",
      ok: true,
      attempts: 1,
      at: T0,
      event: "run.failure",
    };
    const { h, calls } = handlers([bot]);
    await h.resend("r9", "n2");
    await h.idle();
    assert.deepEqual(
      calls.recorded.map((r) => r.kind),
      ["email"],
    );
    assert.deepEqual(calls.cleared, [["r9", "n2"]]);
  });
});
