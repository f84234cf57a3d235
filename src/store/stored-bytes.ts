import { type Kysely, sql, type Transaction } from "kysely";
import type { MonitorTables } from "./monitor-tables.ts";
import type { Database } from "./schema.ts";

/**
 * What an app stores, in bytes (docs/security.md, "What an app may store"): its runs' parameters
 * and the texts their ends write, counted by the run writes in the counters they already update
 * (migration 023), plus its flows' kept revisions and its scripts' kept versions, summed when read.
 * A run's bytes are counted in JavaScript as it is written and in SQL as it is deleted: both are
 * the length of the text's UTF-8 encoding, which is what either database stores.
 */

const len = (column: string) => `octet_length(coalesce(runs.${column}, ''))`;

/** A run row's parameter, in SQL (a delete subtracts it from element_run_stats). */
export const PARAM_BYTES_SQL = sql.raw(len("run_param"));

/** The texts an end writes, in SQL (a delete subtracts them from run_status_counts). */
export const END_BYTES_SQL = sql.raw(
  ["summary", "result", "error", "stdout", "stderr", "detail"].map(len).join(" + "),
);

const utf8 = (text: string | null | undefined) => (text ? Buffer.byteLength(text, "utf8") : 0);

/** A new run's parameter, as PARAM_BYTES_SQL counts it. */
export const paramBytes = (row: { run_param: string | null }) => utf8(row.run_param);

/** The columns an end writes, as END_BYTES_SQL counts them. */
export interface EndTexts {
  summary: string | null;
  result: string | null;
  error: string | null;
  stdout: string | null;
  stderr: string | null;
  detail: string | null;
}

export const endBytes = (c: EndTexts) =>
  utf8(c.summary) +
  utf8(c.result) +
  utf8(c.error) +
  utf8(c.stdout) +
  utf8(c.stderr) +
  utf8(c.detail);

/**
 * The app's bytes: four sums each through an index on the app (the counters' rows, and the
 * revisions and versions of its elements, whose length both databases read without the text).
 */
export async function storedBytes(db: Kysely<Database>, app: string): Promise<number> {
  const { rows } = await sql<{ runs: unknown; params: unknown; flows: unknown; scripts: unknown }>`
    select
      (select coalesce(sum(bytes), 0) from run_status_counts where app = ${app}) as runs,
      (select coalesce(sum(bytes), 0) from element_run_stats where app = ${app}) as params,
      (select coalesce(sum(octet_length(r.flow) + octet_length(r.configure)), 0)
        from flow_revisions r join elements e on e.id = r.element_id where e.app = ${app}) as flows,
      (select coalesce(sum(octet_length(v.content)), 0)
        from script_versions v join elements e on e.id = v.element_id where e.app = ${app})
        as scripts`.execute(db);
  const r = rows[0];
  return r ? Number(r.runs) + Number(r.params) + Number(r.flows) + Number(r.scripts) : 0;
}

/**
 * Subtracts the parameters of deleted runs from their elements' rows, in the caller's transaction
 * and before its status counters: the order the run writes take the two tables in (run-writes.ts),
 * elements in the order they take them, so that two transactions never wait on each other crosswise.
 */
export async function uncountParams(
  tx: Transaction<Database>,
  deleted: readonly { element_id: number; param_bytes: number | string | bigint }[],
): Promise<void> {
  const byElement = new Map<string, number>();
  for (const r of deleted) {
    const id = String(r.element_id);
    byElement.set(id, (byElement.get(id) ?? 0) + Number(r.param_bytes));
  }
  const m = tx.withTables<MonitorTables>();
  for (const id of [...byElement.keys()].sort()) {
    const bytes = byElement.get(id) ?? 0;
    if (bytes === 0) continue;
    await m
      .updateTable("element_run_stats")
      .set({ bytes: sql`bytes - ${bytes}` })
      .where("element_id", "=", Number(id))
      .execute();
  }
}
