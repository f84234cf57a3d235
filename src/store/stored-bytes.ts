import { type Kysely, sql, type Transaction } from "kysely";
import type { MonitorTables } from "./monitor-tables.ts";
import type { Database } from "./schema.ts";
import type { NewRun } from "./types.ts";

/**
 * What an app stores, in bytes (docs/security.md, "What an app may store"): what its runs store as
 * they are created (parameter, name, initiator, webhook targets) and the texts their ends write,
 * counted by the run writes in the counters they already update (migrations 023, 025), plus its
 * flows' kept revisions (with their names), its elements' descriptions and its scripts' kept
 * versions, summed when read.
 * A run's bytes are counted in JavaScript as it is written and in SQL as it is deleted: both are
 * the length of the text's UTF-8 encoding, which is what either database stores.
 */

const len = (column: string) => `octet_length(coalesce(runs.${column}, ''))`;

/** The texts a run is created with (migration 025), whatever ends it writes later. */
const CREATED = ["run_param", "run_name", "initiator", "webhooks"] as const;

/**
 * What a run row stored as it was created, in SQL (a delete subtracts it from element_run_stats):
 * its parameter, and its name (a template may repeat the parameter in it), initiator and webhook
 * targets (up to 20 URLs of its flow's configure, copied into every run).
 */
export const PARAM_BYTES_SQL = sql.raw(CREATED.map(len).join(" + "));

/** The texts an end writes, in SQL (a delete subtracts them from run_status_counts). */
export const END_BYTES_SQL = sql.raw(
  ["summary", "result", "error", "stdout", "stderr", "detail"].map(len).join(" + "),
);

const utf8 = (text: string | null | undefined) => (text ? Buffer.byteLength(text, "utf8") : 0);

/** A new run's row, as PARAM_BYTES_SQL counts it. */
export const paramBytes = (row: Record<(typeof CREATED)[number], string | null>) =>
  utf8(row.run_param) + utf8(row.run_name) + utf8(row.initiator) + utf8(row.webhooks);

/** A new run, as PARAM_BYTES_SQL will count its row (run-write-rows.ts, runRow, writes the same texts). */
export const newRunBytes = (run: NewRun) =>
  utf8(run.runParam) +
  utf8(run.runName) +
  (run.initiator ? utf8(JSON.stringify(run.initiator)) : 0) +
  (run.webhooks?.length ? utf8(JSON.stringify(run.webhooks)) : 0);

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
 * The app's bytes: five sums each through an index on the app (the counters' rows, its elements'
 * descriptions, and the revisions and versions of its elements, whose length both databases read
 * without the text).
 */
export async function storedBytes(db: Kysely<Database>, app: string): Promise<number> {
  const { rows } = await sql<{
    runs: unknown;
    params: unknown;
    titles: unknown;
    flows: unknown;
    scripts: unknown;
  }>`
    select
      (select coalesce(sum(bytes), 0) from run_status_counts where app = ${app}) as runs,
      (select coalesce(sum(bytes), 0) from element_run_stats where app = ${app}) as params,
      (select coalesce(sum(octet_length(coalesce(description, ''))), 0) from elements
        where app = ${app}) as titles,
      (select coalesce(sum(octet_length(r.flow) + octet_length(r.configure) + octet_length(r.name)), 0)
        from flow_revisions r join elements e on e.id = r.element_id where e.app = ${app}) as flows,
      (select coalesce(sum(octet_length(v.content)), 0)
        from script_versions v join elements e on e.id = v.element_id where e.app = ${app})
        as scripts`.execute(db);
  const r = rows[0];
  if (!r) return 0;
  return [r.runs, r.params, r.titles, r.flows, r.scripts].reduce<number>(
    (n, v) => n + Number(v),
    0,
  );
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
