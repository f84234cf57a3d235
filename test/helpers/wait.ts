import type { Readable } from "node:stream";
import pg from "pg";

/**
 * Waiting in tests (issue 13): a test awaits an event (a run event, a record, a process exit, a
 * line of output), never a fixed time. Every wait here is bounded by a deadline that fails the
 * test; none of them sleeps for a set time before looking.
 */

/** Rejects with `what` when `promise` has not settled within `ms`. */
export function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`not within ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

/**
 * A condition over state the test itself changes (a handler's counts, a list of deliveries):
 * whoever changes the state calls `changed()`, and `until` re-checks only then. No polling.
 */
export interface Condition {
  changed(): void;
  /** Resolves once `ok()` holds; fails after `ms`. */
  until(ok: () => boolean, what: string, ms?: number): Promise<void>;
  /** Re-runs `read` after every change until `ok` holds for its value; fails after `ms`. */
  readUntil<T>(
    read: () => Promise<T>,
    ok: (v: T) => boolean,
    what: string,
    ms?: number,
  ): Promise<T>;
}

export function condition(): Condition {
  const waiters = new Set<() => void>();
  let generation = 0;
  return {
    changed() {
      generation++;
      for (const w of [...waiters]) w();
    },
    async readUntil(read, ok, what, ms = 10_000) {
      const end = Date.now() + ms;
      for (;;) {
        const seen = generation;
        const v = await read();
        if (ok(v)) return v;
        const left = end - Date.now();
        if (left <= 0) throw new Error(`not within ${ms} ms: ${what} (last: ${show(v)})`);
        await this.until(() => generation > seen, `${what} (last: ${show(v)})`, left);
      }
    },
    until(ok, what, ms = 10_000) {
      if (ok()) return Promise.resolve();
      let check = () => {};
      const met = new Promise<void>((resolve) => {
        check = () => {
          if (!ok()) return;
          waiters.delete(check);
          resolve();
        };
        waiters.add(check);
      });
      return within(met, ms, what).finally(() => waiters.delete(check));
    },
  };
}

/** A promise with its resolve, for gates a test opens itself. */
export function gate(): { promise: Promise<void>; open: () => void } {
  let open = () => {};
  const promise = new Promise<void>((r) => {
    open = r;
  });
  return { promise, open };
}

/**
 * The one poll in the tests: for state that another process keeps and that nothing announces
 * (what a node shows over HTTP, a process of another process tree going away). Re-reads every
 * `everyMs` until `ok`; fails after `ms` with the last value read. Prefer an event wherever one
 * exists: `pgRuns` below for run records, `line` for output, `once(child, "exit")` for exits.
 */
export async function pollUntil<T>(
  read: () => T | Promise<T>,
  ok: (v: T) => boolean,
  what: string,
  opts: { ms?: number; everyMs?: number } = {},
): Promise<T> {
  const ms = opts.ms ?? 10_000;
  const end = Date.now() + ms;
  for (;;) {
    const v = await read();
    if (ok(v)) return v;
    if (Date.now() > end) throw new Error(`not within ${ms} ms: ${what} (last: ${show(v)})`);
    await new Promise((r) => setTimeout(r, opts.everyMs ?? 20));
  }
}

function show(v: unknown): string {
  try {
    return JSON.stringify(v) ?? String(v);
  } catch {
    return String(v);
  }
}

/** Resolves with the first line of `stream` that matches `re`; fails after `ms` or at its end. */
export function line(stream: Readable, re: RegExp, ms = 10_000): Promise<string> {
  let onData = (_: Buffer | string) => {};
  let onEnd = () => {};
  const found = new Promise<string>((resolve, reject) => {
    let buf = "";
    onData = (chunk) => {
      buf += chunk.toString();
      let nl = buf.indexOf("\n");
      while (nl >= 0) {
        const l = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (re.test(l)) return resolve(l);
        nl = buf.indexOf("\n");
      }
    };
    onEnd = () => reject(new Error(`output ended without a line matching ${re}`));
    stream.on("data", onData);
    stream.once("end", onEnd);
  });
  return within(found, ms, `a line matching ${re}`).finally(() => {
    stream.off("data", onData);
    stream.off("end", onEnd);
  });
}

/** A condition that changes with every run event of an in-process service (`services.events`). */
export function onRunEvents(events: {
  subscribe(listener: (e: { type: string }) => void): void;
}): Condition {
  const c = condition();
  events.subscribe(() => c.changed());
  return c;
}

/**
 * Run records that other processes write, awaited through PostgreSQL itself: a statement-level
 * trigger on `runs` (created here, in the test's database) NOTIFYs on every insert and update,
 * and `until` re-runs its query on each notification. The `runs` table must exist (a node has
 * started on the database).
 */
export interface PgRuns {
  db: pg.Client;
  /** Re-runs `query` whenever a run record changes until `ok` holds; fails after `ms`. */
  until<T>(
    query: (db: pg.Client) => Promise<T>,
    ok: (v: T) => boolean,
    what: string,
    ms?: number,
  ): Promise<T>;
  close(): Promise<void>;
}

const RUNS_CHANNEL = "sluice_test_runs_changed";

export async function pgRuns(databaseUrl: string): Promise<PgRuns> {
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  await db.query(`
    create or replace function sluice_test_runs_changed() returns trigger language plpgsql as $$
    begin perform pg_notify('${RUNS_CHANNEL}', ''); return null; end $$;
    create or replace trigger sluice_test_runs_changed after insert or update on runs
      for each statement execute function sluice_test_runs_changed();
    listen ${RUNS_CHANNEL};`);
  const changes = condition();
  db.on("notification", () => changes.changed());
  return {
    db,
    until: (query, ok, what, ms) => changes.readUntil(() => query(db), ok, what, ms),
    close: () => db.end(),
  };
}
