import type { Logger } from "pino";
import type { Clock, TimerHandle } from "../clock.ts";
import type { Config } from "../config.ts";
import type { Locator } from "../elements/locator.ts";
import { ErrorCode, SluiceError } from "../errors.ts";
import { executeFlow, type FlowDeps } from "../flows/executor.ts";
import type { RunQueue } from "../queue/types.ts";
import type { ScriptRunner } from "../scripts/runner-types.ts";
import type { NewRun, Run, RunEnd, ScopeFilter, Store } from "../store/types.ts";
import type { RunHooks } from "./error-handlers/index.ts";
import { cleanupAtRunEnd } from "./file-cleanup.ts";
import { createRunPreparer, type Release, type StartRequest } from "./flow-run-prepare.ts";
import type { RunEvents } from "./run-events.ts";
import { scriptNodeRunner } from "./script-node.ts";
import { waitForRunEnd } from "./wait.ts";
import {
  endedRun,
  insertStarted,
  type PendingRecord,
  recordEnd,
  SYNC_WRITE_BEHIND_MS,
} from "./write-behind.ts";

export type { StartRequest } from "./flow-run-prepare.ts";

export interface FlowRuns {
  /** Commits the run and queues it (or runs it here when inProcess); answers its ID. */
  start(req: StartRequest): Promise<string>;
  /** Runs here and waits up to `timeoutS` (absent: the server's longest wait). */
  runSync(
    req: Omit<StartRequest, "inProcess" | "trigger">,
    timeoutS: number | undefined,
  ): Promise<Run>;
  execute(runId: string): Promise<void>;
  waitForEnd(scope: ScopeFilter, runId: string, timeoutS: number): Promise<Run | undefined>;
  terminate(run: Run): Promise<boolean>;
  /** A flow element changed (deploy, activate, deactivate): drop resolved locators. */
  forget(): void;
}

interface Deps {
  config: Config;
  store: Store;
  runner: ScriptRunner;
  queue: RunQueue;
  events: RunEvents;
  clock: Clock;
  logger: Logger;
  nodeId: string;
  /** Error handlers (failure, sentinel timeout); absent: none. */
  hooks?: RunHooks | undefined;
}

