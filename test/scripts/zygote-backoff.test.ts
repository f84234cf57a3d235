import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ZygotePool } from "../../src/scripts/python-runner-zygote.ts";
import { condition, pollUntil } from "../helpers/wait.ts";
import { createFakeClock } from "../scheduler/fake-clock.ts";

const silent = { info() {}, warn() {}, error() {}, debug() {} };

/**
 * A pool whose "zygote" is a shell that says ready and then `body`: the restart delays it asks
 * the clock for are recorded (docs/security.md, "Preloading": a preloaded package can end its
 * zygote, which must not make the node restart it in a tight loop).
 */
function pool(body: string) {
  const clock = createFakeClock();
  const delays: number[] = [];
  const asked = condition();
  const setTimeout = clock.setTimeout.bind(clock);
  clock.setTimeout = (fn, ms) => {
    if (ms >= 50) {
      delays.push(ms);
      asked.changed();
    }
    return setTimeout(fn, ms);
  };
  const p = new ZygotePool({
    command: "/bin/sh",
    args: ["-c", `echo "ready $$"; ${body}`],
    env: { PATH: "/usr/bin:/bin" },
    prefork: 0,
    logger: silent,
    clock,
  });
  return { p, clock, delays, asked };
}

describe("zygote restarts", () => {
  it("back off further each time a zygote dies soon after it is ready", async () => {
    const { p, clock, delays, asked } = pool("exit 3");
    await p.start();
    for (let i = 1; i <= 5; i++) {
      await asked.until(() => delays.length === i, `restart ${i} asked for`);
      await clock.advanceAsync(delays[i - 1] ?? 0);
    }
    await p.close();
    assert.deepEqual(delays.slice(0, 5), [50, 100, 200, 400, 800]);
  });

  it("start again from the shortest delay after a zygote that lived a while", async () => {
    const { p, clock, delays, asked } = pool("exec cat");
    await p.start();
    process.kill(p.zygotePid as number, "SIGKILL");
    await asked.until(() => delays.length === 1, "the first restart");
    await clock.advanceAsync(50);
    await pollUntil(
      () => p.zygotePid,
      (pid) => pid !== undefined,
      "the restarted zygote ready",
    );
    await clock.advanceAsync(61_000);
    process.kill(p.zygotePid as number, "SIGKILL");
    await asked.until(() => delays.length === 2, "the second restart");
    await p.close();
    assert.deepEqual(delays, [50, 50]);
  });
});

describe("a preloading zygote's hold", () => {
  it("is let go when its zygote exits before Node has put it in its cgroup", async () => {
    const clock = createFakeClock();
    const letGo = condition();
    let released = 0;
    const gone = (pid: number) => {
      try {
        process.kill(pid, 0);
        return false;
      } catch {
        return true;
      }
    };
    const p = new ZygotePool({
      command: "/bin/sh",
      // It goes before its hold is done (killed, or its pool closed meanwhile).
      args: ["-c", 'echo "hold $$"; exit 3'],
      env: { PATH: "/usr/bin:/bin" },
      prefork: 0,
      logger: silent,
      clock,
      onHold: async (pid) => {
        await pollUntil(() => gone(pid), Boolean, "the zygote gone");
        return async () => {
          released++;
          letGo.changed();
        };
      },
    });
    await assert.rejects(p.start(), /exited before ready/);
    await letGo.until(() => released === 1, "its cgroup released");
    await p.close();
  });
});
