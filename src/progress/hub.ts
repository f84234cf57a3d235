import type { Clock, TimerHandle } from "../clock.ts";
import type { RunEvents } from "../runs/run-events.ts";
import { createCoalescer } from "./coalesce.ts";
import {
  type NodeState,
  PROGRESS_LIMITS,
  type Progress,
  type ProgressEvent,
  type ProgressSnapshot,
} from "./types.ts";

/** A live watcher of one run (an SSE client): told each event, then once that the run ended. */
export interface Watcher {
  event(e: ProgressEvent): void;
  ended(): void;
}

/**
 * How progress crosses processes (docs/live-progress.md, "In a cluster"): absent in embedded mode.
 * `want` asks whoever executes the run to send its progress for a while; `send` is the executing
 * side's answer, a snapshot first, then events.
 */
export interface ProgressRelay {
  want(runId: string): void;
  send(runId: string, snapshot: ProgressSnapshot | null, events: ProgressEvent[]): void;
}

export interface ProgressHub {
  /** Starts telling `w`; answers where it starts from (the state and the events still kept). */
  watch(
    runId: string,
    w: Watcher,
  ): { snapshot: ProgressSnapshot; events: ProgressEvent[]; stop: () => void };
  /** A poller's read: events after `after`, and a lease that keeps them coming for a while. */
  poll(runId: string, after: number): { snapshot: ProgressSnapshot; events: ProgressEvent[] };
  snapshot(runId: string): ProgressSnapshot | undefined;
  /** The relay's side: another node wants this run's progress / sent some of it. */
  wanted(runId: string): void;
  accept(runId: string, snapshot: ProgressSnapshot | null, events: ProgressEvent[]): void;
  setRelay(relay: ProgressRelay): void;
  /** Runs with state here (tests, metrics). */
  size(): number;
  close(): void;
}

interface RunState {
  /** This process executes the run: it numbers the events. */
  local: boolean;
  seq: number;
  nodes: Map<string, NodeState>;
  ring: ProgressEvent[];
  watchers: Set<Watcher>;
  /** Until when pollers (here) or other nodes (local runs) are served without watching. */
  leaseUntil: number;
  relayUntil: number;
  coalescer?: ReturnType<typeof createCoalescer> | undefined;
  ended: boolean;
}

/** Every ~3 s: mirrors ask again, leases expire, ended runs are forgotten. */
const SWEEP_MS = 3000;
/** How long a `want` keeps a run's progress going to other nodes. */
const RELAY_LEASE_MS = 10_000;

/**
 * Live progress of the runs this process executes or someone here watches, fed by the run events
 * (`progress`, `started`, ends). Many watchers of one run share its one state; a state goes when its
 * run ended and nobody watches or polls it any more.
 */
