import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { Kysely, PostgresDialect, SqliteDialect, sql } from "kysely";
import pg from "pg";
import { deleteRunsIn } from "../../src/store/kysely-runs.ts";
import { migrate } from "../../src/store/migrate.ts";
import { type OpenedStore, openStore } from "../../src/store/open-store.ts";
import { openSqlite } from "../../src/store/sqlite-driver.ts";
import type { NewRun, RunEnd, Scope } from "../../src/store/types.ts";
import { startPostgres } from "../helpers/pg.ts";
import { newRun } from "../helpers/runs.ts";

/**
 * The bytes an app stores (docs/security.md, "What an app may store"): what the store keeps for
 * LIMIT_STORED_BYTES_PER_APP, in the counters its run writes already update, always equals the
 * bytes counted from the rows themselves, through inserts (unfinished and already ended), ends,
 * an end that lost to another, deletes, group-committed concurrent writes, deploys and uploads;
 * another app's total does not move; and migration 023 fills the counters from what an earlier
 * release stored. Both dialects.
 */

const A: Scope = { app: "qa", space: "s1" };
const A2: Scope = { app: "qa", space: "s2" };
const B: Scope = { app: "qb", space: "s1" };
const T0 = 1_700_000_000_000;

/** Text of about `n` characters, with two- and four-byte UTF-8 characters in it. */
const text = (n: number, seed: string) => `${seed}é😀${"x".repeat(Math.max(0, n))}`;

/** The app's bytes counted from the rows (runs' texts, revisions, script versions). */
async function counted(store: OpenedStore, app: string): Promise<number> {
  const len = (c: string) => sql.raw(`octet_length(coalesce(${c}, ''))`);
  const runs = await sql<{ n: string | number | null }>`
    select sum(${len("run_param")} + ${len("run_name")} + ${len("initiator")} + ${len("webhooks")}
      + ${len("summary")} + ${len("result")} + ${len("error")}
      + ${len("stdout")} + ${len("stderr")} + ${len("detail")}) as n
    from runs where app = ${app}`.execute(store.db);
  const revs = await sql<{ n: string | number | null }>`
    select sum(octet_length(r.flow) + octet_length(r.configure) + octet_length(r.name)) as n
    from flow_revisions r join elements e on e.id = r.element_id where e.app = ${app}`.execute(
    store.db,
  );
  const descriptions = await sql<{ n: string | number | null }>`
    select sum(${len("description")}) as n from elements runs where app = ${app}`.execute(store.db);
  const versions = await sql<{ n: string | number | null }>`
    select sum(octet_length(v.content)) as n
    from script_versions v join elements e on e.id = v.element_id where e.app = ${app}`.execute(
    store.db,
  );
  return [runs, revs, versions, descriptions].reduce((s, r) => s + Number(r.rows[0]?.n ?? 0), 0);
}

/** Until a statement of this database waits for a lock another transaction holds (PostgreSQL). */
async function waitingOnALock(store: OpenedStore): Promise<void> {
  for (let i = 0; i < 500; i++) {
    const r = await sql<{ n: string }>`select count(*) as n from pg_stat_activity
      where datname = current_database() and wait_event_type = 'Lock'`.execute(store.db);
    if (Number(r.rows[0]?.n) > 0) return;
    await new Promise((resolve) => setImmediate(resolve));
  }
  throw new Error("no statement waited for the lock");
}

const end = (status: RunEnd["status"], n: number, seed: string): RunEnd => ({
  status,
  endTime: T0 + 10,
  summary: `${seed} summary`,
  result: status === "SUCCESS" ? JSON.stringify(text(n, seed)) : undefined,
  error: status === "SUCCESS" ? undefined : text(n / 2, seed),
  stdout: text(n / 4, `${seed}-out`),
  stderr: "",
  detail: { nodes: [{ id: "a", log: text(n / 3, seed) }] },
});

const run = (scope: Scope, elementId: string, n: number, over: Partial<NewRun> = {}) =>
  newRun({
    scope,
    elementId,
    elementType: "DPL",
    status: "STARTED",
    startTime: T0,
    runParam: JSON.stringify({ p: text(n, elementId) }),
    // What a run stores besides its parameter: its name (a template may repeat the parameter in
    // it), its initiator and its webhook targets (up to 20 URLs of a flow's configure).
    runName: text(n, `name-${elementId}`),
    initiator: { userId: text(n / 4, "user") },
    webhooks: [{ url: `http://h.example/${text(n, "hook")}`, on: ["ANY"] }],
    ...over,
  });

