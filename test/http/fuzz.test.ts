import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { runFuzz } from "../helpers/fuzz-run.ts";
import { TEST_MODE } from "../helpers/server.ts";

/**
 * The bounded fuzz run of `npm test` (docs/errors.md, "bad input"): a fresh seed each run, printed,
 * so a failure names the seed that reproduces it (`npm run fuzz -- --seed N`).
 */
describe("fuzzing every endpoint", () => {
  it("every answer is an envelope, no request ends the process, nothing accepted is lost", async (t) => {
    const seed = Number(process.env.FUZZ_SEED ?? Date.now() % 2 ** 31);
    const runs = Number(process.env.FUZZ_RUNS ?? (TEST_MODE === "cluster" ? 800 : 2500));
    t.diagnostic(`fuzz seed ${seed}, ${runs} cases (npm run fuzz -- --seed ${seed} reproduces)`);
    const result = await runFuzz({ seed, runs });
    t.diagnostic(
      `${result.cases} cases in ${result.ms} ms, ${result.accepted} runs accepted and found`,
    );
    t.diagnostic(`answers by code: ${JSON.stringify(result.codes)}`);
    assert.ok(result.cases > runs, `${result.cases} cases run`);
  });
});
