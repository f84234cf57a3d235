/**
 * bench/script-deps: run-sync p50 of a script whose dependency takes 100 ms to import (a wheel
 * written here, installed from a local folder, no index) against a stdlib-only script, in the same
 * run: cold (the first run after upload: its environment's zygote starts and imports the package)
 * and warm (forked from that zygote, the package already imported). docs/script-dependencies.md.
 *
 *   npm run bench:script-deps            (N=1000 warm calls per script; BENCH_N to change)
 */

import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { writeWheel } from "../test/helpers/wheels.ts";
import { httpJson, load, row, startBenchServer, uploadScript } from "./lib.ts";

const N = Number(process.env.BENCH_N ?? 1000);
const wheels = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-bench-wheels-"));
writeWheel(wheels, {
  name: "bench-slow",
  version: "1.0",
  files: { "bench_slow/__init__.py": "import time\ntime.sleep(0.1)\ndef f(p):\n    return p\n" },
});
const SLOW =
  '# /// script\n# dependencies = ["bench-slow"]\n# ///\nimport bench_slow\n\ndef main(p):\n    return bench_slow.f(p)\n';
const PLAIN = "def main(p):\n    return p\n";

// Preloading is on by default (docs/security.md, "Preloading"): the warm start is measured.
const server = await startBenchServer({
  SCRIPT_PREFORK: "16",
  PIP_NO_INDEX: "true",
  PIP_FIND_LINKS: wheels,
});
try {
  const t0 = performance.now();
  await uploadScript(server.url, "slow", SLOW);
  console.log(`upload with the environment's build: ${(performance.now() - t0).toFixed(0)} ms`);
  await uploadScript(server.url, "plain", PLAIN);
  const call = (name: string) => async (i: number) => {
    const res = await httpJson(
      "POST",
      `${server.url}/script/external/${name}/run-sync`,
      `{"i":${i}}`,
    );
    if ((res.json as { i?: number }).i !== i || res.headers["x-task-status"] !== "SUCCESS")
      throw new Error(`bad answer ${JSON.stringify(res.json)}`);
  };
  const cold = performance.now();
  await call("slow")(0);
  console.log(`cold: first run after upload ${(performance.now() - cold).toFixed(1)} ms`);
  await load(4, 200, call("slow"));
  await load(4, 200, call("plain"));
  for (let round = 0; round < 2; round++) {
    const plain = await load(1, N, call("plain"));
    const slow = await load(1, N, call("slow"));
    console.log(row("stdlib-only script", plain));
    console.log(row("script importing a 100 ms package", slow));
    console.log(`  warm p50 difference: ${(slow.p50 - plain.p50).toFixed(2)} ms`);
  }
} finally {
  await server.stop();
  fs.rmSync(wheels, { recursive: true, force: true });
}
