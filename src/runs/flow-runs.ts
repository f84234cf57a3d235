import type { Logger } from "pino";
import type { ArtifactKeeper } from "../artifacts/keeper.ts";
import type { NodeFiles } from "../artifacts/node-files.ts";
import type { Clock, TimerHandle } from "../clock.ts";
import type { Locator } from "../elements/locator.ts";
import { ErrorCode, errorText } from "../errors.ts";
import { executeFlow, type FlowDeps, type FlowRunResult } from "../flows/executor.ts";
import type { ExpressionsFor } from "../flows/expr-jobs.ts";
import type { ScriptRunner, TaskOutcome } from "../scripts/runner-types.ts";
import { maskDeep, maskOrder, maskText } from "../secrets/mask.ts";
import type { SecretResolver, Secrets } from "../secrets/secrets.ts";
import type { ScriptPin } from "../store/revision-types.ts";
import type { Run } from "../store/types.ts";
import { cleanupAtRunEnd, workDirOf } from "./file-cleanup.ts";
import { createRunPreparer, type Release, type StartRequest } from "./flow-run-prepare.ts";
import {
  createRunLifecycle,
  type ExecRun,
  type LifecycleDeps,
  type RunExecutor,
  type RunLifecycle,
} from "./lifecycle.ts";
import type { Execution, Outcome } from "./outcome.ts";
import { recordedNodes, recordedScripts, repeatPins } from "./rerun.ts";
import type { DataDisk, RunDisk } from "./run-disk.ts";
import { type ScriptUse, scriptNodeRunner } from "./script-node.ts";
import { waitForRunEnd } from "./wait.ts";

export type { StartRequest } from "./flow-run-prepare.ts";

export interface FlowRuns {
  /** Commits the run and queues it (or runs it here when inProcess); answers its ID. */
  start(req: StartRequest): Promise<string>;
  /** Runs here and waits up to `timeoutS` (absent: until the end), bounded by MAX_WAIT_S. */
  runSync(
    req: Omit<StartRequest, "inProcess" | "trigger">,
    timeoutS: number | undefined,
  ): Promise<Run>;
  execute(runId: string): Promise<void>;
  waitForEnd: RunLifecycle<StartRequest>["waitForEnd"];
  terminate(run: Run): Promise<boolean>;
  /** A flow element changed (deploy, activate, deactivate): drop resolved locators. */
  forget(): void;
}

export type FlowRunsDeps = Omit<LifecycleDeps, "notFound"> & {
  runner: ScriptRunner;
  logger: Logger;
  clock: Clock;
  config: {
    dataDir: string;
    timeZone: string;
    limits: { maxRunS: number; resultBytes: number; nodeLogBytes: number };
  };
  /** Every element change happens in this process (embedded), so resolved locators may be kept. */
  cacheLocators: boolean;
  /** Told of every Python execution's outcome (metrics). */
  onScript?: ((o: TaskOutcome) => void) | undefined;
  /** `${secret.NAME}` references of the run's scope (docs/secrets.md); absent: none resolve. */
  secrets?: Secrets | undefined;
  /** Collects the files of runs whose flow keeps them (docs/artifacts.md); absent: none. */
  artifacts?: ArtifactKeeper | undefined;
  /** Where the flows' expressions are evaluated (src/flows/expr-pool.ts). */
  expressions: ExpressionsFor;
  /** What http nodes call with (src/guarded-fetch.ts); absent: the platform's fetch. */
  fetch?: typeof fetch | undefined;
  /** Watches runs' directories on the data directory's disk (docs/security.md, "Disk"); absent: none. */
  disk?: DataDisk | undefined;
};

/**
 * Flow runs: the executor of a flow's release (docs/dataflow-service.md, docs/flow-graph.md) inside
 * the one run lifecycle (lifecycle.ts), which owns statuses, queueing, waits and limits.
 */
