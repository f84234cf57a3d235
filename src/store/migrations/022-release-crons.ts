import { type Kysely, sql } from "kysely";
import { cronCount } from "../../flows/cron-triggers.ts";
import type { Dialect } from "../types.ts";

/** Releases read per statement while filling the column. */
const PAGE = 500;

/**
 * `elements.release_crons`: the cron triggers of a flow's release (docs/scheduler.md, "Apps share
 * the scheduler"). An app's active schedules are the sum over its APPROVED flows, which a deploy
 * or an activate checks against LIMIT_SCHEDULES_PER_APP: reading every release's configure for
 * that would cost the size of every configure of the app on each change. Filled here from the
 * releases already stored, a page of flows at a time.
 */
export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  await sql`alter table elements add column release_crons integer not null default 0`.execute(db);
  let after = 0;
  for (;;) {
    const { rows } = await sql<{ id: number | string; configure: string }>`
      select e.id, r.configure from elements e
      join flow_revisions r on r.element_id = e.id and r.version = e.release_version
      where e.type = 'DPL' and e.id > ${after}
      order by e.id limit ${PAGE}`.execute(db);
    for (const row of rows) {
      const n = cronCount(JSON.parse(row.configure));
      if (n > 0)
        await sql`update elements set release_crons = ${n} where id = ${Number(row.id)}`.execute(
          db,
        );
    }
    if (rows.length < PAGE) return;
    after = Number(rows[rows.length - 1]?.id);
  }
}
