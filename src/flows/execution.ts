/**
 * The state of one execution of a flow graph (docs/flow-graph.md), shared by the scheduler in
 * executor.ts and the node runs in node-run.ts, and how a vertex settles.
 */

import type { Clock } from "../clock.ts";
import type { NodeState } from "../progress/types.ts";
import type { Configure, Edge, Graph } from "./graph.ts";
import type { LogKeeper, NodeLog, NodeStatus } from "./node-log.ts";
import type { FlowDeps } from "./nodes/types.ts";
import type { Plan } from "./plan.ts";

export interface ExecuteFlowOptions {
  runId: string;
  graph: Graph;
  /** Normalized (normalizeConfigure); a `customized` runTimeout is enforced here. */
  configure: Configure;
  parameter: unknown;
  signal: AbortSignal;
  deps: FlowDeps;
  /** Node timeouts, retry delays and the run's own timeout; default: the system clock. */
  clock?: Clock | undefined;
  /** A resume: the node logs of the failed run whose succeeded nodes are not run again. */
  reuse?: { runId: string; nodes: readonly NodeLog[] } | undefined;
  /** Told each node's state as it starts (RUNNING) and ends (docs/live-progress.md). */
  onNode?: ((node: NodeState) => void) | undefined;
}

export class Canceled extends Error {}

/** One execution of a graph: its plan, the state of every vertex, and how it ends. */
export interface Execution {
  opts: ExecuteFlowOptions;
  clock: Clock;
  plan: Plan;
  /** Aborted by the caller's signal, the run's own timeout, or a failed node. */
  ctl: AbortController;
  status: (NodeStatus | "PENDING" | "RUNNING")[];
  outputs: unknown[];
  taken: Set<Edge>;
  logs: NodeLog[];
  failure: { nodeId?: string; error: string } | undefined;
  settled: number;
  running: number;
  finish: () => void;
  /** A node's output's size, about as JSON, given up just past the value limit (expr-size.ts). */
  sizeOf: (value: unknown) => number;
  /** The objects the run already reserved in memory (the parameter, earlier nodes' outputs). */
  held: WeakSet<object>;
  /** Keeps a node's input or output in its log, within the run's budget (node-log.ts). */
  keep: LogKeeper | null;
}

export function settle(x: Execution, i: number, s: NodeStatus): void {
  x.status[i] = s;
  const log = x.logs[i] as NodeLog;
  log.status = s;
  x.settled++;
  // A node that ran ends now (its log's end time is this one); a skipped one never started.
  if (log.startTime !== undefined && !log.reusedFrom) log.endTime ??= x.opts.deps.now();
  tell(x, log, s);
}

export function tell(x: Execution, log: NodeLog, status: NodeState["status"]): void {
  const { nodeId, nodeType, startTime, endTime, attempts, error } = log;
  x.opts.onNode?.({ nodeId, nodeType, status, startTime, endTime, attempts, error });
}
