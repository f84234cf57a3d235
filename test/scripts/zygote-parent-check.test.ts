import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import path from "node:path";
import { describe, it } from "node:test";

/**
 * docs/security.md, "The end of a task": a task's child re-sets its parent-death signal after its
 * uid switch (which clears it), then reads its own stat file, opened while its parent was the
 * zygote, to see whether the zygote died before the signal was set. Here the zygote's own code
 * (`zygote_gone`, `stat_fd`, `zygote_pid`), in a process tree made for the purpose: a child
 * asks while its zygote lives, then once the zygote has exited.
 */
const PROGRAM = `
import os, sys
sys.path.insert(0, sys.argv[1])
import zygote

out_r, out_w = os.pipe()    # what the child found, to this process
go_r, go_w = os.pipe()      # the child asked once: the zygote may go
gone_r, gone_w = os.pipe()  # this process reaped the zygote: its children are re-parented
z = os.fork()
if z == 0:  # the zygote
    zygote.zygote_pid = os.getpid()
    c = os.fork()
    if c == 0:  # its child
        os.close(gone_w)
        zygote.stat_fd = os.open("/proc/self/stat", os.O_RDONLY)
        alive = zygote.zygote_gone()
        os.write(go_w, b"x")
        os.read(gone_r, 1)
        os.write(out_w, b"%d %d" % (alive, zygote.zygote_gone()))
        os._exit(0)
    os.read(go_r, 1)
    os._exit(0)
os.close(out_w)
os.close(go_w)
# Not the zygote's descriptors closing (an exit closes them before it re-parents the children):
# its reaping, which comes after.
os.waitpid(z, 0)
os.write(gone_w, b"x")
print(os.read(out_r, 16).decode())
`;

describe("a task's child looking for its zygote after its uid switch", () => {
  it("finds it while it lives, and gone once it has exited", () => {
    const dir = path.resolve(import.meta.dirname, "../../src/scripts/python");
    const out = execFileSync("/usr/bin/python3", ["-I", "-c", PROGRAM, dir], {
      encoding: "utf8",
      timeout: 20_000,
    });
    assert.equal(out.trim(), "0 1", "alive then gone");
  });
});
