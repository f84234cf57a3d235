import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import pino from "pino";
import { auditAction, auditTarget } from "../../src/audit/actions.ts";
import { createAuditStore } from "../../src/audit/audit-store.ts";
import { createAuditTrail } from "../../src/audit/audit-trail.ts";
import { oncePerMinute } from "../../src/audit/once-per-minute.ts";
import type { AuditEntry } from "../../src/audit/types.ts";
import { type OpenedStore, openStore } from "../../src/store/open-store.ts";
import { startPostgres } from "../helpers/pg.ts";
import { createFakeClock } from "../scheduler/fake-clock.ts";

/** The audit store and its retention over both dialects (docs/audit.md). */

const DAY = 86_400_000;
const T0 = Date.UTC(2025, 0, 1);
const logger = pino({ level: "silent" });

function entry(over: Partial<AuditEntry> = {}): Omit<AuditEntry, "id"> {
  return {
    at: T0,
    app: "app1",
    space: "space1",
    user: "alice",
    address: "127.0.0.1",
    method: "POST",
    route: "/dataflow-3-0/flow/deploy",
    action: "deploy",
    target: { elementName: "f" },
    outcome: "success",
    code: 0,
    httpStatus: 200,
    durationMs: 3,
    requestId: "r1",
    ...over,
  };
}

for (const dialect of ["sqlite", "postgres"] as const) {
  describe(`audit store (${dialect})`, () => {
    let store: OpenedStore;
    let dataDir: string;
    before(async () => {
      dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-audit-"));
      const databaseUrl =
        dialect === "postgres" ? await (await startPostgres()).createDatabase() : undefined;
      store = await openStore({ databaseUrl, dataDir });
    });
    after(async () => {
      await store.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    });

    it("lists one scope newest first, filtered and paged", async () => {
      const clock = createFakeClock(T0);
      const trail = createAuditTrail({
        store: createAuditStore(store.db),
        clock,
        logger,
        config: { retentionDays: 0, purgeMs: 0 },
      });
      // Recorded in one turn: one batch.
      await Promise.all([
        trail.record(entry({ at: T0 + 1, action: "deploy" })),
        trail.record(entry({ at: T0 + 2, action: "activate", user: "bob" })),
        trail.record(entry({ at: T0 + 3, action: "activate", outcome: "failure", code: 28010001 })),
        trail.record(entry({ at: T0 + 4, space: "space2", action: "delete" })),
      ]);
      const win = { limit: 10, offset: 0 };
      const scope = { app: "app1", space: "space1" };
      const all = await trail.list(scope, {}, win);
      assert.equal(all.totalCount, 3);
      assert.deepEqual(
        all.entries.map((e) => e.at),
        [T0 + 3, T0 + 2, T0 + 1],
      );
      assert.deepEqual(all.entries[2]?.target, { elementName: "f" });
      assert.equal((await trail.list(scope, { user: "bob" }, win)).totalCount, 1);
      assert.equal((await trail.list(scope, { action: "activate" }, win)).totalCount, 2);
      assert.equal(
        (await trail.list(scope, { outcome: "failure" }, win)).entries[0]?.code,
        28010001,
      );
      assert.equal((await trail.list(scope, { from: T0 + 2, to: T0 + 2 }, win)).totalCount, 1);
      const page = await trail.list(scope, {}, { limit: 2, offset: 2 });
      assert.deepEqual(
        page.entries.map((e) => e.at),
        [T0 + 1],
      );
      assert.equal((await trail.list(null, {}, win)).totalCount, 4, "null scope: every scope");
      assert.equal(
        (await trail.list({ app: "app1", space: "space2" }, {}, win)).entries[0]?.action,
        "delete",
      );
    });

    it("purges entries past the retention in batches of 1000, and keeps the rest", async () => {
      const clock = createFakeClock(T0 + 100 * DAY);
      const audit = createAuditStore(store.db);
      const old = Array.from({ length: 2500 }, (_, i) => ({
        ...entry({ at: T0 + i, space: "purge" }),
        id: `old-${String(i).padStart(5, "0")}`,
      }));
      await audit.insert(old.slice(0, 1250));
      await audit.insert(old.slice(1250));
      await audit.insert([{ ...entry({ at: T0 + 95 * DAY, space: "purge" }), id: "recent" }]);
      const trail = createAuditTrail({
        store: audit,
        clock,
        logger,
        config: { retentionDays: 30, purgeMs: 0 },
      });
      const scope = { app: "app1", space: "purge" };
      assert.equal((await trail.list(scope, {}, { limit: 1, offset: 0 })).totalCount, 2501);
      // Every scope is purged: the entries of the test before go too.
      assert.ok((await trail.purge()) >= 2500);
      const left = await trail.list(scope, {}, { limit: 10, offset: 0 });
      assert.deepEqual(
        left.entries.map((e) => e.id),
        ["recent"],
      );
    });

    it("purges on the injected clock's timer; retention 0 keeps everything", async () => {
      const clock = createFakeClock(T0 + 10 * DAY);
      const audit = createAuditStore(store.db);
      await audit.insert([
        { ...entry({ at: T0, space: "timer" }), id: "t-old" },
        { ...entry({ at: T0 + 9 * DAY, space: "timer" }), id: "t-new" },
      ]);
      const scope = { app: "app1", space: "timer" };
      const ids = async () =>
        (await audit.list(scope, {}, { limit: 10, offset: 0 })).entries.map((e) => e.id);
      const keeper = createAuditTrail({
        store: audit,
        clock,
        logger,
        config: { retentionDays: 0, purgeMs: 60_000 },
      });
      assert.equal(await keeper.purge(), 0);
      assert.deepEqual(await ids(), ["t-new", "t-old"]);
      const trail = createAuditTrail({
        store: audit,
        clock,
        logger,
        config: { retentionDays: 5, purgeMs: 60_000 },
      });
      trail.start();
      assert.equal(clock.pending(), 1);
      await clock.advanceAsync(10_000); // the first pass, 10 s after start
      await trail.stop(); // waits for the pass the timer started
      assert.deepEqual(await ids(), ["t-new"]);
      assert.equal(clock.pending(), 0, "stop() leaves no timer");
    });
  });
}