export function createFlowRuns(deps: FlowRunsDeps): FlowRuns {
  const { store, clock, config, events } = deps;
  const { prepare, release, forget } = createRunPreparer({
    store,
    config,
    clock,
    nodeId: deps.nodeId,
    cacheLocators: deps.cacheLocators,
  });

  async function execute(r: ExecRun, parameter: unknown, signal: AbortSignal): Promise<Execution> {
    let sentinel: TimerHandle | undefined;
    let rel: Release | undefined;
    const used: ScriptUse[] = [];
    // The run's secret values: resolved by its nodes as they execute, masked in all it records.
    const secrets = deps.secrets?.resolver(r.scope);
    // What its nodes' values hold in memory until it ends (docs/run-limits.md, "Values in memory").
    const values = deps.memory.hold(r.scope);
    // Without a release no script ran; otherwise the flow's fileCleanup decides (sweeper:
    // file-cleanup.ts). After the end is recorded, once the runner handed the directory back, and
    // off the answer's path: the directory syscalls wait on the file system.
    // A kept directory becomes the run's artifacts (docs/artifacts.md) before the clean-up,
    // which for `keep` only removes it when empty.
    let nodeFiles: NodeFiles | undefined;
    // Only a run whose graph has script nodes is watched (docs/security.md, "Disk").
    let disk: RunDisk | undefined;
    const afterEnd = () => {
      if (rel && !rel.usesWorkDir) return;
      // A run stopped for its disk keeps nothing (docs/security.md, "Disk").
      const policy =
        disk?.stopped || !rel ? { type: "afterRun" as const } : rel.configure.fileCleanup;
      setImmediate(async () => {
        if (nodeFiles)
          await deps.artifacts?.collect(r.id, workDirOf(config.dataDir, r.id), nodeFiles);
        // A directory that stays counts for its app on this node (docs/security.md, "Disk"):
        // measured only then, so a run that wrote nothing costs no walk.
        if (await cleanupAtRunEnd(config.dataDir, r.id, policy))
          await deps.disk?.kept.add(r.id, r.scope.app);
      });
    };
    try {
      rel = await release(r.elementId, Number(r.version));
      const { configure } = rel;
      if (rel.usesWorkDir) disk = deps.disk?.forRun(r.id);
      if (configure.fileCleanup.type === "keep" && rel.usesWorkDir)
        nodeFiles = deps.artifacts?.track(workDirOf(config.dataDir, r.id));
      const original = await originalRun(store, r);
      // Pins change when the revision is released again, so they are read per run, not cached.
      let pins = rel.usesScriptElements
        ? ((await store.flowRevision(r.elementId, Number(r.version)))?.scriptPins ?? [])
        : [];
      if (original && rel.usesScriptElements) pins = repeatPins(original, pins);
      const rt = configure.runTimeout;
      if (rt.type === "sentinel") {
        // The run goes on; observers are told once (docs/flow-graph.md runTimeout sentinel).
        sentinel = clock.setTimeout(
          () => events.publish({ type: "sentinel", runId: r.id, configure, seconds: rt.seconds }),
          rt.seconds * 1000,
        );
      }
      const out = await executeFlow({
        runId: r.id,
        graph: rel.graph,
        configure,
        parameter,
        signal,
        deps: {
          ...flowDeps(deps, lifecycle, r, { pins, used, secrets, nodeFiles, disk }),
          hold: values.take,
        },
        clock,
        reuse: resumed(r, original),
        // Live node states (docs/live-progress.md), masked as the record will be.
        onNode: (node) =>
          events.publish({
            type: "progress",
            runId: r.id,
            progress: { kind: "node", node: maskDeep(node, secrets?.handedOut() ?? []) },
          }),
      });
      const masked = maskDeep(out, secrets?.handedOut() ?? []);
      return {
        outcome: flowOutcome(masked, withReused(masked, original, used)),
        configure,
        afterEnd,
      };
    } catch (err) {
      const error = maskText(errorText(err), maskOrder(secrets?.handedOut() ?? []));
      return { outcome: { status: "FAILURE", error }, afterEnd };
    } finally {
      values.free();
      if (sentinel) clock.clearTimeout(sentinel);
    }
  }

  const executor: RunExecutor<StartRequest> = {
    kind: "flow",
    prepare: (req, status, inProcess) => prepare({ ...req, inProcess }, status),
    execute,
  };
  const lifecycle = createRunLifecycle({ ...deps, notFound: ErrorCode.RUN_NOT_FOUND }, executor);

  return {
    forget,
    start: (req) => lifecycle.start(req, { inProcess: req.inProcess }),
    async runSync(req, timeoutS) {
      const sync = await lifecycle.runSync(
        { ...req, inProcess: true, trigger: "SYNC" },
        { timeoutS },
      );
      return sync.run;
    },
    execute: lifecycle.execute,
    waitForEnd: lifecycle.waitForEnd,
    terminate: lifecycle.terminate,
  };
}

/**
 * The run a re-run or resume repeats, read when it executes (docs/dataflow-service.md, "Re-run and
 * resume"): its script versions, and a resume's node logs, are what the new run repeats.
 */
async function originalRun(store: FlowRunsDeps["store"], r: ExecRun): Promise<Run | undefined> {
  if (!r.rerunOf) return undefined;
  const original = await store.getRun(r.scope, r.rerunOf.runId);
  // Deleted since the request was accepted: nothing silently runs other versions or every node.
  const verb = r.rerunOf.kind === "resume" ? "resumes" : "re-runs";
  if (!original) throw new Error(`run ${r.rerunOf.runId}, which this run ${verb}, was deleted`);
  return original;
}

