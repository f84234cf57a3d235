import { createHash } from "node:crypto";
import type { Logger } from "pino";
import { type Clock, sleep } from "../clock.ts";
import { badRequest, ErrorCode, SluiceError } from "../errors.ts";
import { newId } from "../ids.ts";
import type { IdempotencyKeys, KeyPlace, KeyRecord } from "../store/idempotency-keys.ts";
import type { Run, Store } from "../store/types.ts";

/** One start that carries an `Idempotency-Key`: where the key lives and what was asked. */
export interface IdempotentCall extends KeyPlace {
  /** `fingerprint()` of the canonical request (docs/idempotency.md, "Same request"). */
  fingerprint: string;
}

/**
 * How a call with a key was settled: it started the run (`first`), or an earlier call with the
 * same key and request did, and `run` is that run as stored now (undefined: deleted since).
 */
export type Settled<T> =
  | { first: true; value: T }
  | { first: false; runId: string; run: Run | undefined };

export interface Idempotency {
  /**
   * Calls `start` with a run ID claimed for the key, unless the key already names a run; then
   * answers that run. The key's row is inserted before the run exists, so of two calls racing
   * (on one node or two) exactly one starts a run: the primary key decides.
   */
  once<T>(call: IdempotentCall, start: (runId: string) => Promise<T>): Promise<Settled<T>>;
}

export interface IdempotencyDeps {
  keys: IdempotencyKeys;
  store: Pick<Store, "getRun">;
  clock: Clock;
  logger: Pick<Logger, "warn">;
  config: { windowS: number };
}

/**
 * A claim whose run is still not recorded this long after it was made belongs to a call that died
 * (its process ended between the claim and the run's record): a retry takes the key over.
 * Creating a run takes milliseconds; a run-sync is recorded within its 100 ms write-behind grace.
 */
export const CLAIM_TAKEOVER_MS = 30_000;
/** Keys past their window are deleted on a claim, at most this often per process. */
const PRUNE_EVERY_MS = 60_000;
/** A claim is retried this often (the key freed by a failed first call, or taken over). */
const ROUNDS = 5;

export function createIdempotency(deps: IdempotencyDeps): Idempotency {
  let prunedAt = Number.NEGATIVE_INFINITY;
  async function prune(now: number): Promise<void> {
    if (now - prunedAt < PRUNE_EVERY_MS) return;
    prunedAt = now;
    // Only housekeeping: an expired row is replaced by the claim itself, so a failure waits.
    await deps.keys.prune(now).catch((err: unknown) => {
      deps.logger.warn({ err }, "could not prune expired idempotency keys");
    });
  }

  return {
    async once(call, start) {
      for (let round = 0; round < ROUNDS; round++) {
        const now = deps.clock.now();
        await prune(now);
        const runId = newId(now);
        const rec = {
          fingerprint: call.fingerprint,
          runId,
          createdAt: now,
          expiresAt: now + deps.config.windowS * 1000,
        };
        const { won, held } = await deps.keys.claim(call, rec);
        if (won) return { first: true, value: await startClaimed(deps, call, runId, start) };
        if (!held) continue;
        if (held.fingerprint !== call.fingerprint) throw mismatch(call, deps.config.windowS);
        const seen = await awaitRun(deps, call, held);
        if (seen === "gone") continue;
        return { first: false, runId: held.runId, run: seen };
      }
      throw new SluiceError(ErrorCode.BUSINESS, [
        `the request with header Idempotency-Key "${call.key}" could not be settled: its key kept changing hands; retry it`,
      ]);
    },
  };
}

/** The winner starts the run; a start that recorded no run frees the key for the next call. */
async function startClaimed<T>(
  deps: IdempotencyDeps,
  call: IdempotentCall,
  runId: string,
  start: (runId: string) => Promise<T>,
): Promise<T> {
  let value: T;
  try {
    value = await start(runId);
  } catch (err) {
    // Refused (no such element, flow not runnable, queue full): the key must not name a run that
    // never existed. A run-sync that failed after its run was recorded keeps the key. The
    // caller is answered the start's own error even when freeing the key fails too.
    await freeUnrecorded(deps, call, runId).catch((e: unknown) =>
      deps.logger.warn({ err: e }, "could not free an idempotency key after a failed start"),
    );
    throw err;
  }
  await deps.keys.commit(call, runId);
  return value;
}

async function freeUnrecorded(deps: IdempotencyDeps, call: IdempotentCall, runId: string) {
  if (!(await deps.store.getRun(call.scope, runId))) await deps.keys.release(call, runId);
}

/**
 * The run an earlier call's claim names, once it is recorded. Undefined: it was recorded and
 * deleted since. "gone": the claim was freed (its call failed) or is taken over (its call died),
 * and this call claims again.
 */
async function awaitRun(
  deps: IdempotencyDeps,
  call: IdempotentCall,
  held: KeyRecord,
): Promise<Run | undefined | "gone"> {
  let pause = 10;
  for (;;) {
    const run = await deps.store.getRun(call.scope, held.runId);
    if (run) return run;
    const now = await deps.keys.get(call, deps.clock.now());
    if (now?.runId !== held.runId) return "gone";
    // The first call commits its key after its run's record: read once more, after seeing the
    // commit, or a commit landing between the two reads above looks like a deleted run.
    if (now.committed) return await deps.store.getRun(call.scope, held.runId);
    // Its age by the database's clock: a node whose clock is behind makes no fresh claim look old.
    if (now.ageMs >= CLAIM_TAKEOVER_MS) {
      await deps.keys.release(call, held.runId);
      return "gone";
    }
    // The first call is between its claim and its run's record (milliseconds; a run-sync's
    // record waits for its write-behind grace): a short, growing pause, not a busy loop.
    await sleep(deps.clock, pause);
    pause = Math.min(pause * 2, 250);
  }
}

function mismatch(call: IdempotentCall, windowS: number): SluiceError {
  return badRequest(
    `header Idempotency-Key "${call.key}" was already used with a different request to this endpoint within the last ${windowS} s; send a new key for a new request`,
  );
}

/**
 * sha256 (hex) of `value` as canonical JSON: object keys sorted at every depth, so the same
 * request written by two serialisers (key order, spacing, escapes) has one fingerprint.
 */
export function fingerprint(value: unknown): string {
  return createHash("sha256").update(canonicalJson(value)).digest("hex");
}

export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map((v) => canonicalJson(v ?? null)).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
  }
  return JSON.stringify(value ?? null);
}
