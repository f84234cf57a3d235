import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { type CompiledQuery, type DatabaseConnection, type Driver, type Kysely, sql } from "kysely";
import { elementMethods } from "../../src/store/kysely-elements.ts";
import { counterWrites } from "../../src/store/kysely-monitor.ts";
import { runMethods } from "../../src/store/kysely-runs.ts";
import type { MonitorTables } from "../../src/store/monitor-tables.ts";
import { ELEMENT_COLUMNS } from "../../src/store/rows.ts";
import { hotWrites, runRow } from "../../src/store/run-write-rows.ts";
import type { Database } from "../../src/store/schema.ts";
import { bound, shapeOf } from "../../src/store/shapes.ts";
import { kyselyOf } from "../helpers/kysely.ts";
import { newRun } from "../helpers/runs.ts";

/**
 * Compiled shapes (src/store/shapes.ts) send exactly what Kysely would have compiled for the same
 * values: the same SQL text, the same parameters in the same order, in both dialects.
 */

const dialects = { sqlite: kyselyOf("sqlite"), postgres: kyselyOf("postgres") };

/**
 * A Kysely of `name`'s dialect whose connection keeps the statements it is given instead of
 * running them (every one answers no rows): for the shapes a store method compiles on its own db.
 */
function recordingDb(name: keyof typeof dialects): { db: Kysely<Database>; sent: CompiledQuery[] } {
  const sent: CompiledQuery[] = [];
  const connection: DatabaseConnection = {
    executeQuery: async (q) => {
      sent.push(q);
      return { rows: [] };
    },
    streamQuery: () => {
      throw new Error("not streamed");
    },
  };
  const driver: Driver = {
    init: async () => {},
    acquireConnection: async () => connection,
    beginTransaction: async () => {},
    commitTransaction: async () => {},
    rollbackTransaction: async () => {},
    releaseConnection: async () => {},
    destroy: async () => {},
  };
  const db = kyselyOf(name, driver);
  return { db, sent };
}

/** What was sent, as Kysely would have compiled it. */
function assertSame(got: CompiledQuery | undefined, want: CompiledQuery): void {
  assert.equal(got?.sql, want.sql);
  assert.deepEqual(got?.parameters, want.parameters);
}

/** A stand-in transaction that keeps the statements it is given instead of running them. */
function recorder(): { tx: Kysely<Database>; sent: CompiledQuery[] } {
  const sent: CompiledQuery[] = [];
  const tx = {
    executeQuery: async (q: CompiledQuery) => {
      sent.push(q);
      return { rows: [] };
    },
  } as unknown as Kysely<Database>;
  return { tx, sent };
}

const text = fc.option(fc.string({ maxLength: 12 }), { nil: null });
const runArb = fc.record({
  runName: text,
  runParam: text,
  version: text,
  ended: fc.boolean(),
  summary: text,
});

