import assert from "node:assert/strict";
import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { normalizeConfigure } from "../../src/flows/graph.ts";
import { createErrorHandlers, type ErrorHandlerDeps } from "../../src/runs/error-handlers/index.ts";
import { createOwedSweep } from "../../src/runs/error-handlers/recover.ts";
import { createRunEvents } from "../../src/runs/run-events.ts";
import { createNoticeStore, type NoticeStore } from "../../src/store/kysely-notices.ts";
import { type OpenedStore, openStore } from "../../src/store/open-store.ts";
import type { RunEnd, ScopeFilter } from "../../src/store/types.ts";
import { newRun } from "../helpers/runs.ts";
import { type Condition, condition, gate } from "../helpers/wait.ts";
import { createFakeClock } from "../scheduler/fake-clock.ts";

/**
 * A live node's own owed notifications that it gave up (docs/error-handlers.md, "Durable"): a
 * read of the store failed while it sent them, so the mark stayed with it. Its periodic sweep
 * sends them again, never twice at once. Real store and notice store (SQLite), a real receiver
 * on loopback; the handlers' store fails one read; the sweep's timer is a fake clock's.
 */

const HOUR = 3_600_000;
const EVERY_MS = 1000;

/** A webhook receiver that holds every post until `answer` is opened. */
async function holdingReceiver() {
  const posts: { runId: string; event: string }[] = [];
  const cond: Condition = condition();
  const answer = gate();
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString("utf8")));
    req.on("end", () => {
      posts.push(JSON.parse(body));
      cond.changed();
      void answer.promise.then(() => res.end("ok"));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  after(() => {
    server.closeAllConnections();
    server.close();
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  return { url, posts, cond, answer };
}

describe("a node's own owed notifications it gave up", () => {
  let store: OpenedStore;
  let notices: NoticeStore;
  let dataDir: string;
  before(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-owed-retry-"));
    store = await openStore({ dataDir });
    notices = createNoticeStore(store.db, "sqlite");
  });
  after(async () => {
    await store?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  const holderOf = async (runId: string) =>
    (
      await store.db
        .selectFrom("runs")
        .select("notify_node")
        .where("id", "=", runId)
        .executeTakeFirst()
    )?.notify_node;

  /**
   * A FAILURE marked for node n1 whose handlers' first read of the store fails, its handlers, and
   * n1's sweep on a fake clock (started). `endedAgo`: how long before now the run ended.
   */
  async function failedOnce(endedAgo = 0) {
    const clock = createFakeClock();
    const hook = await holdingReceiver();
    const configure = normalizeConfigure({ errorHandlers: { bot: { webhookUrl: hook.url } } });
    const r = newRun({ elementType: "DPL", version: "1", status: "STARTED" });
    const end: RunEnd = {
      status: "FAILURE",
      endTime: clock.now() - endedAgo,
      summary: "boom",
      error: "boom",
      notifyBy: "n1",
    };
    const t0 = clock.now() - endedAgo - 5;
    await store.insertRun({ ...r, createTime: t0, startTime: t0 }, end);
    let failing = 1;
    const calls = { reads: 0 };
    const events = createRunEvents({ clock });
    const handlers = createErrorHandlers({
      // The store interface, with one read failing (the database unreachable for a moment).
      store: {
        getRun: async (scope: ScopeFilter, id: string) => {
          calls.reads++;
          if (failing-- > 0) throw new Error("connection refused");
          return store.getRun(scope, id);
        },
        flowRevision: async () => ({ configure }),
        errorHandlerResults: (id: string) => store.errorHandlerResults(id),
        addErrorHandlerResult: (
          id: string,
          res: Parameters<typeof store.addErrorHandlerResult>[1],
        ) => store.addErrorHandlerResult(id, res),
      },
      notices,
      flows: {},
      tasks: {},
      events,
      clock,
      logger: { error() {}, warn() {} },
      config: {
        smtpUrl: undefined,
        smtpFrom: "sluice@test.local",
        language: "en",
        allowPrivateWebhooks: true,
        attempts: 1,
        backoffMs: 1,
        webhookTimeoutMs: 30_000,
        customWaitS: 1,
        concurrency: 4,
      },
      sleep: async () => {},
    } as unknown as ErrorHandlerDeps);
    const sweep = createOwedSweep({
      notices,
      handlers,
      clock,
      logger: { warn() {}, error() {} },
      nodeId: "n1",
      config: { takeAll: false, heartbeatTimeoutMs: 1500, windowMs: 24 * HOUR, everyMs: EVERY_MS },
    });
    after(() => sweep.stop());
    await sweep.start();

    events.publish({
      type: "ended",
      runId: r.id,
      end,
      run: { ...r, triggerType: "API", createTime: r.createTime, startTime: r.startTime },
      configure,
    });
    await handlers.idle();
    return { clock, hook, r, handlers, sweep, calls };
  }

  it("a read that failed once: the next periodic pass sends it, once, and clears the mark", async () => {
    const { clock, hook, r, handlers, sweep, calls } = await failedOnce();
    assert.equal(calls.reads, 1, "the end read the run, and that read failed");
    assert.equal(hook.posts.length, 0, "nothing sent");
    assert.equal(await holderOf(r.id), "n1", "the mark stays with this node");

    await clock.advanceAsync(EVERY_MS);
    await hook.cond.until(() => hook.posts.length === 1, "the periodic pass sent it", 5000);
    assert.deepEqual(
      [hook.posts[0]?.runId, hook.posts[0]?.event],
      [r.id, "run.failure"],
      "the run's notification",
    );
    // Under way (the receiver has not answered): neither the next pass nor another resend
    // sends it again.
    const joined = handlers.resend(r.id, "n1");
    await clock.advanceAsync(EVERY_MS);
    await sweep.sweep();
    assert.equal(hook.posts.length, 1, "not sent twice at once");

    hook.answer.open();
    await joined;
    await handlers.idle();
    assert.equal(hook.posts.length, 1, "sent once");
    assert.equal(await holderOf(r.id), null, "the mark is cleared");
    assert.deepEqual(
      (await store.errorHandlerResults(r.id)).map((x) => [x.kind, x.ok, x.event]),
      [["bot", true, "run.failure"]],
    );
    assert.deepEqual(handlers.givenUp(), []);
  });

  it("one taken over by another node meanwhile is not sent again; one past the window is dropped", async () => {
    const taken = await failedOnce();
    // Its heartbeats stopped while the store was away: another node, alive, took the mark.
    await store.heartbeat("n2", taken.clock.now() + EVERY_MS);
    await store.db
      .updateTable("runs")
      .set({ notify_node: "n2" })
      .where("id", "=", taken.r.id)
      .execute();
    await taken.clock.advanceAsync(EVERY_MS);
    await taken.sweep.sweep();
    await taken.handlers.idle();
    assert.equal(taken.hook.posts.length, 0, "the other node sends it, not this one");
    assert.deepEqual(taken.handlers.givenUp(), [], "forgotten here");
    assert.equal(await holderOf(taken.r.id), "n2");

    const old = await failedOnce(25 * HOUR);
    await old.clock.advanceAsync(EVERY_MS);
    await old.sweep.sweep();
    await old.handlers.idle();
    assert.equal(old.hook.posts.length, 0, "ended before ERROR_HANDLER_RECOVER_HOURS: not sent");
    assert.equal(await holderOf(old.r.id), null, "its mark is cleared");
    assert.deepEqual(old.handlers.givenUp(), []);
  });
});
