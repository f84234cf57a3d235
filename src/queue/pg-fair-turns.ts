import type { SqlExecutor } from "../store/types.ts";

/**
 * Fair turns in the cluster queue (docs/run-limits.md, "Fair turns"). pg-boss fetches jobs by
 * priority, then creation; a job's priority is minus its turn, so jobs are fetched in turn
 * order. Each space's jobs get consecutive turns, from the later of its own last turn + 1 and the
 * queue's current turn (the turn of the first waiting job, or the last turn given when nothing
 * waits): a space that submits 5,000 runs takes turns 1..5,000, and a space that submits one run
 * while the first waiting is at turn 10 gets turn 10 too, created later: it waits behind at most
 * one of them.
 * This is start-time fair queueing with the turn as virtual time.
 */
export interface FairTurns {
  /** The turns of `keys`' jobs, in order (keys repeat: one entry per job), committed with `db`. */
  take(db: SqlExecutor, keys: readonly string[]): Promise<number[]>;
  /** The queue's current turn: a job sent with it goes before every job not yet fetched. */
  current(db: SqlExecutor): Promise<number>;
}

/**
 * The queue's own table, beside pg-boss's schema and installed the same way: by the first queue
 * that starts, under an advisory lock so that nodes starting together do not collide.
 */
export async function installFairTurns(db: SqlExecutor): Promise<void> {
  await db.executeSql(`BEGIN;
    SELECT pg_advisory_xact_lock(hashtext('sluice-fair-turns'));
    CREATE TABLE IF NOT EXISTS sluice_fair_turns (
      lane text NOT NULL, space_key text NOT NULL, turn bigint NOT NULL,
      PRIMARY KEY (lane, space_key));
    CREATE INDEX IF NOT EXISTS sluice_fair_turns_lane_turn ON sluice_fair_turns (lane, turn);
    COMMIT;`);
}

/**
 * Turns only grow, and pg-boss priorities are int4: past this turn the lane's turns are moved back
 * to start at 1 (see `rebaseSql`), long before a priority could overflow (2^31 − 1).
 */
export const REBASE_AT = 2 ** 30;

/** The first waiting job's turn (pg-boss's fetch index answers it), else the last turn given. */
const currentOf = (jobTable: string, lane: string) => `COALESCE(
      (SELECT -max(priority) FROM pgboss.${jobTable}
        WHERE name = ${lane} AND state < 'active' AND NOT blocked),
      (SELECT max(turn) FROM sluice_fair_turns WHERE lane = ${lane}), 0)::bigint`;

/**
 * Moves a lane's turns back by (current turn − 1), in one statement under the lane's lock: the
 * waiting jobs' priorities and the spaces' last turns alike, so the order is unchanged. A space
 * whose last turn is before the current one is as good as absent (a new job of it takes the
 * current turn): its row goes, which also keeps the table to the spaces that are busy.
 */
function rebaseSql(jobTable: string, lane: string): string {
  const name = `'${lane.replaceAll("'", "''")}'`;
  return `DO $rebase$ DECLARE cur bigint; BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('sluice-fair-turns'), hashtext(${name}));
    cur := ${currentOf(jobTable, name)};
    IF cur > ${REBASE_AT} THEN
      DELETE FROM sluice_fair_turns WHERE lane = ${name} AND turn < cur;
      UPDATE sluice_fair_turns SET turn = turn - (cur - 1) WHERE lane = ${name};
      UPDATE pgboss.${jobTable} SET priority = priority + (cur - 1)
        WHERE name = ${name} AND state < 'active';
    END IF;
  END $rebase$`;
}

/**
 * `pool` runs the rare rebase on a connection of its own: the caller's may be a submit's
 * transaction, which must not commit early. Turns are taken for jobs inserted in the same
 * transaction, so the statement that takes them also announces the lane (`announce`): NOTIFY
 * is delivered at commit, and only if the transaction commits (docs/cluster.md, "Waking the
 * lanes"), at no extra round trip.
 */
export function createFairTurns(
  lane: string,
  jobTable: string,
  pool: SqlExecutor,
  announce: { channel: string; payload: string },
): FairTurns {
  const currentSql = `SELECT ${currentOf(jobTable, "$1")} AS v`;
  // One row per space, locked in key order so two submitters never wait on each other crosswise.
  const takeSql = `WITH taken AS (INSERT INTO sluice_fair_turns (lane, space_key, turn)
      SELECT $1, k, $2::bigint + n FROM unnest($3::text[], $4::int[]) AS t(k, n) ORDER BY k
      ON CONFLICT (lane, space_key)
        DO UPDATE SET turn = GREATEST(sluice_fair_turns.turn, $2::bigint) + excluded.turn - $2::bigint
      RETURNING space_key, turn)
    SELECT space_key, turn FROM taken CROSS JOIN (SELECT pg_notify($5, $6)) AS announced`;
  const read = async (db: SqlExecutor): Promise<number> => {
    const { rows } = await db.executeSql(currentSql, [lane]);
    return Number((rows[0] as { v: string | number }).v);
  };
  const current = async (db: SqlExecutor): Promise<number> => {
    const turn = await read(db);
    if (turn <= REBASE_AT) return turn;
    await pool.executeSql(rebaseSql(jobTable, lane));
    return read(db);
  };
  return {
    current,
    async take(db, keys) {
      const counts = new Map<string, number>();
      for (const k of keys) counts.set(k, (counts.get(k) ?? 0) + 1);
      const sorted = [...counts.keys()].sort();
      // A space with nothing waiting starts at the current turn itself: after the job that holds
      // it (creation order breaks ties), before that space's next job.
      const base = (await current(db)) - 1;
      const { rows } = await db.executeSql(takeSql, [
        lane,
        base,
        sorted,
        sorted.map((k) => counts.get(k)),
        announce.channel,
        announce.payload,
      ]);
      // The next turn of each space in this batch: its first job gets (last − count + 1).
      const next = new Map<string, number>();
      for (const r of rows as { space_key: string; turn: string | number }[])
        next.set(r.space_key, Number(r.turn) - (counts.get(r.space_key) ?? 0) + 1);
      return keys.map((k) => {
        const t = next.get(k) as number;
        next.set(k, t + 1);
        return t;
      });
    },
  };
}