describe("compiled shapes", () => {
  it("map each parameter to its slot, a slot used twice included", () => {
    const db = dialects.postgres;
    const shape = shapeOf((slot) =>
      db
        .insertInto("runs")
        .values({ id: slot(1), app: slot(0), space: slot(1) } as never)
        .returning("id"),
    );
    assert.deepEqual([...shape.slots], [1, 0, 1]);
    assert.deepEqual(bound(shape, ["a", "b"]).parameters, ["b", "a", "b"]);
    assert.throws(
      () => shapeOf(() => db.insertInto("runs").values({ id: "literal" } as never)),
      /not one of its slots/,
    );
  });

  for (const [name, db] of Object.entries(dialects)) {
    it(`insert run rows as Kysely compiles them (${name})`, async () => {
      const hot = hotWrites(db);
      await fc.assert(
        fc.asyncProperty(fc.array(runArb, { minLength: 1, maxLength: 6 }), async (specs) => {
          const rows = specs.map((s) =>
            runRow(
              newRun({ runName: s.runName, runParam: s.runParam, version: s.version }),
              s.ended ? { status: "SUCCESS", endTime: 5, summary: s.summary } : undefined,
            ),
          );
          const { tx, sent } = recorder();
          await hot.insertRuns(tx, rows);
          const want = db.insertInto("runs").values(rows).compile();
          assert.equal(sent.length, 1);
          assert.equal(sent[0]?.sql, want.sql);
          assert.deepEqual(sent[0]?.parameters, want.parameters);
        }),
        { numRuns: 60 },
      );
    });
  }

  for (const name of ["sqlite", "postgres"] as const) {
    it(`counter upserts as Kysely compiles them (${name})`, async () => {
      const { db, sent } = recordingDb(name);
      const m = db.withTables<MonitorTables>();
      const counters = counterWrites(db);
      await fc.assert(
        fc.asyncProperty(
          fc.integer({ min: 1, max: 10_000 }),
          fc.integer({ min: 1, max: 200 }),
          fc.string({ maxLength: 8 }),
          fc.constantFrom(1 as const, -1 as const),
          fc.integer({ min: 0, max: 1e9 }),
          async (element, runs, app, delta, bytes) => {
            sent.length = 0;
            await counters.countRun(db, app, String(element), runs, bytes);
            assertSame(
              sent[0],
              m
                .insertInto("element_run_stats")
                .values({ element_id: element, total_runs: runs, app, bytes })
                .onConflict((oc) =>
                  oc.column("element_id").doUpdateSet({
                    total_runs: sql`element_run_stats.total_runs + ${runs}`,
                    bytes: sql`element_run_stats.bytes + ${bytes}`,
                  }),
                )
                .compile(),
            );
            const key = { app, space: "s", element_id: element, trigger_type: "API" };
            const change = bytes === 0 ? 0 : delta * bytes;
            await counters.countFinished(db, [{ ...key, status: "SUCCESS", bytes }], delta);
            assertSame(
              sent[1],
              m
                .insertInto("run_status_counts")
                .values({ ...key, status: "SUCCESS", n: delta, bytes: change })
                .onConflict((oc) =>
                  oc.columns(["app", "space", "element_id", "trigger_type", "status"]).doUpdateSet({
                    n: sql`run_status_counts.n + ${delta}`,
                    bytes: sql`run_status_counts.bytes + ${change}`,
                  }),
                )
                .compile(),
            );
          },
        ),
        { numRuns: 40 },
      );
    });

    it(`batched run reads and element lookups as Kysely compiles them (${name})`, async () => {
      const { db, sent } = recordingDb(name);
      const runs = runMethods(db, name);
      const elements = elementMethods(db);
      const scope = { app: "a", space: "s" };
      await fc.assert(
        fc.asyncProperty(
          fc.array(fc.string({ minLength: 1, maxLength: 6 }), { minLength: 1, maxLength: 8 }),
          fc.string({ maxLength: 8 }),
          fc.option(fc.string({ minLength: 1, maxLength: 4 }), { nil: undefined }),
          async (ids, elementName, folderId) => {
            sent.length = 0;
            // One turn's reads: one statement, each ID once.
            await Promise.all(ids.map((id) => runs.getRun(scope, id)));
            assert.equal(sent.length, 1);
            assertSame(
              sent[0],
              db
                .selectFrom("runs")
                .selectAll()
                .where("id", "in", [...new Set(ids)])
                .compile(),
            );
            const query = { type: "DPL" as const, name: elementName, folderId };
            await elements.findElements(scope, query);
            let want = db
              .selectFrom("elements as e")
              .innerJoin("folders as f", "f.id", "e.folder_id")
              .select(ELEMENT_COLUMNS)
              .where("e.app", "=", scope.app)
              .where("e.space", "=", scope.space)
              .where("e.type", "=", query.type)
              .where("e.name", "=", query.name);
            if (folderId !== undefined) want = want.where("e.folder_id", "=", folderId);
            assertSame(sent[1], want.limit(2).compile());
          },
        ),
        { numRuns: 40 },
      );
    });
  }
});
