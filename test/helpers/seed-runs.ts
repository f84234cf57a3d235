import { DatabaseSync } from "node:sqlite";
import pg from "pg";

/**
 * `count` finished runs of the SQLite store's element, written straight into its file as a history
 * of one run every 30 s (no Store call, so no counters): every tenth FAILURE, the rest SUCCESS;
 * run `i` (from 1) is named `<element>-nightly-<i>` and started by `user<i % 50>`.
 */
export function seedFinishedRuns(
  file: string,
  scope: { app: string; space: string },
  elementName: string,
  count: number,
): void {
  const db = new DatabaseSync(file);
  try {
    db.exec("PRAGMA busy_timeout = 5000");
    const el = db
      .prepare("select id, folder_id from elements where app = ? and space = ? and name = ?")
      .get(scope.app, scope.space, elementName) as { id: number; folder_id: string };
    db.prepare(
      `with recursive n(i) as (select 1 union all select i + 1 from n where i < ?)
       insert into runs (id, app, space, element_id, element_type, element_name, folder_id,
         version, trigger_type, status, run_name, run_param, initiator, in_process,
         create_time, start_time, end_time, duration, summary)
       select printf('seed%012d', i), ?, ?, ?, 'DPL', ?, ?, '1', 'SCHEDULED',
         case when i % 10 = 0 then 'FAILURE' else 'SUCCESS' end, ? || '-nightly-' || i, '{}',
         '{"userId":"user' || (i % 50) || '"}', 1, 1735689600000 + i * 30000,
         1735689600000 + i * 30000 + 5, 1735689600000 + i * 30000 + 50, 45, 'seeded'
       from n`,
    ).run(count, scope.app, scope.space, el.id, elementName, el.folder_id, elementName);
  } finally {
    db.close();
  }
}

/** What a quickSearch of `user1` counts among those runs, per status. */
export function user1Counts(count: number): { SUCCESS: number; FAILURE: number } {
  let success = 0;
  let failure = 0;
  for (let i = 1; i <= count; i++) {
    if (!/^user1\d?$/.test(`user${i % 50}`)) continue;
    if (i % 10 === 0) failure++;
    else success++;
  }
  return { SUCCESS: success, FAILURE: failure };
}

/** The same history as seedFinishedRuns, written into a PostgreSQL store at `url`. */
export async function seedFinishedRunsPg(
  url: string,
  scope: { app: string; space: string },
  elementName: string,
  count: number,
): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ id: number; folder_id: string }>(
      "select id, folder_id from elements where app = $1 and space = $2 and name = $3",
      [scope.app, scope.space, elementName],
    );
    const el = rows[0];
    if (!el) throw new Error(`no element ${elementName}`);
    await client.query(
      `insert into runs (id, app, space, element_id, element_type, element_name, folder_id,
         version, trigger_type, status, run_name, run_param, initiator, in_process,
         create_time, start_time, end_time, duration, summary)
       select 'seed' || lpad(i::text, 12, '0'), $2, $3, $4, 'DPL', $5, $6, '1', 'SCHEDULED',
         case when i % 10 = 0 then 'FAILURE' else 'SUCCESS' end, $5 || '-nightly-' || i, '{}',
         '{"userId":"user' || (i % 50) || '"}', 1, 1735689600000 + i * 30000::bigint,
         1735689600000 + i * 30000::bigint + 5, 1735689600000 + i * 30000::bigint + 50, 45, 'seeded'
       from generate_series(1, $1::int) as i`,
      [count, scope.app, scope.space, el.id, elementName, el.folder_id],
    );
    await client.query("analyze runs");
  } finally {
    await client.end();
  }
}
