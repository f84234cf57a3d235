import type { Logger } from "pino";
import type { NodeFiles } from "../artifacts/node-files.ts";
import type { Clock } from "../clock.ts";
import type { Locator } from "../elements/locator.ts";
import type { FlowDeps } from "../flows/executor.ts";
import type { ExpressionsFor } from "../flows/expr-jobs.ts";
import type { ScriptRunner, TaskOutcome } from "../scripts/runner-types.ts";
import { maskDeep } from "../secrets/mask.ts";
import type { SecretResolver } from "../secrets/secrets.ts";
import type { ScriptPin } from "../store/revision-types.ts";
import type { Run, Store } from "../store/types.ts";
import type { StartRequest } from "./flow-run-prepare.ts";
import type { ExecRun, RunLifecycle } from "./lifecycle-types.ts";
import type { RunDisk } from "./run-disk.ts";
import type { RunEvents } from "./run-events.ts";
import { type ScriptUse, scriptNodeRunner } from "./script-node.ts";
import { waitForRunEnd } from "./wait.ts";

/** The parts of this process a flow run's nodes act through (createFlowRuns is given them). */
export interface FlowEffectDeps {
  store: Store;
  events: RunEvents;
  clock: Clock;
  logger: Logger;
  runner: ScriptRunner;
  config: { limits: { maxRunS: number; resultBytes: number; nodeLogBytes: number } };
  /** Told of every Python execution's outcome (metrics). */
  onScript?: ((o: TaskOutcome) => void) | undefined;
  /** Where the flows' expressions are evaluated (src/flows/expr-pool.ts). */
  expressions: ExpressionsFor;
  /** What http nodes call with (src/guarded-fetch.ts); absent: the platform's fetch. */
  fetch?: typeof fetch | undefined;
}

/** What the graph executor may do for one run: its effects, all through this process's parts. */
export function flowDeps(
  deps: FlowEffectDeps,
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

/** A sub-flow node: a child run executed here; aborting the parent terminates it. */
async function subflow(
  deps: FlowEffectDeps,
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
