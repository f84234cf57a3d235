import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ZygotePool } from "../../src/scripts/python-runner-zygote.ts";
import { within } from "../helpers/wait.ts";
import { createFakeClock } from "../scheduler/fake-clock.ts";

const silent = { info() {}, warn() {}, error() {}, debug() {} };

/** A pool whose "zygote" is a shell that says ready and then runs `body`. */
function pool(body: string, prefork = 0) {
  return new ZygotePool({
    command: "/bin/sh",
    args: ["-c", `echo "ready $$"; ${body}`],
    env: { PATH: "/usr/bin:/bin" },
    prefork,
    logger: silent,
    clock: createFakeClock(),
  });
}

/**
 * A task's wait for a child of its zygote (docs/script-dependencies.md, "Warm start"): a
 * preloading zygote's reports may be written by its packages, and one that never forks must
 * not keep a task waiting for good.
 */
describe("taking a child of a zygote", () => {
  it("ignores an `e` report whose count is not a positive integer", async () => {
    // Its first answer to `f` is garbage (a package writes to the zygote's pipe); then every
    // `f N` is answered `e N`, as by a zygote that has no process left to fork.
    const p = pool(
      'while read cmd n; do [ -z "$once" ] && once=1 && echo "e -Infinity garbage"; echo "e $n no process"; done',
    );
    try {
      await p.start();
      await within(assert.rejects(p.take(), /no process/), 5000, "the first take failed");
      // With the garbage counted, the pool took forks for asked for ever and never asked again.
      await within(assert.rejects(p.take(), /no process/), 5000, "the next take failed");
    } finally {
      await p.close();
    }
  });

  it("ends a take when its signal aborts, and a pending take at close", async () => {
    const p = pool("exec cat > /dev/null"); // ready, then never forks
    try {
      await p.start();
      const ended = new AbortController();
      const first = p.take(ended.signal);
      const second = p.take();
      ended.abort();
      await within(assert.rejects(first), 5000, "the aborted take ended");
      const closing = p.close();
      await within(assert.rejects(second, /closed/), 5000, "the pending take ended at close");
      await closing;
      await assert.rejects(p.take(), /closed/);
    } finally {
      await p.close();
    }
  });
});