for (const dialect of ["sqlite", "postgres"] as const) {
  describe(`bytes an app stores (${dialect})`, () => {
    let store: OpenedStore;
    let dataDir: string;
    let url: string | undefined;

    before(async () => {
      dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-stored-"));
      url = dialect === "postgres" ? await (await startPostgres()).createDatabase() : undefined;
      store = await openStore({ databaseUrl: url, dataDir });
    });
    after(async () => {
      await store?.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    });

    const exact = async (app: string, why: string) => {
      const want = await counted(store, app);
      assert.equal(await store.storedBytes(app), want, `${app} ${why}`);
      return want;
    };

    it("runs: inserts, ends, a lost end, deletes; every space of the app, not another app", async () => {
      assert.equal(await store.storedBytes("qa"), 0);
      const other = run(B, "9", 5000);
      await store.insertRun(other, end("SUCCESS", 3000, "b"));
      const bBytes = await exact("qb", "after its own run");
      assert.ok(bBytes > 8000);

      const queued = run(A, "1", 4000, { status: "QUEUED", startTime: null });
      const started = run(A2, "2", 2000, { elementType: "PY" });
      const ended = run(A, "1", 1000);
      await Promise.all([
        store.insertRun(queued),
        store.insertRun(started),
        store.insertRun(ended, end("FAILURE", 1500, "e")),
      ]);
      const afterInserts = await exact("qa", "after inserts");
      assert.ok(afterInserts > 7000, String(afterInserts));

      assert.equal(await store.endRun(started.id, end("SUCCESS", 6000, "s")), true);
      // The second end of a run changes nothing, its bytes included.
      assert.equal(await store.endRun(started.id, end("FAILURE", 90_000, "late")), false);
      assert.equal(await store.endRun(queued.id, end("CANCELED", 10, "c")), true);
      const afterEnds = await exact("qa", "after ends");
      assert.ok(afterEnds > afterInserts + 6000);

      // Concurrent writes, group-committed together: still exact.
      const many = Array.from({ length: 40 }, (_, i) =>
        run(i % 2 ? A : A2, String(3 + (i % 3)), 300 + i),
      );
      await Promise.all(many.map((r) => store.insertRun(r)));
      await Promise.all(many.map((r, i) => store.endRun(r.id, end("SUCCESS", 100 * i, `m${i}`))));
      await exact("qa", "after concurrent runs");

      const gone = await store.deleteRuns(A, [ended.id, queued.id, ...many.map((r) => r.id)]);
      // Only the runs of the space named are deleted; the others stay counted.
      assert.equal(gone.size, 2 + many.length / 2);
      await exact("qa", "after a delete in one space");
      await store.deleteRuns(null, [started.id, ...many.map((r) => r.id)]);
      assert.equal(await exact("qa", "after every run was deleted"), 0);
      assert.equal(await exact("qb", "untouched"), bBytes);
    });

    it("a terminated task's output, kept after its CANCELED end, is counted and deleted", async () => {
      const task = run(A, "7", 500, { elementType: "PY" });
      await store.insertRun(task);
      // A terminate's end: no output (lifecycle-core.ts, terminate).
      const cut: RunEnd = { status: "CANCELED", endTime: T0 + 5, summary: "terminated" };
      assert.equal(await store.endRun(task.id, { ...cut, error: "terminated by request" }), true);
      const before = await exact("qa", "after the terminate");
      const out = { stdout: text(700, "printed"), stderr: text(90, "warned") };
      assert.equal(await store.keepOutput(task.id, out), true);
      assert.ok((await exact("qa", "after its output was kept")) > before + 790);
      // Once only, and only on a CANCELED record without output.
      assert.equal(await store.keepOutput(task.id, { stdout: "again", stderr: "" }), false);
      const ok = run(A, "7", 10, { elementType: "PY" });
      await store.insertRun(ok, { ...end("SUCCESS", 10, "ok"), stdout: undefined });
      assert.equal(await store.keepOutput(ok.id, { stdout: "x", stderr: "" }), false);
      assert.equal((await store.getRun(null, task.id))?.stdout, out.stdout);
      await store.deleteRuns(null, [task.id, ok.id]);
      await exact("qa", "after they were deleted");
    });

    it("a terminated task's output kept while the run is deleted, or kept twice: exact", async () => {
      const cut: RunEnd = { status: "CANCELED", endTime: T0 + 5, summary: "terminated" };
      const [gone, twice] = [run(A, "8", 200, { elementType: "PY" }), run(A, "8", 90)];
      for (const t of [gone, twice]) {
        await store.insertRun(t);
        await store.endRun(t.id, cut);
      }
      const out = { stdout: text(900, "printed"), stderr: "" };
      // The run's delete holds its row, uncommitted, while the executor keeps its output.
      let commit = () => {};
      const held = new Promise<void>((resolve) => {
        commit = resolve;
      });
      let deleted = () => {};
      const deleting = new Promise<void>((resolve) => {
        deleted = resolve;
      });
      const deletion = store.db.transaction().execute(async (tx) => {
        await deleteRunsIn(tx, null, [gone.id]);
        deleted();
        await held;
      });
      await deleting;
      const keep = store.keepOutput(gone.id, out);
      // PostgreSQL: the keep is waiting for the row (SQLite: for the one connection).
      if (dialect === "postgres") await waitingOnALock(store);
      commit();
      await deletion;
      assert.equal(await keep, false, "nothing kept on a deleted run");
      await exact("qa", "after a keep that raced the run's delete");
      // Two keeps of one record at once: one writes.
      const kept = await Promise.all([
        store.keepOutput(twice.id, out),
        store.keepOutput(twice.id, { stdout: "y", stderr: "" }),
      ]);
      assert.equal(kept.filter(Boolean).length, 1);
      await exact("qa", "after two keeps of one record");
      await store.deleteRuns(null, [twice.id]);
      await exact("qa", "after the kept output was deleted");
    });

    it("deploys and uploads count their revisions and versions, removed ones no longer", async () => {
      const before = await store.storedBytes("qa");
      const folder = await store.ensureFolder(A, "/q", T0);
      for (let i = 0; i < 4; i++)
        await store.deployFlow({
          scope: A,
          folderId: folder.id,
          name: "big",
          revisionName: text(1000 * i, `r${i}`),
          flow: { vertexes: [{ id: "in", type: "input", pad: text(2000 * i, "f") }], edges: [] },
          configure: { pad: text(500, "c") },
          description: { en: text(700 * i, "title") },
          user: null,
          now: T0 + i,
          keepRevisions: 2,
        });
      for (let i = 0; i < 3; i++)
        await store.putScript(
          {
            scope: A,
            folderId: folder.id,
            name: "s",
            kind: "module",
            content: new TextEncoder().encode(text(3000 * (i + 1), "py")),
            now: T0 + i,
            keepVersions: 2,
          },
          true,
        );
      const now = await exact("qa", "after deploys and uploads");
      assert.ok(now > before + 8000, `${before} → ${now}`);
    });
  });

  it(`migration 023 fills the counters from the runs an earlier release stored (${dialect})`, async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-m023-"));
    let url: string | undefined;
    let db: Kysely<unknown>;
    let closeSqlite = async () => {};
    if (dialect === "sqlite") {
      const sqlite = openSqlite(path.join(dataDir, "sluice.db"));
      db = new Kysely<unknown>({ dialect: new SqliteDialect({ database: sqlite.db }) });
      closeSqlite = () => sqlite.close();
    } else {
      url = await (await startPostgres()).createDatabase();
      db = new Kysely<unknown>({
        dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: url, max: 2 }) }),
      });
    }
    await migrate(db, dialect, "022-release-crons");
    await sql`insert into folders (id, app, space, path, created_at)
      values ('f', 'qa', 's', '/', ${T0})`.execute(db);
    await sql`insert into elements (app, space, folder_id, type, name, description, created_at,
        updated_at) values ('qa', 's', 'f', 'DPL', 'd', ${JSON.stringify({ en: text(400, "t") })},
        ${T0}, ${T0})`.execute(db);
    const rows = [
      ["r1", "qa", 1, "DPL", "SUCCESS", text(900, "p"), text(700, "r")],
      ["r2", "qa", 1, "DPL", "QUEUED", text(400, "q"), null],
      ["r3", "qa", 2, "PY", "FAILURE", null, text(50, "e")],
      ["r4", "qb", 3, "DPL", "SUCCESS", text(80, "b"), null],
    ] as const;
    for (const [id, app, el, type, status, param, result] of rows)
      await sql`insert into runs (id, app, space, element_id, element_type, element_name,
          folder_id, trigger_type, status, run_param, in_process, create_time, result, stdout,
          run_name, initiator, webhooks)
        values (${id}, ${app}, 's', ${el}, ${type}, 'x', 'f', 'ASYNC', ${status}, ${param}, 0,
          ${T0}, ${result}, ${status === "QUEUED" ? null : "out😀"}, ${text(300, `n-${id}`)},
          ${JSON.stringify({ userId: id })}, ${JSON.stringify([{ url: text(200, "h"), on: [] }])})`.execute(
        db,
      );
    await sql`insert into run_status_counts (app, space, element_id, trigger_type, status, n)
      select app, space, element_id, trigger_type, status, count(*) from runs
      where status in ('SUCCESS', 'FAILURE', 'CANCELED')
      group by app, space, element_id, trigger_type, status`.execute(db);
    await sql`insert into element_run_stats (element_id, total_runs) values (1, 2), (3, 1)`.execute(
      db,
    );
    await db.destroy();
    await closeSqlite();
    const store = await openStore({ databaseUrl: url, dataDir });
    try {
      for (const app of ["qa", "qb"]) {
        const want = await counted(store, app);
        assert.ok(want > 0);
        assert.equal(await store.storedBytes(app), want, app);
      }
      // And a delete after the upgrade subtracts exactly what the migration added.
      await store.deleteRuns(null, ["r1", "r3", "r4"]);
      assert.equal(await store.storedBytes("qa"), await counted(store, "qa"));
      assert.equal(await store.storedBytes("qb"), 0);
    } finally {
      await store.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
}
