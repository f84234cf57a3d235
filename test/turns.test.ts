import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createTurns } from "../src/turns.ts";

type Job = { name: string; app: string; space: string };
const job = (name: string, app: string, space = "prod"): Job => ({ name, app, space });

/** Takes every job, one at a time, settling each before the next (one process). */
function order(jobs: Job[]): string[] {
  const turns = createTurns<Job>();
  for (const j of jobs) turns.add(j, j);
  const out: string[] = [];
  for (let j = turns.take(); j; j = turns.take()) {
    out.push(j.name);
    turns.settle(j);
  }
  return out;
}

describe("turns of the expression processes", () => {
  it("give each app a turn in the order they were served, each space's jobs oldest first", () => {
    assert.deepEqual(
      order([
        job("a1", "A"),
        job("a2", "A"),
        job("a3", "A"),
        job("b1", "B"),
        job("c1", "C"),
        job("b2", "B"),
      ]),
      ["a1", "b1", "c1", "a2", "b2", "a3"],
    );
  });

  // Found by review: turns per space gave an app one turn per space it used.
  it("give an app that spreads its jobs over many spaces one turn, its spaces taking turns within it", () => {
    const spread = ["s1", "s2", "s3", "s4"].flatMap((s) => [
      job(`A.${s}.1`, "A", s),
      job(`A.${s}.2`, "A", s),
    ]);
    const names = order([...spread, job("b1", "B"), job("b2", "B"), job("b3", "B")]);
    assert.deepEqual(names.slice(0, 6), ["A.s1.1", "b1", "A.s2.1", "b2", "A.s3.1", "b3"]);
    assert.deepEqual(names.slice(6), ["A.s4.1", "A.s1.2", "A.s2.2", "A.s3.2", "A.s4.2"]);
  });

  it("give a job that comes back its turn again, first in its space", () => {
    const turns = createTurns<Job>();
    const [a1, a2, b1] = [job("a1", "A"), job("a2", "A"), job("b1", "B")];
    for (const j of [a1, a2, b1]) turns.add(j, j);
    assert.equal(turns.take(), a1);
    assert.equal(turns.take(), b1);
    // a1's process died before running it: it goes back, ahead of a2, and A has its turn back.
    turns.settle(a1);
    turns.add(a1, a1, true);
    const c1 = job("c1", "C");
    turns.add(c1, c1);
    // A's turn was never had (it was served as C never was): a1 first, then C before A again.
    assert.equal(turns.take(), a1);
    assert.equal(turns.take(), c1);
    assert.equal(turns.take(), a2);
    assert.equal(turns.take(), undefined);
  });

  it("forget an owner with nothing waiting or running, and drain what waits", () => {
    const turns = createTurns<Job>();
    const [a1, a2] = [job("a1", "A"), job("a2", "A", "test")];
    turns.add(a1, a1);
    turns.add(a2, a2);
    assert.equal(turns.take(), a1);
    assert.deepEqual(turns.drain(), [a2]);
    turns.settle(a1);
    turns.settle(a1); // once too often: nothing to settle, nothing breaks
    assert.equal(turns.take(), undefined);
  });
});
