/**
 * The expression processes: flow expressions are tenants' code, and JSONata evaluates some steps
 * natively (a sort, a regular expression) where no check inside the evaluation can stop them, and
 * can allocate without bound. So they run in child processes with a heap limit of their own, and
 * one whose job outlives the time limit is killed from here; a new one takes its place. Jobs wait
 * here, a queue per tenant, and tenants take turns (docs/security.md, "Flow expressions"), so one
 * tenant's slow expressions hold back no one else's for long. Worker threads would not do:
 * a thread past its heap limit can abort the whole process. The service never evaluates one.
 */
import { type ChildProcess, fork } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Logger } from "pino";
import type { Clock, TimerHandle } from "../clock.ts";
import type { Scope } from "../store/model.ts";
import { createTurns } from "../turns.ts";
import { expressionsOver, type FlowExpressions, type Job } from "./expr-jobs.ts";

export interface ExpressionPoolConfig {
  /** Child processes (FLOW_EXPR_PROCESSES). */
  processes: number;
  /** Wall time of one node's expressions (FLOW_EXPR_TIMEOUT_MS). */
  timeoutMs: number;
  /** Heap of each process (FLOW_EXPR_MEMORY_MB). */
  memoryMb: number;
  /** Largest value of a job, as JSON (LIMIT_RESULT_BYTES). */
  resultBytes: number;
}

export interface ExpressionPool extends FlowExpressions {
  /**
   * One job of a tenant (absent: one shared tenant), in a process with room; when none has, in
   * its turn (src/turns.ts).
   */
  run(job: Job, tenant?: Scope): Promise<unknown>;
  close(): Promise<void>;
}

/** JSONata's own nesting bound: deep enough for any data, short of the thread's stack. */
const DEPTH = 500;
/** How long a new process may take to load before it is given up. */
const LOAD_MS = 30_000;
/** Jobs a process is sent at most: the one it runs and the next (a tenant waits two at most). */
const AHEAD = 2;
/** A job past its limit is first left to JSONata's own timeout, which spares the process. */
const GRACE_MS = 250;

/** A job's outcome from its process: its value as JSON text (undefined: no value). */
type Answer = { ok: true; json?: string } | { ok: false; message: string };

interface Pending {
  id: number;
  job: Job;
  /** Whose job it is: its run's app and space. */
  tenant: Scope;
  resolve(value: unknown): void;
  reject(err: Error): void;
}

interface Slot {
  child: ChildProcess;
  /**
   * Sent and unanswered, oldest first: the first is the one running, the other the next, sent
   * ahead so the process never waits for a round trip between jobs (AHEAD).
   */
  sent: Pending[];
  timer?: TimerHandle | undefined;
  /** Loaded: its job is timed from then on. */
  ready: boolean;
  /** Why this process is being stopped (set once, by us or by its death). */
  ended?: string;
}

