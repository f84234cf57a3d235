/**
 * Cron scale bench: N schedules that all fire on every tick, on the real clock.
 *
 *   node bench/cron-scale.ts                      # 10,000 × `* * * * * *`, 5 ticks (seconds)
 *   node bench/cron-scale.ts --mode minute        # 10,000 × `* * * * *`, 3 ticks (3 minutes)
 *   node bench/cron-scale.ts --distinct           # every schedule its own crontab/zone string
 *   node --expose-gc bench/cron-scale.ts          # heap figure without garbage
 *
 * `--distinct` defeats the shared-spec memo (one croner computation per tick for equal specs),
 * showing the cost when every schedule needs its own next-tick computation.
 *
 * Lateness = wall time when `fire` is called − the tick time it fires for.
 */
import { parseArgs } from "node:util";
import { systemClock } from "../src/clock.ts";
import { createScheduler } from "../src/scheduler/scheduler.ts";

const { values } = parseArgs({
  options: {
    schedules: { type: "string", default: "10000" },
    ticks: { type: "string" },
    mode: { type: "string", default: "second" },
    distinct: { type: "boolean", default: false },
  },
});
const count = Number(values.schedules);
const minute = values.mode === "minute";
const ticks = Number(values.ticks ?? (minute ? 3 : 5));

/** Crontabs equivalent to "every second" (or minute) whose strings differ, in varied zones. */
function crontabFor(i: number): { crontab: string; timezone: string } {
  const base = minute ? "* * * * *" : "* * * * * *";
  if (!values.distinct) return { crontab: base, timezone: "UTC" };
  const zones = [
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Asia/Tokyo",
    "Australia/Sydney",
    "Asia/Kolkata",
    "America/Sao_Paulo",
    "Africa/Cairo",
  ];
  const k = i % 59;
  const j = Math.floor(i / 59) % 23;
  const zone = zones[Math.floor(i / (59 * 23)) % zones.length] ?? "UTC";
  const first = `0-${k},${k + 1}-59`; // seconds (or minutes) 0-59, written differently per i
  const hours = `0-${j},${j + 1}-23`;
  return {
    crontab: minute ? `${first} ${hours} * * *` : `${first} * ${hours} * * *`,
    timezone: zone,
  };
}

const lateness: number[] = [];
const perTick = new Map<
  number,
  { first: number; last: number; cpuFirst: NodeJS.CpuUsage; cpuMs: number; n: number }
>();
const firstTicks: number[] = [];
let done: () => void = () => {};
const finished = new Promise<void>((resolve) => {
  done = resolve;
});

const scheduler = createScheduler({
  clock: systemClock,
  logger: { warn: (o, m) => console.warn(m, o), error: (o, m) => console.error(m, o) },
  fire: (_schedule, tickMs) => {
    const now = Date.now();
    lateness.push(now - tickMs);
    let t = perTick.get(tickMs);
    if (!t) {
      t = { first: now, last: now, cpuFirst: process.cpuUsage(), cpuMs: Number.NaN, n: 0 };
      perTick.set(tickMs, t);
      firstTicks.push(tickMs);
    }
    t.last = now;
    t.n++;
    if (t.n === count) {
      // CPU of the whole fire loop for this tick (all schedules are due together).
      const c = process.cpuUsage(t.cpuFirst);
      t.cpuMs = (c.user + c.system) / 1000;
    }
    if (lateness.length >= count * ticks) done();
    return Promise.resolve();
  },
});

/** With --expose-gc, heap figures exclude garbage (croner builds and drops big tables). */
const gc = (globalThis as { gc?: () => void }).gc;
gc?.();
const heapBefore = process.memoryUsage().heapUsed;
let t0 = performance.now();
for (let i = 0; i < count; i++) {
  const { crontab, timezone } = crontabFor(i);
  scheduler.upsertFlow(`flow-${i}`, [{ type: "cron", name: "every", crontab, timezone }], true);
}
const deployMs = performance.now() - t0;
t0 = performance.now();
await scheduler.start();
const startMs = performance.now() - t0;
gc?.();
const heapMb = (process.memoryUsage().heapUsed - heapBefore) / 1e6;

// The scheduler's timer is unref'd (the HTTP server keeps a real process alive); keep this one up.
const keepAlive = setInterval(() => {}, 1_000);
const cpuStart = process.cpuUsage();
const wallStart = performance.now();
await finished;
const cpu = process.cpuUsage(cpuStart);
const wallMs = performance.now() - wallStart;
clearInterval(keepAlive);
scheduler.stop();

const sorted = [...lateness].sort((a, b) => a - b);
const pct = (p: number): number =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
console.log(
  `cron-scale: ${count} schedules × ${ticks} ticks (${minute ? "minute" : "second"}${values.distinct ? ", distinct specs" : ", shared spec"}), node ${process.version}`,
);
console.log(
  `  deploy ${count} flows: ${deployMs.toFixed(0)} ms; start(): ${startMs.toFixed(0)} ms; heap +${heapMb.toFixed(1)} MB${gc ? "" : " (incl. garbage; run with --expose-gc)"}`,
);
console.log(
  `  fires: ${lateness.length}; process CPU over ${(wallMs / 1000).toFixed(1)} s: ${((cpu.user + cpu.system) / 1000).toFixed(0)} ms`,
);
for (const tick of firstTicks.slice(0, ticks)) {
  const t = perTick.get(tick);
  if (!t) continue;
  console.log(
    `  tick ${new Date(tick).toISOString()}: ${t.n} fires, fire-loop CPU ${t.cpuMs.toFixed(1)} ms, first→last fire ${t.last - t.first} ms, first fire ${t.first - tick} ms late`,
  );
}
console.log(
  `  CPU per tick (process total / ticks): ${((cpu.user + cpu.system) / 1000 / ticks).toFixed(1)} ms`,
);
console.log(`  lateness ms: p50 ${pct(50)}  p99 ${pct(99)}  max ${sorted.at(-1)}`);