export function createProgressHub(deps: { clock: Clock; events: RunEvents }): ProgressHub {
  const { clock } = deps;
  const runs = new Map<string, RunState>();
  /** Wants for runs not (yet) executing here: a queued run that starts here is relayed at once. */
  const wants = new Map<string, number>();
  let relay: ProgressRelay | undefined;
  let sweeper: TimerHandle | undefined;

  function state(runId: string, local: boolean): RunState {
    let s = runs.get(runId);
    if (!s) {
      s = {
        local,
        seq: 0,
        nodes: new Map(),
        ring: [],
        watchers: new Set(),
        leaseUntil: 0,
        relayUntil: 0,
        ended: false,
      };
      runs.set(runId, s);
      const until = wants.get(runId);
      if (local && until !== undefined) {
        wants.delete(runId);
        if (until > clock.now()) s.relayUntil = until;
      }
    } else if (local && !s.local) s.local = true;
    return s;
  }

  function push(runId: string, s: RunState, e: ProgressEvent): void {
    s.ring.push(e);
    if (s.ring.length > PROGRESS_LIMITS.ringEvents) s.ring.shift();
    for (const w of s.watchers) w.event(e);
    if (s.local && s.relayUntil > clock.now()) relay?.send(runId, null, [e]);
  }

  function emit(runId: string, p: Progress): void {
    const s = state(runId, true);
    if (s.ended) return;
    if (p.kind === "output") {
      s.coalescer ??= createCoalescer(clock, (o) => push(runId, s, { ...o, seq: ++s.seq }));
      s.coalescer.add(p);
      return;
    }
    s.coalescer?.flush();
    s.nodes.set(p.node.nodeId, p.node);
    push(runId, s, { ...p, seq: ++s.seq });
  }

  function ended(runId: string): void {
    const s = runs.get(runId);
    if (!s || s.ended) return;
    s.coalescer?.flush();
    s.ended = true;
    for (const w of [...s.watchers]) w.ended();
    if (s.watchers.size === 0 && s.leaseUntil <= clock.now() && s.relayUntil <= clock.now())
      runs.delete(runId);
    else s.leaseUntil = Math.max(s.leaseUntil, clock.now() + PROGRESS_LIMITS.lingerMs);
    armSweep();
  }

  function sweep(): void {
    sweeper = undefined;
    const now = clock.now();
    for (const [runId, until] of wants) if (until <= now) wants.delete(runId);
    for (const [runId, s] of runs) {
      const kept = s.watchers.size > 0 || s.leaseUntil > now;
      if (!kept && (s.ended || !s.local)) runs.delete(runId);
      else if (kept && !s.local && !s.ended) relay?.want(runId);
    }
    armSweep();
  }

  function armSweep(): void {
    if (sweeper) return;
    const idle = wants.size === 0 && [...runs.values()].every((s) => s.local && !s.ended);
    if (!idle) sweeper = clock.setTimeout(sweep, SWEEP_MS);
  }

  /** A run nobody here executes: ask for it at once (then on every sweep). */
  function follow(runId: string, s: RunState): void {
    if (!s.local && !s.ended) relay?.want(runId);
    armSweep();
  }

  const snapshotOf = (s: RunState): ProgressSnapshot => ({
    seq: s.seq,
    nodes: [...s.nodes.values()],
  });

  deps.events.subscribe((e) => {
    if (e.type === "progress") emit(e.runId, e.progress);
    else if (e.type === "started") state(e.runId, true);
  });
  deps.events.onEnd(ended);

  return {
    watch(runId, w) {
      const s = state(runId, false);
      s.watchers.add(w);
      follow(runId, s);
      const stop = () => {
        s.watchers.delete(w);
        armSweep();
      };
      return { snapshot: snapshotOf(s), events: [...s.ring], stop };
    },
    poll(runId, after) {
      const s = state(runId, false);
      s.leaseUntil = Math.max(s.leaseUntil, clock.now() + PROGRESS_LIMITS.lingerMs);
      follow(runId, s);
      const first = s.ring[0];
      const events = s.ring.filter((e) => e.seq > after);
      if (first && after < first.seq - 1)
        events.unshift({ kind: "gap", seq: first.seq - 1, dropped: first.seq - 1 - after });
      return { snapshot: snapshotOf(s), events };
    },
    snapshot(runId) {
      const s = runs.get(runId);
      return s ? snapshotOf(s) : undefined;
    },
    wanted(runId) {
      const s = runs.get(runId);
      if (!s) {
        wants.set(runId, clock.now() + RELAY_LEASE_MS);
        armSweep();
        return;
      }
      if (!s.local || s.ended) return;
      const fresh = s.relayUntil <= clock.now();
      s.relayUntil = clock.now() + RELAY_LEASE_MS;
      // A new follower starts from the state and the events still kept.
      if (fresh) relay?.send(runId, snapshotOf(s), s.ring.slice(-32));
    },
    accept(runId, snapshot, events) {
      const s = runs.get(runId);
      if (!s || s.local) return;
      for (const e of events) {
        if (e.seq <= (s.ring.at(-1)?.seq ?? 0)) continue;
        if (e.kind === "node") s.nodes.set(e.node.nodeId, e.node);
        push(runId, s, e);
      }
      if (snapshot) {
        // Newer than the events it came with; watchers that joined before it learn its nodes.
        for (const n of snapshot.nodes) {
          s.nodes.set(n.nodeId, n);
          for (const w of s.watchers) w.event({ kind: "node", node: n, seq: snapshot.seq });
        }
      }
      s.seq = Math.max(s.seq, snapshot?.seq ?? 0, s.ring.at(-1)?.seq ?? 0);
    },
    setRelay(r) {
      relay = r;
    },
    size: () => runs.size,
    close() {
      if (sweeper) clock.clearTimeout(sweeper);
      sweeper = undefined;
      runs.clear();
    },
  };
}
