import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, it } from "node:test";
import { heldIn } from "../../src/scripts/zygote-start.ts";

/**
 * docs/security.md, "The end of a task": a zygote is started by a shell that writes its own pid
 * into the block's `zygotes` cgroup, then becomes the zygote's command (same pid). A join that
 * fails still starts it, and says so on stderr, which the runner logs.
 */
describe("a zygote's command joining its block's zygotes cgroup", () => {
  it("writes the pid the command then runs as, and says nothing else", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-join-"));
    try {
      const procs = path.join(dir, "cgroup.procs");
      fs.writeFileSync(procs, "");
      const cmd = heldIn(procs, { command: "/bin/sh", args: ["-c", "echo $$"] });
      const r = spawnSync(cmd.command, cmd.args, { encoding: "utf8" });
      assert.equal(r.stderr, "");
      assert.equal(fs.readFileSync(procs, "utf8").trim(), r.stdout.trim());
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a join that fails starts the command all the same, and says so on stderr", () => {
    const procs = path.join(os.tmpdir(), "sluice-no-such-dir", "x", "cgroup.procs");
    const cmd = heldIn(procs, { command: "/bin/echo", args: ["ran"] });
    const r = spawnSync(cmd.command, cmd.args, { encoding: "utf8" });
    assert.equal(r.stdout, "ran\n");
    assert.equal(r.stderr, `could not join the zygotes cgroup ${procs}\n`);
  });
});
