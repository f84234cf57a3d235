import type { Traceback } from "../scripts/traceback.ts";

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
}