/** A resume's failed run's node logs: what the new run does not do again. */
function resumed(r: ExecRun, original: Run | undefined) {
  if (r.rerunOf?.kind !== "resume" || !original) return undefined;
  return { runId: original.id, nodes: recordedNodes(original) };
}

/** The script versions behind a run's outputs: those a resume reused, then those it executed. */
function withReused(out: FlowRunResult, original: Run | undefined, used: ScriptUse[]) {
  if (!original) return used;
  const reused = new Set(out.nodes.filter((n) => n.reusedFrom).map((n) => n.nodeId));
  if (reused.size === 0) return used;
  return [...recordedScripts(original).filter((u) => reused.has(u.nodeId)), ...used];
}

function flowOutcome(out: FlowRunResult, scripts: ScriptUse[]): Outcome {
  const detail = {
    nodes: out.nodes,
    // The script versions the run executed (docs/monitoring.md, run detail).
    ...(scripts.length > 0 ? { scripts } : {}),
    ...(out.failedNodeId ? { failedNodeId: out.failedNodeId } : {}),
  };
  if (out.status === "SUCCESS")
    return { status: "SUCCESS", value: out.result, summary: `${out.nodes.length} nodes`, detail };
  return {
    status: out.status,
    error: out.error,
    summaryPrefix: out.failedNodeId ? `${out.failedNodeId}: ` : undefined,
    detail,
  };
}

/** A sub-flow node: a child run executed here; aborting the parent terminates it. */
async function subflow(
  deps: FlowRunsDeps,
  lifecycle: Pick<RunLifecycle<StartRequest>, "start" | "terminate">,
  parent: Pick<Run, "id" | "scope" | "initiator">,
  element: Locator,
  parameter: unknown,
  signal: AbortSignal,
) {
  const { store, events, clock } = deps;
  // The initiator from the parent's own record: no read of the store for it.
  const childId = await lifecycle.start(
    {
      scope: parent.scope,
      user: (parent.initiator?.userId as string | undefined) ?? null,
      locator: element,
      parameter,
      inProcess: true,
      parentRunId: parent.id,
      trigger: "API",
    },
    { inProcess: true },
  );
  // An event listener's promise is dropped: its failure must be caught here, or it ends the process.
  const onAbort = () => {
    store
      .getRun(parent.scope, childId)
      .then((child) => (child ? lifecycle.terminate(child) : false))
      .catch((err: unknown) =>
        deps.logger.error({ err, runId: childId }, "could not terminate a sub-flow run"),
      );
  };
  signal.addEventListener("abort", onAbort, { once: true });
  // Aborted while the child was being started: a terminate's cascade may have read the parent's
  // children before the child's record was committed, and the listener above would never fire.
  if (signal.aborted) onAbort();
  try {
    const child = await waitForRunEnd(
      { store, events, clock },
      parent.scope,
      childId,
      deps.config.limits.maxRunS * 1000,
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

/** What the graph executor may do for one run: its effects, all through this process's parts. */
function flowDeps(
  deps: FlowRunsDeps,
  lifecycle: Pick<RunLifecycle<StartRequest>, "start" | "terminate">,
  r: ExecRun,
  scripts: {
    pins: readonly ScriptPin[];
    used: ScriptUse[];
    secrets: SecretResolver | undefined;
    nodeFiles: NodeFiles | undefined;
    disk: RunDisk | undefined;
  },
): FlowDeps {
  const { store, clock, config } = deps;
  return {
    runScript: scriptNodeRunner({
      store,
      runner: deps.runner,
      scope: r.scope,
      runId: r.id,
      onScript: deps.onScript,
      onOutput: (nodeId, stream, text) =>
        deps.events.publish({
          type: "progress",
          runId: r.id,
          progress: { kind: "output", nodeId, stream, text },
        }),
      ...scripts,
    }),
    // A sub-flow is a run of its own whose parameter is recorded: it gets this run's values masked.
    runSubflow: (req) =>
      subflow(
        deps,
        lifecycle,
        r,
        req.element,
        maskDeep(req.parameter, scripts.secrets?.handedOut() ?? []),
        req.signal,
      ),
    fetch: deps.fetch ?? globalThis.fetch,
    expressions: deps.expressions(r.scope),
    valueBytes: config.limits.resultBytes,
    logValueBytes: config.limits.nodeLogBytes,
    now: () => clock.now(),
    secrets: scripts.secrets,
  };
}
