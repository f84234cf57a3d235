/**
 * What a watcher of a live run sees (docs/live-progress.md): node states as nodes start and end,
 * and output chunks of a script task or a flow's script node as they are printed.
 */
import type { NodeStatus } from "../flows/node-log.ts";
import type { FinishedStatus } from "../store/types.ts";

/** A node's state while the run is live: RUNNING from its start, then how it ended. */
export interface NodeState {
  nodeId: string;
  nodeType: string;
  status: NodeStatus | "RUNNING";
  startTime?: number | undefined;
  endTime?: number | undefined;
  attempts?: number | undefined;
  error?: string | undefined;
}

/** What a producer (the graph executor, the runner) reports; the hub numbers it. */
export type Progress =
  | { kind: "node"; node: NodeState }
  | {
      kind: "output";
      /** Absent: the output of a script task; else the flow node that printed it. */
      nodeId?: string | undefined;
      stream: "stdout" | "stderr";
      text: string;
    };

/**
 * One numbered event of a run. `seq` is given by the process executing the run, so every API node
 * relaying it answers the same numbers. `gap`: events were dropped (a slow watcher, a full ring);
 * `end`: the run ended, its record is final.
 */
export type ProgressEvent =
  | (Progress & { seq: number })
  | { kind: "gap"; seq: number; dropped: number }
  | { kind: "end"; seq: number; status: FinishedStatus };

/** The state a watcher starts from: nodes so far and the last event number they include. */
export interface ProgressSnapshot {
  seq: number;
  nodes: NodeState[];
}

/** Bounds of what is kept and sent (docs/live-progress.md, "Bounds"). */
export const PROGRESS_LIMITS = {
  /** Events kept per live run for pollers and late watchers; older ones go first. */
  ringEvents: 256,
  /** Output of one stream coalesced this long into one event. */
  coalesceMs: 50,
  /** Most output text in one event; the rest of a burst is dropped and noted. */
  chunkChars: 2000,
  /** How long a run's events stay after its end, for a poller's last request. */
  lingerMs: 30_000,
  /** Events queued for one slow SSE client before the oldest are dropped. */
  clientQueue: 256,
} as const;
