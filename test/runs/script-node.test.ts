import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { RunDisk } from "../../src/runs/run-disk.ts";
import { scriptNodeRunner } from "../../src/runs/script-node.ts";
import type { ScriptRunner, TaskSpec } from "../../src/scripts/runner-types.ts";
import type { Store } from "../../src/store/types.ts";

/**
 * A flow's script node and its run's end (docs/security.md, "Disk", "Kept directories"): a run
 * ends as soon as it is aborted (a failed sibling node, its timeout, a terminate), without waiting
 * for its nodes. A node still on its way to its task then must not start one: nothing would kill
 * it, and it would write into the run's directory after the run ended, after that directory was
 * counted (or removed as empty).
 */

function fakeRunner() {
  const started: string[] = [];
  const killed: string[] = [];
  const runner = {
    async run(spec: TaskSpec) {
      started.push(spec.taskId);
      return { status: "SUCCESS", value: 1, stdout: "", stderr: "", durationMs: 1 };
    },
    kill(taskId: string) {
      killed.push(taskId);
      return true;
    },
  } as unknown as ScriptRunner;
  return { runner, started, killed };
}

describe("a script node whose run is aborted before its task starts", () => {
  it("an abort while the node waits for its admission starts no task", async () => {
    const r = fakeRunner();
    let admitted: (why: string | undefined) => void = () => {};
    const disk: RunDisk = {
      admit: () =>
        new Promise((resolve) => {
          admitted = resolve;
        }),
      watch: () => ({ end: async () => undefined }),
      stopped: undefined,
    };
    const run = scriptNodeRunner({
      store: {} as Store,
      runner: r.runner,
      scope: { app: "a", space: "s" },
      runId: "r1",
      pins: [],
      used: [],
      disk,
    });
    const ctl = new AbortController();
    const node = run({
      nodeId: "n",
      code: "def main(p):\n  return 1\n",
      parameter: {},
      signal: ctl.signal,
    });
    // The run is aborted while the node waits (the floor giving kept directories back, a statfs).
    await new Promise((resolve) => setImmediate(resolve));
    ctl.abort(new Error("run canceled"));
    admitted(undefined);
    const out = await node;
    assert.deepEqual(r.started, [], "no task started for an aborted run");
    assert.equal(out.ok, false);
  });
});
