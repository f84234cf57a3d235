import { parseArgs } from "node:util";
import { runFuzz } from "./helpers/fuzz-run.ts";

/**
 * `npm run fuzz -- [--seed N] [--runs M]`: the fuzz suite of `npm test`, longer. A failure prints
 * the seed and the shrunk request; the same seed reproduces it.
 */
const { values } = parseArgs({
  options: { seed: { type: "string" }, runs: { type: "string", default: "20000" } },
});
const seed = Number(values.seed ?? Date.now() % 2 ** 31);
const runs = Number(values.runs);
console.log(`fuzzing with seed ${seed}, ${runs} cases`);
try {
  const r = await runFuzz({ seed, runs });
  const rate = Math.round((r.cases / r.ms) * 1000);
  console.log(`${r.cases} cases in ${(r.ms / 1000).toFixed(1)} s (${rate}/s), seed ${seed}`);
  console.log(`${r.accepted} runs accepted, all found in the store`);
  console.log(`answers by code: ${JSON.stringify(r.codes)}`);
  process.exit(0);
} catch (err) {
  console.error(err);
  console.error(`failed with seed ${seed}: npm run fuzz -- --seed ${seed} --runs ${runs}`);
  process.exit(1);
}
