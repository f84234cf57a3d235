/**
 * One node's run within a graph execution (docs/flow-graph.md): its input, its attempts with their
 * timeouts and retries, the limit on its output, and which outgoing edges it takes.
 */

import type { TimerHandle } from "../clock.ts";
import { errorText } from "../errors.ts";
import { Canceled, type Execution, settle, tell } from "./execution.ts";
import { tooLarge } from "./expr-size.ts";
import type { Vertex } from "./graph.ts";
import type { NodeLog } from "./node-log.ts";
import { NODES } from "./nodes/index.ts";
import type { NodeContext } from "./nodes/types.ts";
import { raceAbort } from "./plan.ts";
import { takeEdges } from "./resume.ts";

const message = errorText;

function sleep(x: Execution, ms: number): Promise<void> {
  let timer: TimerHandle | undefined;
  const slept = new Promise<void>((resolve) => {
    timer = x.clock.setTimeout(resolve, ms);
  });
  return raceAbort(slept, x.ctl.signal).finally(() => timer && x.clock.clearTimeout(timer));
}

/** The input of vertex i: the parameter (no inputs), the one taken input, or all keyed by source. */
function inputOf(x: Execution, i: number) {
  const inEdges = x.plan.incoming[i] ?? [];
  const inputs = inEdges
    .filter((e) => x.taken.has(e))
    .map((e) => ({ source: e.source, value: x.outputs[x.plan.sourceIndex.get(e) ?? -1] }));
  const input =
    inEdges.length === 0
      ? x.opts.parameter
      : inEdges.length === 1
        ? inputs[0]?.value
        : Object.fromEntries(inputs.map((v) => [v.source, v.value]));
  return { input, inputs };
}

export async function runNode(x: Execution, i: number): Promise<void> {
  const { opts } = x;
  const vertex = x.plan.vertexes[i] as Vertex;
  const log = x.logs[i] as NodeLog;
  const { input, inputs } = inputOf(x, i);
  const def = NODES[vertex.type as keyof typeof NODES];
  log.startTime = opts.deps.now();
  tell(x, log, "RUNNING");
  x.keep?.(log, "input", input);
  const nodeLog: NodeContext["log"] = {};
  try {
    if (!def) throw new Error(`unknown node type: ${vertex.type}`);
    const value = await attempts(x, vertex, log, (signal) =>
      def.run({
        runId: opts.runId,
        vertex,
        config: (vertex.config ?? {}) as Record<string, unknown>,
        input,
        inputs,
        params: opts.parameter,
        prelude: opts.configure.prelude,
        signal,
        deps: opts.deps,
        log: nodeLog,
      }),
    );
    // Nodes without expressions build values too (a merge that holds one input twice, a join):
    // one past the limit stops here, before anything walks or writes it out in full.
    const size = x.sizeOf(value);
    if (size > opts.deps.valueBytes) throw tooLarge("the node's output is", opts.deps.valueBytes);
    holdValue(x, value, size);
    await takeEdges(
      opts.deps.expressions,
      x.plan.outgoing[i] ?? [],
      value,
      opts.parameter,
      x.taken,
    );
    x.outputs[i] = value;
    x.keep?.(log, "output", value);
    settle(x, i, "SUCCESS");
  } catch (err) {
    if (x.ctl.signal.aborted) settle(x, i, "CANCELED");
    else {
      log.error = message(err);
      settle(x, i, "FAILURE");
      for (const { edge } of x.plan.outgoing[i] ?? []) x.taken.delete(edge);
      if (!vertex.continueOnError && !x.failure) {
        x.failure = { nodeId: vertex.id, error: log.error };
        x.ctl.abort(new Canceled("another node failed"));
      }
    }
  } finally {
    log.endTime ??= opts.deps.now();
    // A script node's output counts against the run's budget like its values (node-log.ts).
    if (nodeLog.stdout !== undefined) x.keep?.(log, "stdout", nodeLog.stdout);
    if (nodeLog.stderr !== undefined) x.keep?.(log, "stderr", nodeLog.stderr);
    // Source lines and names, not data: kept whatever logContent says.
    if (nodeLog.traceback && log.status === "FAILURE") log.traceback = nodeLog.traceback;
  }
}

/**
 * Reserves a node's output in what runs may hold (docs/run-limits.md, "Values in memory") until
 * the run ends; an object the run already holds (a node passing its input on) counts once.
 */
function holdValue(x: Execution, value: unknown, size: number): void {
  const { hold } = x.opts.deps;
  if (!hold) return;
  const object = typeof value === "object" && value !== null;
  if (object && x.held.has(value)) return;
  hold(size);
  if (object) x.held.add(value);
}

/** Up to 1 + retries attempts, each bounded by timeoutSeconds; the run's abort ends them all. */
async function attempts(
  x: Execution,
  vertex: Vertex,
  log: NodeLog,
  body: (signal: AbortSignal) => Promise<unknown>,
): Promise<unknown> {
  const max = 1 + (vertex.retries ?? 0);
  for (let attempt = 1; ; attempt++) {
    log.attempts = attempt;
    let signal = x.ctl.signal;
    let timer: TimerHandle | undefined;
    let nodeTimedOut = false;
    const seconds = vertex.timeoutSeconds;
    if (seconds !== undefined) {
      const ctl = new AbortController();
      timer = x.clock.setTimeout(() => {
        nodeTimedOut = true;
        ctl.abort(new Error(`node timed out after ${seconds}s`));
      }, seconds * 1000);
      signal = AbortSignal.any([x.ctl.signal, ctl.signal]);
    }
    try {
      return await raceAbort(body(signal), signal);
    } catch (err) {
      if (x.ctl.signal.aborted) throw err;
      const e = nodeTimedOut ? new Error(`node timed out after ${seconds}s`) : err;
      if (attempt >= max) throw e;
      if (vertex.retryDelayMs) await sleep(x, vertex.retryDelayMs);
    } finally {
      if (timer) x.clock.clearTimeout(timer);
    }
  }
}
