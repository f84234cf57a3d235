import type { PostgresCursor, PostgresPool, PostgresPoolClient, PostgresQueryResult } from "kysely";
import { LRUCache } from "lru-cache";
import type pg from "pg";

/** Distinct statement texts one process prepares at most; the rest run unnamed, as before. */
const MAX_PREPARED = 256;
/**
 * Parameters of all prepared texts together, at most: what a prepared statement holds on the
 * server grows with its parameters (a 150-row insert of runs, 3,450 of them: ~1 MB per
 * connection, for as long as the connection lives), and batch statements have a text per size.
 * A few MB per connection at this bound; 256 texts of large batches held ~100 MB
 * (test/store/pg-prepared.test.ts).
 */
const MAX_PREPARED_PARAMS = 16_384;

/**
 * A text is prepared on its second use: one seen once (a rare batch size of a multi-row statement)
 * would otherwise take one of the MAX_PREPARED names from the texts that recur.
 */
const SEEN_TEXTS = 4096;
/** And at most this much text among them: a 200-row insert's text is ~30 KB. */
const SEEN_BYTES = 8 * 1024 * 1024;

/**
 * PostgreSQL refuses a prepared `select *` once its table changed shape (another node migrated).
 * Told apart from other 0A000 errors by the server function that raises it: the message is
 * translated when the server's `lc_messages` is not English, and a stale statement not recognised
 * fails on every call for as long as its connection lives.
 */
const isStalePlan = (err: unknown) => {
  const e = err as { code?: string; routine?: string; message?: string };
  return (
    e.code === "0A000" &&
    (e.routine === "RevalidateCachedQuery" ||
      String(e.message).includes("cached plan must not change result type"))
  );
};

/**
 * A pool for Kysely whose statements run as named prepared statements (pg's `{name, text,
 * values}` query): each connection parses and plans a statement text once instead of on every
 * call, which was a third of PostgreSQL's CPU per run in a cluster (docs/cluster.md, "Prepared
 * statements"). Only for the store's own lookups and run writes: monitoring keeps unnamed
 * statements, so each of its queries is planned for its own filter values.
 */
export function preparedPool(pool: pg.Pool): PostgresPool {
  const names = new Map<string, string>();
  const seen = new LRUCache<string, true>({
    max: SEEN_TEXTS,
    maxSize: SEEN_BYTES,
    sizeCalculation: (_, text) => text.length + 1,
  });
  let generation = 0;
  let params = 0;
  const nameOf = (text: string, values: number): string | undefined => {
    let name = names.get(text);
    if (name !== undefined || names.size >= MAX_PREPARED) return name;
    if (params + values > MAX_PREPARED_PARAMS) return undefined;
    if (!seen.has(text)) {
      seen.set(text, true);
      return undefined;
    }
    name = `sluice_${generation}_${names.size}`;
    names.set(text, name);
    params += values;
    return name;
  };
  const client = (c: pg.PoolClient): PostgresPoolClient => {
    async function run<R>(text: string, values: readonly unknown[]) {
      // A statement without parameters may hold several commands, which cannot be prepared.
      const name = values.length > 0 ? nameOf(text, values.length) : undefined;
      const query = (n: string | undefined) =>
        c.query({ text, values: [...values], ...(n ? { name: n } : {}) });
      try {
        return (await query(name)) as unknown as PostgresQueryResult<R>;
      } catch (err) {
        if (name === undefined || !isStalePlan(err)) throw err;
        // Every name of this process may be stale: start a new generation, then try once more
        // (nothing ran; inside a transaction the retry fails like the statement did).
        generation++;
        names.clear();
        params = 0;
        return (await query(nameOf(text, values.length))) as unknown as PostgresQueryResult<R>;
      }
    }
    return {
      query: ((sqlOrCursor: string | PostgresCursor<unknown>, values?: readonly unknown[]) =>
        typeof sqlOrCursor === "string"
          ? run(sqlOrCursor, values ?? [])
          : c.query(sqlOrCursor as never)) as PostgresPoolClient["query"],
      release: () => c.release(),
    };
  };
  return {
    connect: async () => client(await pool.connect()),
    // The underlying pool is shared with the unprepared Kysely instance, which ends it.
    end: async () => {},
  };
}
