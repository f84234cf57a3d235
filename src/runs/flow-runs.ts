import type { ArtifactKeeper } from "../artifacts/keeper.ts";
import type { NodeFiles } from "../artifacts/node-files.ts";
import type { TimerHandle } from "../clock.ts";
import { ErrorCode, errorText } from "../errors.ts";
import { executeFlow, type FlowRunResult } from "../flows/executor.ts";
import { maskDeep, maskOrder, maskText } from "../secrets/mask.ts";
import type { Secrets } from "../secrets/secrets.ts";
import type { Run } from "../store/types.ts";
import { cleanupAtRunEnd, workDirOf } from "./file-cleanup.ts";
import { type FlowEffectDeps, flowDeps } from "./flow-run-effects.ts";
import { createRunPreparer, type Release, type StartRequest } from "./flow-run-prepare.ts";
import {
  createRunLifecycle,
  type ExecRun,
  type LifecycleDeps,
  type RunExecutor,
  type RunLifecycle,
} from "./lifecycle.ts";
import type { Execution, Outcome } from "./outcome.ts";
import { originalRun, repeatPins, resumed, withReused } from "./rerun.ts";
import type { DataDisk, RunDisk } from "./run-disk.ts";
import type { ScriptUse } from "./script-node.ts";

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

export type FlowRunsDeps = Omit<LifecycleDeps, "notFound"> &
  FlowEffectDeps & {
    config: { dataDir: string; timeZone: string };
    /** Every element change happens in this process (embedded), so resolved locators may be kept. */
    cacheLocators: boolean;
    /** `${secret.NAME}` references of the run's scope (docs/secrets.md); absent: none resolve. */
    secrets?: Secrets | undefined;
    /** Collects the files of runs whose flow keeps them (docs/artifacts.md); absent: none. */
    artifacts?: ArtifactKeeper | undefined;
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