export function createExpressionPool(deps: {
  config: ExpressionPoolConfig;
  clock: Clock;
  logger: Logger;
}): ExpressionPool {
  const { config, clock, logger } = deps;
  const slots: Slot[] = [];
  /** Jobs waiting for a process, by tenant, so one tenant's queue never stands before another's job. */
  const turns = createTurns<Pending>();
  let nextId = 0;
  let closed = false;

  const entry = fileURLToPath(new URL("./expr-worker.ts", import.meta.url));
  const execArgv = expressionProcessArgv(config.memoryMb);
  const spawn = (): Slot => {
    const args = [config.timeoutMs, DEPTH, config.resultBytes].map(String);
    const child = fork(entry, args, {
      serialization: "advanced",
      execArgv,
      // Nothing of the service's environment (database URL, secret keys) goes to tenants' code.
      env: {},
      stdio: ["ignore", "ignore", "ignore", "ipc"],
    });
    const slot: Slot = { child, sent: [], ready: false };
    // Jobs are timed once it is loaded; a process that never gets there is stopped all the same.
    slot.timer = clock.setTimeout(
      () => end(slot, `the expression process did not start within ${LOAD_MS} ms`),
      LOAD_MS,
    );
    slot.timer.unref?.();
    idle(slot);
    child.on("message", (m: { id: number; answer: Answer } | { ready: true }) => {
      if ("ready" in m) {
        slot.ready = true;
        arm(slot);
      } else answered(slot, m);
    });
    child.on("error", (err: NodeJS.ErrnoException) => {
      // A job sent to a process that died and was not yet reaped fails to write, and that error
      // comes before the exit, which says why it died (its heap limit, say): the exit ends the
      // slot. It is made certain; the job timers stay as the backstop.
      if (err.code === "EPIPE" || err.code === "ECONNRESET") {
        child.kill("SIGKILL");
        return;
      }
      end(slot, `the expression process failed: ${err.message}`);
    });
    child.on("exit", (code, signal) =>
      end(
        slot,
        // V8 aborts a process past its heap limit.
        signal === "SIGABRT" || code === 134
          ? `expressions used more than ${config.memoryMb} MB (FLOW_EXPR_MEMORY_MB): stopped`
          : `the expression process exited (${signal ?? code})`,
      ),
    );
    return slot;
  };

  /** An idle pool keeps no process alive; one with a job in flight does. */
  const idle = (slot: Slot): void => {
    slot.child.unref();
    slot.child.channel?.unref();
  };

  const arm = (slot: Slot): void => {
    if (slot.sent.length === 0) idle(slot);
    else {
      slot.child.ref();
      slot.child.channel?.ref();
    }
    if (!slot.ready) return; // its load timer runs
    if (slot.timer) clock.clearTimeout(slot.timer);
    slot.timer = undefined;
    if (slot.sent.length === 0) return;
    slot.timer = clock.setTimeout(
      () =>
        end(
          slot,
          `expressions ran longer than ${config.timeoutMs} ms (FLOW_EXPR_TIMEOUT_MS): stopped`,
        ),
      config.timeoutMs + GRACE_MS,
    );
  };

  const settle = (p: Pending): void => turns.settle(p.tenant);

  const answered = (slot: Slot, m: { id: number; answer: Answer }): void => {
    const p = slot.sent[0];
    if (slot.ended || p?.id !== m.id) return;
    slot.sent.shift();
    settle(p);
    const a = m.answer;
    if (!a.ok) p.reject(new Error(a.message));
    else p.resolve(a.json === undefined ? undefined : JSON.parse(a.json));
    arm(slot);
    pump();
  };

  /** The running job fails with `why`; the process goes; the next one sent waits again. */
  const end = (slot: Slot, why: string): void => {
    if (slot.ended) return;
    slot.ended = why;
    if (slot.timer) clock.clearTimeout(slot.timer);
    const [p, ...next] = slot.sent;
    slot.sent = [];
    slots.splice(slots.indexOf(slot), 1);
    for (const q of next.reverse()) {
      settle(q);
      if (closed) q.reject(new Error("the service is stopping"));
      else turns.add(q.tenant, q, true);
    }
    slot.child.kill("SIGKILL");
    if (p) {
      settle(p);
      if (!closed) logger.warn({ why }, "flow expressions stopped");
      p.reject(new Error(closed ? "the service is stopping" : why));
    }
    if (!closed) pump();
  };

  /** Gives every idle process a job; starts one when none is idle, up to the number. */
  const pump = (): void => {
    while (turns.waiting() > 0) {
      // Started when a job finds none idle (most flows need none: expr-lanes.ts).
      let slot: Slot | undefined;
      for (const s of slots) if (!slot || s.sent.length < slot.sent.length) slot = s;
      if ((!slot || slot.sent.length > 0) && slots.length < config.processes) {
        slot = spawn();
        slots.push(slot);
      }
      if (!slot || slot.sent.length >= AHEAD) return;
      const p = turns.take() as Pending;
      try {
        slot.child.send({ id: p.id, job: p.job });
      } catch (err) {
        settle(p);
        p.reject(new Error(`the node's data cannot be passed to its expressions: ${String(err)}`));
        continue;
      }
      slot.sent.push(p);
      if (slot.sent.length === 1) arm(slot);
    }
  };

  const run = (job: Job, tenant: Scope = { app: "", space: "" }): Promise<unknown> => {
    if (closed) return Promise.reject(new Error("the service is stopping"));
    return new Promise((resolve, reject) => {
      const p: Pending = { id: nextId++, job, tenant, resolve, reject };
      turns.add(tenant, p);
      pump();
    });
  };

  return {
    ...expressionsOver(run),
    run,
    async close() {
      closed = true;
      for (const p of turns.drain()) p.reject(new Error("the service is stopping"));
      const all = [...slots];
      const exits = all.map(
        (s) =>
          new Promise((r) =>
            s.child.exitCode !== null || s.child.signalCode !== null
              ? r(null)
              : s.child.once("exit", r),
          ),
      );
      for (const s of all) end(s, "closed");
      await Promise.all(exits);
    },
  };
}

/**
 * Node's options for an expression process: its heap limit, and in case a flaw of JSONata ever
 * let an expression run JavaScript of its choosing, Node's permission model (no file but the
 * code it loads, no child process, no addon) and no code from strings.
 */
export function expressionProcessArgv(memoryMb: number): string[] {
  const src = fileURLToPath(new URL("../", import.meta.url));
  // The folder resolution walks (it may be a link, as a package manager's or a checkout's can
  // be) and the real one JSONata's code is read from.
  const modules = new Set([
    path.join(src, "..", "node_modules"),
    path.dirname(path.dirname(fileURLToPath(import.meta.resolve("jsonata")))),
  ]);
  return [
    `--max-old-space-size=${memoryMb}`,
    "--permission",
    `--allow-fs-read=${src}`,
    ...[...modules].map((m) => `--allow-fs-read=${m}${path.sep}`),
    "--allow-worker", // only for its own watch of the service (expr-parent-watch.ts)
    "--disallow-code-generation-from-strings",
  ];
}