describe("what is a change, and what it names", () => {
  it("audits changes, not reads or run starts; an unknown change route under its own name", () => {
    assert.equal(auditAction("POST", "/flow/deploy"), "deploy");
    assert.equal(auditAction("DELETE", "/secret/:name"), "secret-delete");
    assert.equal(auditAction("POST", "/run"), null);
    assert.equal(auditAction("POST", "/monitor/runs"), null);
    assert.equal(auditAction("GET", "/secret"), null);
    assert.equal(auditAction("PATCH", "/something/new"), "PATCH /something/new");
  });

  it("keeps identifiers only: never a flow graph or a secret value", () => {
    const t = auditTarget(
      "deploy",
      {},
      { elementName: "f", revisionName: "r", flow: { vertexes: [] }, configure: { x: 1 } },
      undefined,
    );
    assert.deepEqual(t, { elementName: "f", revisionName: "r" });
    assert.deepEqual(auditTarget("secret-put", { name: "TOKEN" }, { value: "v" }, null), {
      name: "TOKEN",
    });
    const runIds = Array.from({ length: 150 }, (_, i) => `r${i}`);
    const del = auditTarget("delete", {}, { runIds }, { r0: true, r1: false });
    assert.equal((del.runIds as string[]).length, 100);
    assert.equal(del.more, 50);
    assert.deepEqual(del.done, ["r0"]);
  });

  it("admits a key once a minute, and at most max keys a minute", () => {
    const clock = createFakeClock(T0);
    const admit = oncePerMinute(clock, 2);
    assert.equal(admit("a"), true);
    assert.equal(admit("a"), false);
    assert.equal(admit("b"), true);
    assert.equal(admit("c"), false, "over the cap");
    clock.advance(60_000);
    assert.equal(admit("a"), true);
    assert.equal(admit("c"), true);
  });
});
