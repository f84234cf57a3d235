import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ReapedChildren } from "../../src/scripts/zygote-reaped.ts";

/**
 * The reaping of a task's child as the confirmation that nothing of its task is left, with a pid
 * namespace per child (docs/security.md, "The end of a task"): only a reaping of this very child
 * confirms it, a late one leaves the question to the zygote, a dead zygote confirms nothing.
 */
describe("reaped children (pid namespace per child)", () => {
  test("a child reaped before or after the question is confirmed", async () => {
    const r = new ReapedChildren();
    r.born(10);
    r.reaped(10);
    assert.equal(await r.wait(10, 5000), true);
    r.born(11);
    const later = r.wait(11, 5000);
    r.reaped(11);
    assert.equal(await later, true);
  });

  test("a record is used once, and a new child with the same pid is not its predecessor", async () => {
    const r = new ReapedChildren();
    r.born(12);
    r.reaped(12);
    assert.equal(await r.wait(12, 5000), true);
    assert.equal(await r.wait(12, 10), undefined, "the record was used");
    r.reaped(13);
    r.born(13); // pid 13 reused by a new child, still running
    assert.equal(await r.wait(13, 10), undefined, "late: the zygote is asked");
  });

  test("the zygote died: nothing is confirmed, and nothing recorded before counts", async () => {
    const r = new ReapedChildren();
    r.reaped(14);
    const waiting = r.wait(15, 5000);
    r.clear();
    assert.equal(await waiting, false);
    assert.equal(await r.wait(14, 10), undefined);
  });

  test("records are bounded; a dropped one only means asking the zygote", async () => {
    const r = new ReapedChildren();
    for (let pid = 1; pid <= ReapedChildren.KEEP + 1; pid++) r.reaped(pid);
    assert.equal(await r.wait(1, 10), undefined);
    assert.equal(await r.wait(ReapedChildren.KEEP + 1, 10), true);
  });
});
