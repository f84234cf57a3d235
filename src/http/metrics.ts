import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import type { RunQueue } from "../queue/types.ts";
import type { ScriptRunner, TaskOutcome } from "../scripts/runner-types.ts";
import type { Run, RunEnd, Store } from "../store/types.ts";

/**
 * Prometheus metrics of one service instance. Each instance has its own registry, so several
 * servers in one process (the tests) never share or double-register series.
 */
export interface Metrics {
  registry: Registry;
  httpDuration: Histogram<"method" | "route" | "status">;
  /** Wraps the store and runner so every run start/end and every script execution is counted. */
  instrument(store: Store, runner: ScriptRunner): void;
  /** Gauges read at scrape time (queue depth, pool sizes). */
  watch(queue: RunQueue, runner: ScriptRunner): void;
}

const SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 3600];

export function createMetrics(): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: "sluice_process_" });
  const runsStarted = new Counter({
    name: "sluice_runs_created_total",
    help: "Runs and script tasks accepted, by element type and trigger",
    labelNames: ["type", "trigger"] as const,
    registers: [registry],
  });
  const runsEnded = new Counter({
    name: "sluice_runs_total",
    help: "Runs and script tasks that ended, by element type, final status and trigger",
    labelNames: ["type", "status", "trigger"] as const,
    registers: [registry],
  });
  const runDuration = new Histogram({
    name: "sluice_run_duration_seconds",
    help: "Run duration from start (or creation when never started) to end",
    labelNames: ["type", "status"] as const,
    buckets: SECONDS,
    registers: [registry],
  });
  const scriptDuration = new Histogram({
    name: "sluice_script_duration_seconds",
    help: "Python executions (script tasks and flow script nodes), by outcome",
    labelNames: ["status"] as const,
    buckets: SECONDS,
    registers: [registry],
  });
  const httpDuration = new Histogram({
    name: "sluice_http_request_duration_seconds",
    help: "HTTP request latency by method, route pattern and HTTP status",
    labelNames: ["method", "route", "status"] as const,
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  });

  // What endRun cannot tell: trigger and times. Kept from insert/start, dropped at end.
  const pending = new Map<
    string,
    Pick<Run, "elementType" | "triggerType" | "createTime" | "startTime">
  >();

  return {
    registry,
    httpDuration,
    instrument(store, runner) {
      const insertRun = store.insertRun.bind(store);
      const startRun = store.startRun.bind(store);
      const endRun = store.endRun.bind(store);
      const getRun = store.getRun.bind(store);
      store.insertRun = async (run, end) => {
        await insertRun(run, end);
        runsStarted.inc({ type: run.elementType, trigger: run.triggerType });
        if (end) {
          // A fast run-sync is written once, already ended (see flow-runs.ts runSync).
          runsEnded.inc({ type: run.elementType, status: end.status, trigger: run.triggerType });
          const from = run.startTime ?? run.createTime;
          runDuration.observe(
            { type: run.elementType, status: end.status },
            Math.max(0, end.endTime - from) / 1000,
          );
          return;
        }
        if (pending.size < 100_000)
          pending.set(run.id, {
            elementType: run.elementType,
            triggerType: run.triggerType,
            createTime: run.createTime,
            startTime: run.startTime ?? null,
          });
      };
      store.startRun = async (id, startTime, nodeId) => {
        const started = await startRun(id, startTime, nodeId);
        const known = pending.get(id);
        if (started && known) known.startTime = startTime;
        return started;
      };
      store.endRun = async (id, end: RunEnd) => {
        const ended = await endRun(id, end);
        if (!ended) return ended;
        // A run accepted by another node (cluster) is looked up once, at its end.
        const known = pending.get(id) ?? (await getRun(null, id).catch(() => undefined));
        pending.delete(id);
        if (known) {
          runsEnded.inc({
            type: known.elementType,
            status: end.status,
            trigger: known.triggerType,
          });
          const from = known.startTime ?? known.createTime;
          runDuration.observe(
            { type: known.elementType, status: end.status },
            Math.max(0, end.endTime - from) / 1000,
          );
        }
        return ended;
      };
      const run = runner.run.bind(runner);
      runner.run = async (spec) => {
        const out: TaskOutcome = await run(spec);
        scriptDuration.observe({ status: out.status }, out.durationMs / 1000);
        return out;
      };
    },
    watch(queue, runner) {
      new Gauge({
        name: "sluice_queue_depth",
        help: "Runs waiting in this node's queue",
        registers: [registry],
        collect() {
          this.set(queue.depth());
        },
      });
      new Gauge({
        name: "sluice_script_pool",
        help: "Python process pool: running tasks, idle warm processes, tasks waiting for a slot",
        labelNames: ["state"] as const,
        registers: [registry],
        collect() {
          const s = runner.stats();
          this.set({ state: "running" }, s.running);
          this.set({ state: "idle" }, s.idle);
          this.set({ state: "queued" }, s.queued);
        },
      });
    },
  };
}
