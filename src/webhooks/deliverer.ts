import type { Clock, TimerHandle } from "../clock.ts";
import { errorText } from "../errors.ts";
import { postGuarded } from "../guarded-post.ts";
import { PermanentHandlerError } from "../runs/error-handlers/types.ts";
import type { ClaimedDelivery, WebhookStore } from "../store/kysely-webhooks.ts";
import { newSecret, sign } from "./signature.ts";
import type { DeliveryAttempt, DeliveryStatus } from "./types.ts";

export interface DelivererConfig {
  /** Attempts per delivery, the first included; then it is FAILED. */
  attempts: number;
  /** Delay before the 2nd attempt; doubled for each further one, at most `maxBackoffMs`. */
  backoffMs: number;
  maxBackoffMs: number;
  /** How often due deliveries are looked for (those created or retried on other nodes). */
  pollMs: number;
  /** One attempt's bound, connection to last byte read. */
  timeoutMs: number;
  allowPrivate: boolean;
  /** Attempts under way at once on this node. */
  concurrency: number;
  /** Attempts of one app under way at once on this node: the rest is left to the other apps. */
  concurrencyPerApp: number;
}

export interface Deliverer {
  /** Looks for due deliveries now (something was created or became due). */
  kick(): void;
  /**
   * Takes room for up to `wanted` attempts of deliveries this node is creating claimed (the rest
   * are left for the claim loop). Taken at once, so that runs ending together share the room.
   */
  reserve(app: string, wanted: number): number;
  /** Attempts deliveries created claimed, without a claim query, and gives back `reserved`. */
  deliverClaimed(app: string, rows: readonly ClaimedDelivery[], reserved: number): void;
  leaseMs(): number;
  start(): void;
  /** Stops looking, waits for the attempts under way, frees this node's claims. */
  stop(): Promise<void>;
  /** Resolves once no attempt is under way (tests, bench). */
  idle(): Promise<void>;
}

interface State {
  store: WebhookStore;
  clock: Clock;
  nodeId: string;
  config: DelivererConfig;
  logger: { warn(obj: unknown, msg?: string): void; error(obj: unknown, msg?: string): void };
  inFlight: Set<Promise<void>>;
  /** Room reserved by deliveries being created claimed, not yet in `inFlight`. */
  reserved: number;
  /** Attempts under way and room reserved, per app (docs/webhooks.md, "Fairness between apps"). */
  perApp: Map<string, number>;
  draining: Promise<void> | null;
  again: boolean;
  /** The last claim filled the room: more may be due as soon as an attempt ends. */
  backlog: boolean;
  timers: Set<TimerHandle>;
  stopped: boolean;
}

/**
 * The delivery worker (docs/webhooks.md, "Delivery"): claims due deliveries with one atomic UPDATE,
 * POSTs each signed body with a timeout, records every attempt, and schedules the retry. A claim
 * is a lease longer than an attempt can take, so a node that dies mid-attempt only delays it.
 */
export function createDeliverer(deps: Omit<State, keyof Mutable>): Deliverer {
  const s: State = {
    ...deps,
    inFlight: new Set(),
    reserved: 0,
    perApp: new Map(),
    draining: null,
    again: false,
    backlog: false,
    timers: new Set(),
    stopped: false,
  };
  return {
    kick: () => kick(s),
    reserve(app, wanted) {
      const taken = s.stopped ? 0 : Math.max(0, Math.min(wanted, room(s), share(s, app)));
      s.reserved += taken;
      count(s, app, taken);
      return taken;
    },
    deliverClaimed: (app, rows, reserved) => {
      s.reserved -= reserved;
      count(s, app, -reserved);
      for (const d of rows) track(s, d);
    },
    leaseMs: () => leaseMs(s),
    start() {
      poll(s);
      kick(s);
    },
    async stop() {
      s.stopped = true;
      for (const t of s.timers) s.clock.clearTimeout(t);
      s.timers.clear();
      await s.draining;
      while (s.inFlight.size > 0) await Promise.all(s.inFlight);
      // Only a courtesy to the other nodes: a claim left behind (the database is gone) expires
      // after its lease, so a failure here must not fail the shutdown's other steps.
      await s.store.releaseClaims(s.nodeId).catch((err: unknown) => {
        s.logger.warn({ err }, "could not free this node's webhook claims at stop");
      });
    },
    async idle() {
      while (s.inFlight.size > 0 || s.draining) await Promise.all([...s.inFlight, s.draining]);
    },
  };
}

type Mutable = Pick<
  State,
  "inFlight" | "reserved" | "perApp" | "draining" | "again" | "backlog" | "timers" | "stopped"
>;

const leaseMs = (s: State): number => s.config.timeoutMs + 5000;

const room = (s: State): number => s.config.concurrency - s.inFlight.size - s.reserved;

/** What is left of the app's share of this node's attempts. */
const share = (s: State, app: string): number =>
  s.config.concurrencyPerApp - (s.perApp.get(app) ?? 0);

function count(s: State, app: string, by: number): void {
  const n = (s.perApp.get(app) ?? 0) + by;
  if (n > 0) s.perApp.set(app, n);
  else s.perApp.delete(app);
}

