import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import type { BudgetStats } from "../byte-budget.ts";
import type { RunQueue } from "../queue/types.ts";
import type { RunEvents, RunFacts } from "../runs/run-events.ts";
import type { ScriptRunner, TaskOutcome } from "../scripts/runner-types.ts";
import type { RunEnd, Store } from "../store/types.ts";
import type { HeldQuota } from "./held-quota.ts";

/**
 * Prometheus metrics of one service instance. Each instance has its own registry, so several
 * servers in one process (the tests) never share or double-register series.
 */
export interface Metrics {
  registry: Registry;
  httpDuration: Histogram<"method" | "route" | "status">;
  /** Counts runs from the lifecycle's events (docs/architecture.md, "Run events"). */
  observe(events: RunEvents, store: Pick<Store, "getRun">): void;
  /** One Python execution ended (a script task or a flow's script node). */
  timeScript(outcome: Pick<TaskOutcome, "status" | "durationMs">): void;
  /** Gauges read at scrape time (queue depth, pool sizes). */
  watch(queue: RunQueue, runner: ScriptRunner): void;
  /** The waiting requests of one HTTP application (docs/live-progress.md#bounds). */
  watchHeld(quota: Pick<HeldQuota, "held">): void;
  /** A budget of bytes held in memory (docs/operations.md, "Metrics"); the latest per name. */
  watchBudget(name: BudgetName, budget: { stats(): BudgetStats }): void;
}

export type BudgetName = "body" | "answer" | "download" | "run";

const SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 3600];

/** The series of one registry (docs/monitoring.md). */
function seriesOf(registry: Registry) {
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

  return { runsStarted, runsEnded, runDuration, scriptDuration, httpDuration };
}

const KNOWN_MAX = 100_000;

export function createMetrics(): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: "sluice_process_" });
  const { runsStarted, runsEnded, runDuration, scriptDuration, httpDuration } = seriesOf(registry);

  // Facts an `ended` event from recovery or shutdown lacks: kept from `created`, dropped at the end.
  // Bounded: a run whose end never comes here (another node ended it) must not stay for good, so
  // past KNOWN_MAX the oldest goes. A Map, not lru-cache: this is in-flight state, not a cache,
  // and lru-cache empties itself by filling its whole preallocated arrays whenever its last entry
  // is deleted, which every run's end did at low concurrency (0.25 ms a run with 100,000 slots).
  const known = new Map<string, RunFacts>();
  const remember = (facts: RunFacts) => {
    if (known.size >= KNOWN_MAX) known.delete(known.keys().next().value as string);
    known.set(facts.id, facts);
  };

  function ended(facts: RunFacts, end: RunEnd): void {
    runsEnded.inc({ type: facts.elementType, status: end.status, trigger: facts.triggerType });
    const from = facts.startTime ?? facts.createTime;
    runDuration.observe(
      { type: facts.elementType, status: end.status },
      Math.max(0, end.endTime - from) / 1000,
    );
  }

  const budgets = budgetSeries(registry);

  return {
    registry,
    httpDuration,
    watchBudget: (name, budget) => budgets.set(name, budget),
    observe(events, store) {
      events.subscribe((e) => {
        if (e.type === "created") {
          runsStarted.inc({ type: e.run.elementType, trigger: e.run.triggerType });
          const { id, elementType, triggerType, createTime, startTime } = e.run;
          remember({ id, elementType, triggerType, createTime, startTime });
        } else if (e.type === "started") {
          const facts = known.get(e.runId);
          if (facts) facts.startTime = e.startTime;
        } else if (e.type === "ended") {
          const facts = known.get(e.runId) ?? e.run;
          known.delete(e.runId);
          if (facts) ended(facts, e.end);
          else {
            // A run accepted by another node (cluster) is looked up once, at its end.
            void store
              .getRun(null, e.runId)
              .then((run) => run && ended(run, e.end))
              .catch(() => {});
          }
        }
      });
    },
    timeScript(outcome) {
      scriptDuration.observe({ status: outcome.status }, outcome.durationMs / 1000);
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
    watchHeld(quota) {
      // The application's latest quota: an app built again on the same services replaces it.
      registry.removeSingleMetric("sluice_held_requests");
      new Gauge({
        name: "sluice_held_requests",
        help: "Requests waiting on this node: open event streams and long polls",
        labelNames: ["kind"] as const,
        registers: [registry],
        collect() {
          const h = quota.held();
          this.set({ kind: "stream" }, h.stream);
          this.set({ kind: "wait" }, h.wait);
        },
      });
    },
  };
}

/**
 * `sluice_budget_bytes` and `sluice_budget_refusals_total`, per budget, read at scrape time; a
 * budget not built (a worker answers no bodies) shows 0.
 */
function budgetSeries(registry: Registry): Map<BudgetName, { stats(): BudgetStats }> {
  const budgets = new Map<BudgetName, { stats(): BudgetStats }>();
  const names: BudgetName[] = ["body", "answer", "download", "run"];
  const counted = new Map<BudgetName, number>();
  new Gauge({
    name: "sluice_budget_bytes",
    help: "Bytes held in memory under each budget on this node (bodies, answers, downloads, runs)",
    labelNames: ["budget"] as const,
    registers: [registry],
    collect() {
      for (const n of names) this.set({ budget: n }, budgets.get(n)?.stats().held ?? 0);
    },
  });
  new Counter({
    name: "sluice_budget_refusals_total",
    help: "Requests, runs or nodes refused with 429 because a budget of bytes was full",
    labelNames: ["budget"] as const,
    registers: [registry],
    collect() {
      for (const n of names) {
        // A counter only grows: what the budget refused since the last scrape.
        const now = budgets.get(n)?.stats().refused ?? 0;
        this.inc({ budget: n }, Math.max(0, now - (counted.get(n) ?? 0)));
        counted.set(n, now);
      }
    },
  });
  return budgets;
}
