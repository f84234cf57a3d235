import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { ZygotePool } from "../../src/scripts/python-runner-zygote.ts";
import { within } from "../helpers/wait.ts";
import { createFakeClock } from "../scheduler/fake-clock.ts";

/**
 * docs/security.md, "Preloading": a report out of turn stops a preloading zygote. Its own `ready`
 * may already be on its way (the package wrote `hold` at import, and the zygote went on to say
 * ready while Node killed it): that `ready` must not make the start succeed. The stopped zygote
 * then served tasks until it died under them (seen once in CI, under load), and every restart
 * did the same: its environment's tasks never got a zygote that preloads nothing.
 */
describe("a preloading zygote that sends a report out of turn", () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), "sluice-forged-"));
    execFileSync("mkfifo", [path.join(dir, "go"), path.join(dir, "done")]);
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("fails to start, even when its own `ready` reaches Node before its exit", async () => {
    const go = path.join(dir, "go");
    const done = path.join(dir, "done");
    const logged: string[] = [];
    const logger = {
      info() {},
      warn() {},
      debug() {},
      error(_o: object, msg: string) {
        logged.push(msg);
        // Node takes the forged `hold` and, before it kills the zygote, the zygote's genuine
        // `ready` is in the pipe (here made certain: it is written and confirmed first).
        if (msg.includes("out of turn"))
          execFileSync("/bin/sh", ["-c", 'echo > "$0"; cat "$1"', go, done], { timeout: 10_000 });
      },
    };
    const p = new ZygotePool({
      command: "/bin/sh",
      // Its `hold`, then (after `g`) its package's forged one, then its `ready` on demand.
      args: [
        "-c",
        'echo "hold $$"; read g; echo "hold 1"; read _ < "$1"; echo "ready $$"; echo > "$2"; exec cat',
        "sh",
        go,
        done,
      ],
      env: { PATH: "/usr/bin:/bin" },
      prefork: 1,
      logger,
      clock: createFakeClock(),
    });
    try {
      await within(assert.rejects(p.start(), /out of turn/), 10_000, "the start settled");
      assert.equal(p.zygotePid, undefined);
      assert.equal(logged[0], "python zygote sent a report out of turn: stopped");
    } finally {
      await p.close();
    }
  });
});
