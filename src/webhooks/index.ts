/**
 * Completion webhooks (docs/webhooks.md): when a run that names webhooks ends, one durable
 * delivery per matching URL is created in the outbox and POSTed, signed, by the delivery worker.
 * Driven by the typed run events: nothing here patches the lifecycle.
 */
import type { Clock } from "../clock.ts";
import type { RunEvent, RunEvents } from "../runs/run-events.ts";
import type { NewDelivery, WebhookStore } from "../store/kysely-webhooks.ts";
import type { Run, Scope, Store } from "../store/types.ts";
import { createDeliverer, type Deliverer, type DelivererConfig } from "./deliverer.ts";
import { deliveryBody, type PayloadConfig } from "./payload.ts";
import { newSecret } from "./signature.ts";
import { deliveryId, wants } from "./targets.ts";
import type { WebhookDelivery } from "./types.ts";

export interface WebhooksConfig extends DelivererConfig, PayloadConfig {
  /** At start, ended runs this recent whose deliveries were never created get them. */
  recoverWindowMs: number;
}

export interface WebhooksDeps {
  store: Pick<Store, "getRun">;
  outbox: WebhookStore;
  events: Pick<RunEvents, "subscribe">;
  clock: Clock;
  nodeId: string;
  logger: { warn(obj: unknown, msg?: string): void; error(obj: unknown, msg?: string): void };
  config: WebhooksConfig;
  /** No other process uses the database: claims left by a previous life are freed at start. */
  ownsDatabase: boolean;
}

export interface Webhooks {
  /** Creates what a previous life missed, then starts delivering. */
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Resolves once every delivery creation and attempt under way has ended (tests, bench). */
  idle(): Promise<void>;
  deliveriesOf(runId: string): Promise<WebhookDelivery[]>;
  secret(scope: Scope): Promise<string>;
  rotateSecret(scope: Scope): Promise<string>;
}

/** Batch of ended runs per recovery query at start. */
const RECOVER_BATCH = 500;

export function createWebhooks(deps: WebhooksDeps): Webhooks {
  const { outbox, clock, logger } = deps;
  const deliverer = createDeliverer({
    store: outbox,
    clock,
    nodeId: deps.nodeId,
    config: deps.config,
    logger,
  });
  const creating = new Set<Promise<void>>();
  deps.events.subscribe((e: RunEvent) => {
    if (e.type !== "ended") return;
    // The ending process held the record and it names no webhook: nothing to read.
    if (e.run && !e.run.webhooks?.length) return;
    const p: Promise<void> = createFor(deps, deliverer, e.runId)
      .catch((err: unknown) =>
        logger.error({ err, runId: e.runId }, "could not create webhook deliveries"),
      )
      .finally(() => creating.delete(p));
    creating.add(p);
  });
  return {
    async start() {
      if (deps.ownsDatabase) await outbox.releaseClaims(null);
      // Once per start: the finished deliveries of runs deleted while they were pending.
      await outbox.pruneOrphans();
      await recoverMissing(deps, deliverer);
      deliverer.start();
    },
    async stop() {
      while (creating.size > 0) await Promise.all(creating);
      await deliverer.stop();
    },
    async idle() {
      while (creating.size > 0) await Promise.all(creating);
      await deliverer.idle();
    },
    deliveriesOf: (runId) => outbox.deliveriesOf(runId),
    secret: (scope) => outbox.secret(scope, newSecret, clock.now()),
    async rotateSecret(scope) {
      const secret = newSecret();
      await outbox.rotateSecret(scope, secret, clock.now());
      return secret;
    },
  };
}

/** The run's deliveries, read back as recorded (its result and times as stored). */
async function createFor(deps: WebhooksDeps, deliverer: Deliverer, runId: string): Promise<void> {
  const run = await deps.store.getRun(null, runId);
  if (run) await create(deps, deliverer, run);
}

/**
 * One delivery per target that wants the run's status. They are created claimed by this node
 * when it has room, so the first attempt needs no claim query: the end-to-delivery latency is
 * one insert and one POST.
 */
async function create(deps: WebhooksDeps, deliverer: Deliverer, run: Run): Promise<void> {
  const { clock, config } = deps;
  const targets = run.webhooks ?? [];
  const now = clock.now();
  const rows: NewDelivery[] = [];
  targets.forEach((t, i) => {
    if (run.endTime === null || run.status === "QUEUED" || run.status === "STARTED") return;
    if (!wants(t, run.status)) return;
    const id = deliveryId(run.id, i);
    const body = deliveryBody(id, run, config);
    rows.push({ id, runId: run.id, scope: run.scope, url: t.url, event: run.status, body, now });
  });
  if (rows.length === 0) return;
  const room = deliverer.reserve(run.scope.app, rows.length);
  const claimed = rows.slice(0, room);
  let made = new Set<string>();
  try {
    const until = now + deliverer.leaseMs();
    made = new Set(await deps.outbox.addDeliveries(claimed, { nodeId: deps.nodeId, until }));
    if (rows.length > room) await deps.outbox.addDeliveries(rows.slice(room));
  } finally {
    // The room goes back whatever happened; the rows made claimed are attempted now.
    const mine = claimed.filter((r) => made.has(r.id));
    deliverer.deliverClaimed(
      run.scope.app,
      mine.map((r) => ({ ...r, attempts: 0, log: [] })),
      room,
    );
  }
  if (rows.length > room) deliverer.kick();
}

/**
 * A process that stopped between recording a run's end and creating its deliveries left ended
 * runs with webhooks and no delivery row: they are created now (docs/webhooks.md, "Durability").
 */
async function recoverMissing(deps: WebhooksDeps, deliverer: Deliverer): Promise<void> {
  let since = deps.clock.now() - deps.config.recoverWindowMs;
  for (;;) {
    const runs = await deps.outbox.endedWithoutDeliveries(since, RECOVER_BATCH);
    for (const run of runs) await create(deps, deliverer, run);
    const last = runs.at(-1);
    if (runs.length < RECOVER_BATCH || last?.endTime == null) return;
    // A run whose status no target wants stays without rows: step past it by end time.
    since = last.endTime + (last.endTime === since ? 1 : 0);
  }
}