/** Flow runs: the status machine and trigger types of docs/dataflow-service.md around the pure executor. */
export function createFlowRuns(deps: Deps): FlowRuns {
  const { store, clock, config, events } = deps;
  const { prepare, release, forget } = createRunPreparer({
    store,
    config,
    clock,
    nodeId: deps.nodeId,
  });
  const active = new Map<string, AbortController>();
  /** Runs this process queued and has not yet started: their record and parameter, in memory. */
  const queuedHere = new Map<string, { rec: NewRun; parameter: unknown }>();

  /**
   * Executes a STARTED run to its end and records it; never throws. With `pending`, the run is not
   * in the store yet (a run-sync within its write-behind grace): the end is then written as one
   * insert, unless the grace elapsed first and the STARTED record was inserted meanwhile.
   */
  async function run(
    r: Pick<Run, "id" | "scope" | "elementId" | "version" | "runParam">,
    parameter: unknown,
    pending?: PendingRecord,
  ): Promise<{ end: RunEnd; recorded: boolean }> {
    const ctl = new AbortController();
    active.set(r.id, ctl);
    // The system limit ends the run as FAILURE (docs/flow-graph.md, runTimeout `system`); the executor sees a cancel.
    const limitMessage = `run timed out: it exceeded the system limit of ${config.limits.maxRunS}s`;
    let limitHit = false;
    const limit = clock.setTimeout(() => {
      limitHit = true;
      ctl.abort(new Error(limitMessage));
    }, config.limits.maxRunS * 1000);
    let sentinel: TimerHandle | undefined;
    let rel: Release | undefined;
    let end: RunEnd;
    try {
      rel = await release(r.elementId, Number(r.version));
      const rt = rel.configure.runTimeout;
      if (rt.type === "sentinel") {
        // The run goes on; the handlers are told once (docs/flow-graph.md runTimeout sentinel).
        const configure = rel.configure;
        sentinel = clock.setTimeout(
          () => deps.hooks?.sentinel(r.id, configure, rt.seconds),
          rt.seconds * 1000,
        );
      }
      const flowDeps: FlowDeps = {
        runScript: scriptNodeRunner({ store, runner: deps.runner, scope: r.scope, runId: r.id }),
        runSubflow: (req) => subflow(r, req.element, req.parameter, req.signal),
        fetch: globalThis.fetch,
        responseBytes: config.limits.resultBytes,
        now: () => clock.now(),
      };
      const out = await executeFlow({
        runId: r.id,
        graph: rel.graph,
        configure: rel.configure,
        parameter,
        signal: ctl.signal,
        deps: flowDeps,
      });
      end = toEnd(out, clock.now(), config.limits.resultBytes);
      if (limitHit && end.status !== "SUCCESS")
        end = { ...end, status: "FAILURE", summary: limitMessage, error: limitMessage };
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      end = { status: "FAILURE", endTime: clock.now(), summary: message, error: message };
    } finally {
      clock.clearTimeout(limit);
      if (sentinel) clock.clearTimeout(sentinel);
      active.delete(r.id);
    }
    let recorded = false;
    try {
      recorded = await recordEnd(store, pending, r.id, end);
    } catch (err) {
      // The store failed (e.g. its database went away): the run keeps its last recorded status.
      // Not thrown: an in-process run has nobody awaiting it, and an unhandled rejection ends the
      // process (docs/errors.md, "Bad input"). A run-sync still sees the failed insert it awaits.
      deps.logger.error({ err, runId: r.id, status: end.status }, "could not record a run's end");
    }
    events.notify(r.id);
    if (recorded && rel) deps.hooks?.ended(r.id, rel.configure, end.status);
    // Without a release no script ran; otherwise the flow's fileCleanup decides (sweeper: file-cleanup.ts).
    // Off the answer's path: the directory syscalls wait on the file system, the caller need not.
    setImmediate(
      () =>
        void cleanupAtRunEnd(
          config.dataDir,
          r.id,
          rel?.configure.fileCleanup ?? { type: "afterRun" },
        ),
    );
    return { end, recorded };
  }

  async function subflow(
    parent: Pick<Run, "id" | "scope">,
    element: Locator,
    parameter: unknown,
    signal: AbortSignal,
  ) {
    const parentRun = await store.getRun(parent.scope, parent.id);
    const childId = await api.start({
      scope: parent.scope,
      user: (parentRun?.initiator?.userId as string | undefined) ?? null,
      locator: element,
      parameter,
      inProcess: true,
      parentRunId: parent.id,
      trigger: "API",
    });
    // An event listener's promise is dropped: its failure must be caught here, or it ends the process.
    const onAbort = () => {
      store
        .getRun(parent.scope, childId)
        .then((child) => (child ? api.terminate(child) : false))
        .catch((err: unknown) =>
          deps.logger.error({ err, runId: childId }, "could not terminate a sub-flow run"),
        );
    };
    signal.addEventListener("abort", onAbort, { once: true });
    try {
      const child = await waitForRunEnd(
        { store, events, clock },
        parent.scope,
        childId,
        config.limits.maxRunS * 1000,
      );
      if (child?.status === "SUCCESS")
        return { ok: true as const, value: child.result == null ? null : JSON.parse(child.result) };
      return {
        ok: false as const,
        error: `sub-flow run ${childId} ended ${child?.status ?? "unknown"}: ${child?.error ?? ""}`,
      };
    } finally {
      signal.removeEventListener("abort", onAbort);
    }
  }

  // A run that ended elsewhere (terminated through another node) while it executes here.
  events.onEnd((runId) => active.get(runId)?.abort(new Error("terminated")));

  const api: FlowRuns = {
    forget,

    async start(req) {
      // Embedded: with a free flow slot and nobody waiting, the run would not wait at all, so it
      // is committed as STARTED and executed at once (one write fewer than QUEUED → STARTED).
      const slot =
        !req.inProcess && config.mode === "embedded"
          ? (deps.queue.reserve?.("flow") ?? null)
          : null;
      try {
        const rec = await prepare(req, req.inProcess || slot ? "STARTED" : "QUEUED");
        if (!req.inProcess && !slot && deps.queue.depth() >= config.limits.queuedRuns) {
          throw new SluiceError(ErrorCode.TOO_MANY, [
            `queue holds ${config.limits.queuedRuns} runs`,
          ]);
        }
        await store.insertRun(rec);
        if (req.inProcess) void run(rec, req.parameter);
        else if (slot) slot.run(() => run(rec, req.parameter));
        else {
          // Only the in-memory queue guarantees this process takes the job (else the map would leak).
          if (config.mode === "embedded") queuedHere.set(rec.id, { rec, parameter: req.parameter });
          // Committed runs are accepted: the bound was checked above, so it cannot refuse them now.
          await deps.queue.enqueue({ runId: rec.id, kind: "flow" }, { ignoreBound: true });
        }
        return rec.id;
      } catch (err) {
        slot?.release();
        throw err;
      }
    },

    async runSync(req, timeoutS) {
      const rec = await prepare({ ...req, inProcess: true, trigger: "SYNC" }, "STARTED");
      // Write-behind: no caller knows this run's ID until it is answered, so a run that ends
      // within the grace is written once, at its end. A longer one is inserted as STARTED when
      // the grace elapses, so monitoring shows it and a timed-out wait can name a durable run.
      const pending: PendingRecord = { rec, inserted: null };
      const grace = clock.setTimeout(() => insertStarted(store, pending), SYNC_WRITE_BEHIND_MS);
      const done = run(rec, req.parameter, pending);
      const waitMs =
        Math.min(
          timeoutS && timeoutS > 0 ? timeoutS : config.limits.maxWaitS,
          config.limits.maxWaitS,
        ) * 1000;
      let timer: ReturnType<Clock["setTimeout"]> | undefined;
      const elapsed = new Promise<null>((resolve) => {
        timer = clock.setTimeout(() => resolve(null), waitMs);
      });
      const outcome = await Promise.race([done, elapsed]);
      clock.clearTimeout(grace);
      if (timer) clock.clearTimeout(timer);
      if (outcome?.recorded) return endedRun(rec, outcome.end);
      // The wait elapsed (the caller answers 28020006 and the run goes on) or a terminate won.
      pending.inserted ??= store.insertRun(rec);
      await pending.inserted;
      const ended = await store.getRun(req.scope, rec.id);
      if (!ended) throw new SluiceError(ErrorCode.RUN_NOT_FOUND, [rec.id]);
      return ended;
    },

    async execute(runId) {
      // Queued by this process: no need to read back what was just written. startRun is
      // conditional on QUEUED, so a run terminated while it waited is still not executed.
      const mine = queuedHere.get(runId);
      queuedHere.delete(runId);
      if (mine) {
        if (!(await store.startRun(runId, clock.now(), deps.nodeId))) return;
        await run(mine.rec, mine.parameter);
        return;
      }
      const r = await store.getRun(null, runId);
      if (r?.status !== "QUEUED") return;
      if (!(await store.startRun(runId, clock.now(), deps.nodeId))) return;
      await run(r, JSON.parse(r.runParam ?? "null"));
    },

    waitForEnd: (scope, runId, timeoutS) =>
      waitForRunEnd(
        { store, events, clock },
        scope,
        runId,
        Math.min(timeoutS, config.limits.maxWaitS) * 1000,
      ),

    async terminate(r) {
      const ended = await store.endRun(r.id, {
        status: "CANCELED",
        endTime: clock.now(),
        summary: "terminated",
        error: "terminated by request",
      });
      if (!ended) return false;
      active.get(r.id)?.abort(new Error("terminated"));
      events.notify(r.id);
      for (const child of await store.childRuns(r.id)) await api.terminate(child);
      return true;
    },
  };
  return api;
}

function toEnd(
  out: Awaited<ReturnType<typeof executeFlow>>,
  endTime: number,
  resultBytes: number,
): RunEnd {
  const detail = {
    nodes: out.nodes,
    ...(out.failedNodeId ? { failedNodeId: out.failedNodeId } : {}),
  };
  if (out.status === "SUCCESS") {
    const result = JSON.stringify(out.result ?? null);
    const size = Buffer.byteLength(result);
    if (size > resultBytes) {
      const error = `result is ${size} bytes, over the ${resultBytes} byte limit`;
      return { status: "FAILURE", endTime, summary: error, error, detail };
    }
    return {
      status: "SUCCESS",
      endTime,
      result,
      summary: `${out.nodes.length} nodes, result ${size} bytes`,
      detail,
    };
  }
  const error = out.error ?? (out.status === "CANCELED" ? "canceled" : "failed");
  const summary =
    `${out.failedNodeId ? `${out.failedNodeId}: ` : ""}${error}`.split("\n")[0] ?? error;
  return { status: out.status, endTime, summary, error, detail };
}
