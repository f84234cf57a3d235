import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { describe, it } from "node:test";
import { killHard } from "../helpers/process.ts";
import { line, pollUntil } from "../helpers/wait.ts";

/**
 * docs/security.md, "The end of a task": an upload's syntax check drops to a task's uid, which
 * clears the parent-death signal bubblewrap set for it; it sets it again, so a killed service
 * (and its bubblewrap) takes the check along rather than leaving it to its CPU limit. Here a
 * plain parent stands for bubblewrap: killed while the check waits for the rest of a file.
 */
const CHECK = path.resolve(import.meta.dirname, "../../src/scripts/python/syntax_check.py");
const NOBODY = 65534;

const uidOf = (pid: number) => {
  try {
    return Number(/^Uid:\s+(\d+)/m.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))?.[1]);
  } catch {
    return -1; // gone
  }
};
const alive = (pid: number) => {
  try {
    return !/^State:\s+Z/m.test(fs.readFileSync(`/proc/${pid}/status`, "utf8"));
  } catch {
    return false;
  }
};

describe("an upload's syntax check whose parent is killed", () => {
  it("dies with it, after its uid switch", async () => {
    const opts = JSON.stringify({ uid: NOBODY, lim: { cpu: 30 } });
    // The parent starts the check on a pipe whose write end a third process also holds (so the
    // parent's death is no end of input), writes half a file into it, says both pids, and waits.
    const parent = spawn(
      "/usr/bin/python3",
      [
        "-I",
        "-c",
        "import json, os, subprocess, sys, time\n" +
          "r, w = os.pipe()\n" +
          "holder = subprocess.Popen(['/bin/sleep', '600'], pass_fds=[w])\n" +
          "c = subprocess.Popen([sys.executable, '-I', '-S', '-B', sys.argv[1], sys.argv[2]], stdin=r)\n" +
          "os.write(w, (json.dumps({'name': 'a.py', 'size': 100}) + '\\nx = 1\\n').encode())\n" +
          "print(c.pid, holder.pid, flush=True)\n" +
          "time.sleep(600)\n",
        CHECK,
        opts,
      ],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    let holder = 0;
    try {
      const [pid, held] = (await line(parent.stdout, /^\d+ \d+$/)).split(" ").map(Number);
      holder = held as number;
      await pollUntil(
        () => uidOf(pid as number),
        (u) => u === NOBODY,
        "the check runs as the task uid",
      );
      await killHard(parent);
      await pollUntil(
        () => alive(pid as number),
        (a) => !a,
        "the check is gone with its parent",
        {
          ms: 5000,
        },
      );
      assert.equal(alive(pid as number), false);
    } finally {
      if (parent.exitCode === null) await killHard(parent);
      if (holder) process.kill(holder, "SIGKILL");
    }
  });
});