function later(s: State, ms: number, fn: () => void): void {
  if (s.stopped) return;
  const t = s.clock.setTimeout(() => {
    s.timers.delete(t);
    fn();
  }, ms);
  t.unref?.();
  s.timers.add(t);
}

function poll(s: State): void {
  later(s, s.config.pollMs, () => {
    kick(s);
    poll(s);
  });
}

function kick(s: State): void {
  if (s.stopped) return;
  if (s.draining) {
    s.again = true;
    return;
  }
  s.draining = drain(s)
    .catch((err: unknown) => s.logger.error({ err }, "webhook delivery claim failed"))
    .finally(() => {
      s.draining = null;
      if (s.again) {
        s.again = false;
        kick(s);
      }
    });
}

/**
 * Claims due rows while there is room. An app with its share under way is skipped in the claim;
 * rows of an app that reached its share within one batch are freed at once. Either way its
 * rows wait, so the next attempt to end looks again (`backlog`).
 */
async function drain(s: State): Promise<void> {
  let heldBack = false;
  for (;;) {
    const free = room(s);
    // No room: look again as soon as an attempt ends.
    s.backlog = free <= 0 || heldBack;
    if (s.stopped || free <= 0) return;
    const full = [...s.perApp].filter(([, n]) => n >= s.config.concurrencyPerApp);
    const skip = full.map(([app]) => app);
    const batch = await s.store.claimDue(s.nodeId, s.clock.now(), leaseMs(s), free, skip);
    const over: string[] = [];
    for (const d of batch) {
      if (share(s, d.scope.app) > 0) track(s, d);
      else over.push(d.id);
    }
    if (over.length > 0) await s.store.releaseClaims(s.nodeId, over);
    heldBack ||= over.length > 0 || skip.length > 0;
    s.backlog = batch.length === free || heldBack;
    if (batch.length < free) return;
  }
}

function track(s: State, d: ClaimedDelivery): void {
  count(s, d.scope.app, 1);
  const p: Promise<void> = attempt(s, d)
    .catch((err: unknown) => s.logger.error({ err, delivery: d.id }, "webhook attempt failed"))
    .finally(() => {
      count(s, d.scope.app, -1);
      s.inFlight.delete(p);
      if (s.backlog) kick(s);
    });
  s.inFlight.add(p);
}

/** Settles as `work`, or rejects once `signal` aborts (a DNS lookup cannot be aborted itself). */
function beforeDeadline<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const stop = () => reject(signal.reason);
    if (signal.aborted) return stop();
    signal.addEventListener("abort", stop, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener("abort", stop));
  });
}

/**
 * One POST and its record; nothing is thrown. The whole attempt — the signing secret's read, the
 * name's resolution (checked where it connects), the POST and reading its answer — fits in one timeout, so it ends
 * within the claim's lease and no other node can claim the delivery while it may still be sent.
 */
async function attempt(s: State, d: ClaimedDelivery): Promise<void> {
  const { clock, config } = s;
  const at = clock.now();
  const out: DeliveryAttempt = { at, ms: 0 };
  let permanent = false;
  const deadline = AbortSignal.timeout(config.timeoutMs);
  try {
    const secret = await beforeDeadline(s.store.secret(d.scope, newSecret, at), deadline);
    const answer = await postGuarded({
      url: new URL(d.url),
      headers: {
        "content-type": "application/json; charset=utf-8",
        "user-agent": "sluice-webhooks",
        "sluice-signature": sign(secret, Math.floor(at / 1000), d.body),
        "sluice-delivery": d.id,
        "sluice-attempt": String(d.attempts + 1),
      },
      body: d.body,
      signal: deadline,
      allowPrivate: config.allowPrivate,
      // Read (a little of) the answer; its content is not used. A redirect is not followed.
      maxAnswerBytes: 1024,
      refuse: (host) => new PermanentHandlerError(`the address of ${host} is private`),
    });
    out.httpStatus = answer.status;
  } catch (err) {
    out.error = errorText(err);
    // A private address refused by configuration does not become public by retrying.
    permanent = err instanceof PermanentHandlerError;
  }
  out.ms = clock.now() - at;
  await record(s, d, out, permanent);
}

async function record(
  s: State,
  d: ClaimedDelivery,
  out: DeliveryAttempt,
  permanent: boolean,
): Promise<void> {
  const { clock, config } = s;
  const attempts = d.attempts + 1;
  const ok = out.httpStatus !== undefined && out.httpStatus >= 200 && out.httpStatus < 300;
  const status: DeliveryStatus = ok
    ? "DELIVERED"
    : permanent || attempts >= config.attempts
      ? "FAILED"
      : "PENDING";
  const wait = Math.min(config.backoffMs * 2 ** (attempts - 1), config.maxBackoffMs);
  const nextAt = status === "PENDING" ? clock.now() + wait : clock.now();
  const log = [...d.log, out];
  const mine = await s.store.recordAttempt(d.id, s.nodeId, { status, attempts, log, nextAt });
  if (!mine) s.logger.warn({ delivery: d.id }, "webhook claim expired before its attempt ended");
  // The host only: a receiver's URL may carry a token in its path or query.
  if (!ok)
    s.logger.warn({ delivery: d.id, host: new URL(d.url).host, ...out }, "webhook attempt failed");
  if (status === "PENDING") later(s, wait, () => kick(s));
}
