import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createQueuedHere } from "../../src/runs/queued-here.ts";
import { newRun } from "../helpers/runs.ts";

describe("runs kept in memory while queued (a budget of their parameters' bytes)", () => {
  const run = (id: string, chars: number) => newRun({ id, runParam: "x".repeat(chars) });

  it("keeps runs while their parameters fit, and a run that ended gives its room back", () => {
    const q = createQueuedHere(100);
    q.keep(run("a", 60), "A");
    q.keep(run("b", 50), "B"); // 110 > 100: started from the store instead
    q.keep(run("c", 40), "C");
    assert.equal(q.get("a")?.parameter, "A");
    assert.equal(q.get("b"), undefined);
    assert.equal(q.get("c")?.parameter, "C");
    q.delete("a");
    q.delete("a"); // twice: the room is given back once
    q.keep(run("d", 60), "D");
    assert.equal(q.get("d")?.parameter, "D");
    q.keep(run("e", 1), "E"); // 40 + 60 + 1 > 100
    assert.equal(q.get("e"), undefined);
  });

  it("keeps a run once: a second keep neither replaces it nor counts it twice", () => {
    const q = createQueuedHere(100);
    q.keep(run("a", 60), "first");
    q.keep(run("a", 60), "second");
    assert.equal(q.get("a")?.parameter, "first");
    q.keep(run("b", 40), "B");
    assert.equal(q.get("b")?.parameter, "B");
  });
});
