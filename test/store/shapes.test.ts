import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import {
  type CompiledQuery,
  DummyDriver,
  Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  SqliteAdapter,
  SqliteIntrospector,
  SqliteQueryCompiler,
} from "kysely";
import { hotWrites, runRow } from "../../src/store/run-writes.ts";
import type { Database } from "../../src/store/schema.ts";
import { bound, shapeOf } from "../../src/store/shapes.ts";
import { newRun } from "../helpers/runs.ts";

/**
 * Compiled shapes (src/store/shapes.ts) send exactly what Kysely would have compiled for the same
 * values: the same SQL text, the same parameters in the same order, in both dialects.
 */

const dialects = {
  sqlite: new Kysely<Database>({
    dialect: {
      createAdapter: () => new SqliteAdapter(),
      createDriver: () => new DummyDriver(),
      createIntrospector: (db) => new SqliteIntrospector(db),
      createQueryCompiler: () => new SqliteQueryCompiler(),
    },
  }),
  postgres: new Kysely<Database>({
    dialect: {
      createAdapter: () => new PostgresAdapter(),
      createDriver: () => new DummyDriver(),
      createIntrospector: (db) => new PostgresIntrospector(db),
      createQueryCompiler: () => new PostgresQueryCompiler(),
    },
  }),
};

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
    assert.deepEqual(shape.slots, [1, 0, 1]);
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
});
