/**
 * bench/webhooks: completion webhooks (docs/webhooks.md) on loopback. A receiver in this process
 * records when each delivery arrives; the service (a real process, embedded mode) runs a no-script
 * flow whose configure names it. Figures:
 *  - added latency: arrival at the receiver minus the run's recorded endTime, per delivery, at
 *    c=1 (sequential run-sync) and under load (c=8); against the baseline of a bare POST of the
 *    same size from this process to the same receiver, measured in the same run;
 *  - deliveries/s: N runs at c=8, from the first call to the last delivery, against the same
 *    runs without a webhook (runs/s of run-sync) as the baseline.
 * Target (issue 17): added latency p50 <= 20 ms on loopback.
 *
 *   node bench/webhooks.ts                 (BENCH_N=1000 runs per figure)
 */
import { NO_SCRIPT_FLOW } from "../test/helpers/flows.ts";
import { type Receiver, startReceiver } from "../test/helpers/webhook-receiver.ts";
import { load, percentile, postJson, row, startBenchServer } from "./lib.ts";

const N = Number(process.env.BENCH_N ?? 1000);
const DF = "/dataflow-3-0";
const PARAM = { orders: [{ amount: 2, qty: 3 }] };

const rx: Receiver = await startReceiver();
const server = await startBenchServer({ LIMIT_QUEUED_RUNS: String(N + 100) });

async function deploy(name: string, configure: unknown): Promise<void> {
  const d = await postJson(`${server.url}${DF}/flow/deploy`, {
    elementName: name,
    revisionName: "bench",
    path: "/bench",
    flow: NO_SCRIPT_FLOW,
    configure: { logContent: "CONCISE", ...(configure as object) },
  });
  if ((d.json as { status: boolean }).status !== true) throw new Error(JSON.stringify(d.json));
  await postJson(`${server.url}${DF}/flow/activate`, { elementName: name });
}

const runSync = (name: string) => async () => {
  const r = await postJson(`${server.url}${DF}/run-sync`, { elementName: name, parameter: PARAM });
  if ((r.json as { status: boolean }).status !== true) throw new Error(JSON.stringify(r.json));
};

/** Arrival minus endTime of the deliveries received from index `from` on, sorted. */
function addedMs(from: number): number[] {
  return rx.received
    .slice(from)
    .map((x) => x.at - Number(x.json.endTime))
    .sort((a, b) => a - b);
}

async function delivered(count: number): Promise<void> {
  await rx.cond.until(() => rx.received.length >= count, `${count} deliveries`, 600_000);
}

try {
  await deploy("plain", {});
  await deploy("hooked", { webhooks: [{ url: `${rx.url}/hook` }] });
  await load(8, 200, runSync("plain"));
  await load(8, 200, runSync("hooked"));
  await delivered(200);

  // Baseline of the latency: the same receiver, a bare POST of a delivery's size, from here.
  const sample = rx.received[0]?.body ?? "{}";
  const bare = await load(1, N, async () => {
    const res = await fetch(`${rx.url}/bare`, { method: "POST", body: sample });
    await res.text();
  });
  console.log(row("bare POST to the receiver (baseline)", bare));

  const verdicts: string[] = [];
  for (const c of [1, 8]) {
    const from = rx.received.length;
    await load(c, N, runSync("hooked"));
    await delivered(from + N);
    const added = addedMs(from);
    const p50 = percentile(added, 50);
    console.log(
      `run end → delivery c=${c}            n=${String(N).padStart(5)}  p50=${p50.toFixed(2).padStart(7)} ms  p99=${percentile(added, 99).toFixed(2).padStart(7)} ms   p50 = ${(p50 / bare.p50).toFixed(1)}x a bare POST`,
    );
    if (c === 1)
      verdicts.push(`${p50 <= 20 ? "met    " : "MISSED "} added latency p50 <= 20 ms: ${p50} ms`);
  }

  const base = await load(8, N, runSync("plain"));
  console.log(row("run-sync without webhook (baseline)", base));
  const from = rx.received.length;
  const t0 = performance.now();
  const hooked = await load(8, N, runSync("hooked"));
  await delivered(from + N);
  const perSecond = N / ((performance.now() - t0) / 1000);
  console.log(row("run-sync with one webhook", hooked));
  console.log(
    `deliveries/s (first call to last delivery, c=8): ${perSecond.toFixed(0)}/s = ${((100 * perSecond) / base.perSecond).toFixed(0)} % of the runs/s without webhook`,
  );
  const failed = rx.received.filter((x) => x.answered >= 300).length;
  const twice = [...rx.successes().values()].filter((n) => n > 1).length;
  console.log(`deliveries refused: ${failed}, delivered more than once: ${twice}`);
  for (const v of verdicts) console.log(v);
} finally {
  await server.stop();
  await rx.close();
}
