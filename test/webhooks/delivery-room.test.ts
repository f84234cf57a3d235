import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { systemClock } from "../../src/clock.ts";
import { createRunEvents } from "../../src/runs/run-events.ts";
import type {
  ClaimedDelivery,
  NewDelivery,
  WebhookStore,
} from "../../src/store/kysely-webhooks.ts";
import type { Run } from "../../src/store/types.ts";
import { createDeliverer } from "../../src/webhooks/deliverer.ts";
import { createWebhooks } from "../../src/webhooks/index.ts";
import { newRun } from "../helpers/runs.ts";
import { condition, gate } from "../helpers/wait.ts";

const quiet = { warn() {}, error() {} };
const CONFIG = {
  attempts: 3,
  backoffMs: 10,
  maxBackoffMs: 10,
  pollMs: 60_000,
  timeoutMs: 5000,
  allowPrivate: true,
  concurrency: 2,
  concurrencyPerApp: 2,
  inlineResultBytes: 1024,
  dataflowPrefix: "/df",
  scriptPrefix: "/script",
  publicUrl: "",
  recoverWindowMs: 0,
};

/** An outbox whose inserts wait for `inserts.open()`: the ends of several runs then overlap. */
function gatedOutbox(inserts: { promise: Promise<void> }) {
  const cond = condition();
  const calls: { rows: readonly NewDelivery[]; claimed: boolean }[] = [];
  const outbox: WebhookStore = {
    async addDeliveries(rows, claim) {
      calls.push({ rows, claimed: claim !== undefined });
      cond.changed();
      await inserts.promise;
      return rows.map((r) => r.id);
    },
    claimDue: async () => [],
    recordAttempt: async () => true,
    releaseClaims: async () => {},
    nextDue: async () => undefined,
    deliveriesOf: async () => [],
    endedWithoutDeliveries: async () => [],
    pruneOrphans: async () => 0,
    secret: async () => "whsec_test",
    rotateSecret: async () => {},
  };
  return { outbox, calls, cond };
}

describe("webhook attempts under way", () => {
  let server: http.Server;
  let url = "";
  const held: http.ServerResponse[] = [];
  const arrived = condition();
  before(async () => {
    server = http.createServer((req, res) => {
      req.resume();
      held.push(res);
      arrived.changed();
    });
    await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise<void>((done) => server.close(() => done()));
  });

  it("claims no more than WEBHOOK_CONCURRENCY when many runs end at once", async () => {
    const inserts = gate();
    const { outbox, calls, cond } = gatedOutbox(inserts);
    const runs = new Map<string, Run>();
    for (let i = 0; i < 5; i++) {
      const r = newRun({ status: "SUCCESS", webhooks: [{ url, on: ["ANY"] }] });
      runs.set(r.id, { ...r, endTime: r.createTime + 1, result: null } as Run);
    }
    const events = createRunEvents({ clock: systemClock });
    const webhooks = createWebhooks({
      store: { getRun: async (_scope, id) => runs.get(id) },
      outbox,
      events,
      clock: systemClock,
      nodeId: "n1",
      logger: quiet,
      config: CONFIG,
      ownsDatabase: false,
    });
    for (const run of runs.values())
      events.publish({
        type: "ended",
        runId: run.id,
        end: { status: "SUCCESS", endTime: run.endTime ?? 0, summary: null, error: null },
        run,
      });
    // Every end has read its run and is inserting its delivery: they overlap now.
    await cond.until(() => calls.length >= 5, "five inserts under way");
    inserts.open();
    await cond.until(() => calls.reduce((n, c) => n + c.rows.length, 0) >= 5, "every row");
    const claimed = calls.filter((c) => c.claimed).reduce((n, c) => n + c.rows.length, 0);
    assert.ok(claimed <= CONFIG.concurrency, `${claimed} rows claimed for attempts at once`);
    await arrived.until(() => held.length >= claimed, "the claimed attempts");
    for (const res of held) res.end("ok");
    await webhooks.stop();
  });

  it("an attempt whose signing secret read hangs ends within the timeout, inside its claim", async () => {
    const recorded = condition();
    const attempts: { error?: string; ms: number }[] = [];
    const { outbox } = gatedOutbox({ promise: Promise.resolve() });
    const run = newRun({ status: "SUCCESS", webhooks: [{ url, on: ["ANY"] }] });
    const ended = { ...run, endTime: run.createTime + 1, result: null } as Run;
    const hanging: WebhookStore = {
      ...outbox,
      secret: () => new Promise<string>(() => {}),
      async recordAttempt(_id, _node, rec) {
        attempts.push(...rec.log.slice(-1));
        recorded.changed();
        return true;
      },
    };
    const events = createRunEvents({ clock: systemClock });
    const webhooks = createWebhooks({
      store: { getRun: async () => ended },
      outbox: hanging,
      events,
      clock: systemClock,
      nodeId: "n1",
      logger: quiet,
      config: { ...CONFIG, timeoutMs: 200, attempts: 1 },
      ownsDatabase: false,
    });
    const before = held.length;
    events.publish({
      type: "ended",
      runId: ended.id,
      end: { status: "SUCCESS", endTime: ended.endTime ?? 0, summary: null, error: null },
      run: ended,
    });
    await recorded.until(() => attempts.length === 1, "the attempt is recorded", 5000);
    assert.match(attempts[0]?.error ?? "", /abort|timeout/i);
    assert.equal(held.length, before, "nothing was sent after the deadline");
    await webhooks.stop();
  });

  it("attempts no more than an app's share of one claimed batch, and frees the rest at once", async () => {
    const { outbox } = gatedOutbox({ promise: Promise.resolve() });
    const claims: (readonly string[])[] = [];
    const freed: string[] = [];
    const changed = condition();
    const hog = (id: string): ClaimedDelivery => ({
      id,
      runId: id,
      scope: { app: "hog", space: "s" },
      url,
      body: "{}",
      attempts: 0,
      log: [],
    });
    let due = [hog("h1"), hog("h2"), hog("h3")];
    const deliverer = createDeliverer({
      store: {
        ...outbox,
        async claimDue(_node, _now, _lease, limit, skipApps = []) {
          claims.push(skipApps);
          const batch = due.filter((d) => !skipApps.includes(d.scope.app)).slice(0, limit);
          due = due.filter((d) => !batch.includes(d));
          changed.changed();
          return batch;
        },
        async releaseClaims(_node, ids = []) {
          freed.push(...ids);
          changed.changed();
        },
      },
      clock: systemClock,
      nodeId: "n1",
      logger: quiet,
      config: { ...CONFIG, concurrency: 3, concurrencyPerApp: 1 },
    });
    const before = held.length;
    deliverer.kick();
    await arrived.until(() => held.length === before + 1, "the hog's one attempt");
    await changed.until(() => freed.length === 2, "the two rows over its share freed");
    assert.deepEqual(freed, ["h2", "h3"]);
    // The batch filled the room, so the worker looked again, without the hog's rows.
    assert.deepEqual(claims, [[], ["hog"]]);
    held.at(-1)?.end("ok");
    await deliverer.stop();
    assert.equal(held.length, before + 1, "no second attempt of the hog was made at once");
  });
});
