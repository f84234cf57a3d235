import type { Traceback } from "../scripts/traceback.ts";
import { sizeOf } from "./expr-size.ts";

/** What a run records of each node (docs/flow-graph.md, node logs), shared by the executor and resume. */
export type NodeStatus = "SUCCESS" | "FAILURE" | "SKIPPED" | "CANCELED";

export interface NodeLog {
  nodeId: string;
  nodeType: string;
  status: NodeStatus;
  startTime?: number;
  endTime?: number;
  attempts: number;
  error?: string;
  input?: unknown;
  output?: unknown;
  stdout?: string;
  stderr?: string;
  /** A script node that raised: its Python traceback (docs/live-progress.md, "Tracebacks"). */
  traceback?: Traceback;
  /** A resume: this node did not run again; its log and output are those of this run's. */
  reusedFrom?: string;
  /**
   * Values of the node not kept: larger than `LIMIT_NODE_LOG_BYTES`, or than what the run's
   * budget had left (docs/flow-graph.md, "Scheduling", node logs).
   */
  omitted?: KeptKey[];
}

/** What of a node's data its log keeps within the run's budget: a script node's output too. */
export type KeptKey = "input" | "output" | "stdout" | "stderr";
const KEPT: readonly KeptKey[] = ["input", "output", "stdout", "stderr"];

/**
 * Keeps a node's input or output in its log while it is within `perValue` and what is left of the
 * run's `total`, both about as JSON (sizeOf); a larger one is named in `omitted` instead. Values
 * pass from node to node by reference, so a run's logs held a large parameter twice per node,
 * written out in full with its record: one run of a long chain stored gigabytes.
 */
export type LogKeeper = (log: NodeLog, key: KeptKey, value: unknown) => void;

export function logKeeper(perValue: number, total: number): LogKeeper {
  let left = total;
  return (log, key, value) => {
    const cap = Math.min(perValue, left);
    const size = value === undefined ? 0 : sizeOf(value, cap);
    if (size <= cap) {
      (log as Record<KeptKey, unknown>)[key] = value;
      left -= size;
    } else log.omitted = [...(log.omitted ?? []), key];
  };
}

/**
 * A log a resume reuses (resume.ts) is kept as the node's own would be: its values count against
 * the run's budget too, or a resumed run would keep a whole budget more than any other.
 */
export function keepReused(keep: LogKeeper, log: NodeLog): void {
  for (const key of KEPT) {
    const value = log[key];
    if (value === undefined) continue;
    delete log[key];
    keep(log, key, value);
  }
}
