import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { type Cluster, deployFlow, H, type Proc, startCluster } from "../helpers/cluster.ts";
import { DF, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import { killHard } from "../helpers/process.ts";
import { pgRuns, pollUntil } from "../helpers/wait.ts";

/**
 * docs/scheduler.md, "In a cluster": a schedule changed through one API process reaches every node
 * by NOTIFY, not at the next periodic re-read (set to ten minutes here, so only NOTIFY can pass).
 */

const PARAM = { orders: [{ amount: 1, qty: 2 }] };

interface Shown {
  crontab: string;
  nextRunAt?: number;
}

async function scheduleOn(api: Proc): Promise<Shown | undefined> {
  const res = await fetch(`${api.url}${DF}/monitor/flows`, { headers: H });
  const body = (await res.json()) as {
    data: { element: { elementName: string }; schedule?: Shown }[];
  };
  return body.data.find((f) => f.element.elementName === "ticker")?.schedule;
}

/**
 * What `api` shows of the schedule, read until `ok` within `ms`. A node takes in a change when
 * the NOTIFY reaches it and announces that to nobody, so this is read by the shared poll.
 */
function shownOn(api: Proc, ok: (s: Shown | undefined) => boolean, ms: number) {
  return pollUntil(() => scheduleOn(api), ok, `the schedule shown on ${api.url}`, { ms });
}

describe("cluster: a schedule changed through one API process", () => {
  let cluster: Cluster;
  let databaseUrl = "";
  let apis: Proc[] = [];
  let worker: Proc;

  const deploy = async (api: Proc, crontab: string, v: number) => {
    const configure = {
      triggers: [{ type: "cron", name: "tick", crontab, parameter: { ...PARAM, v } }],
    };
    await deployFlow(api.url, "ticker", NO_SCRIPT_FLOW, configure, `r${v}`);
  };

  before(async () => {
    cluster = await startCluster({ env: { SCHEDULE_SYNC_MS: "600000" }, apis: 2, workers: 1 });
    ({ databaseUrl, apis } = cluster);
    [worker] = cluster.workers as [Proc];
  });

  after(async () => {
    await cluster?.stop();
  });

  it("fires on the new expression within 1 s, and both API processes show its nextRunAt", async () => {
    const [a1] = apis as [Proc, Proc];
    // Once a year: nothing fires before the change.
    await deploy(a1, "0 0 0 1 1 *", 1);
    for (const api of apis) {
      const shown = await shownOn(api, (s) => s?.crontab === "0 0 0 1 1 *", 1000);
      assert.ok((shown?.nextRunAt ?? 0) > Date.now() + 3_600_000, "next 1 January");
    }

    await deploy(a1, "* * * * * *", 2);
    const changedAt = Date.now();
    for (const api of apis) {
      const shown = await shownOn(api, (s) => s?.crontab === "* * * * * *", 1000);
      assert.ok(shown?.nextRunAt !== undefined && shown.nextRunAt <= Date.now() + 1000);
    }
    // Only the other API process and the worker schedule from here on.
    await killHard(a1.child);

    // Awaited through the runs table's own notifications: re-read on every run written.
    const runs = await pgRuns(databaseUrl);
    const db = runs.db;
    try {
      const run = await runs.until(
        async (d) =>
          (
            await d.query<{ create_time: string; node_id: string | null; status: string }>(
              `select create_time, node_id, status from runs where element_name = 'ticker'
                 and trigger_type = 'SCHEDULED' and run_param like '%"v":2%' and status = 'SUCCESS'
               order by create_time limit 1`,
            )
          ).rows[0],
        (r) => r !== undefined,
        "a run of the new expression succeeded",
        5000,
      );
      // The change reached the nodes at once; the first every-second tick after it is < 1 s later.
      const late = Number(run?.create_time) - changedAt;
      assert.ok(late <= 1500, `first fire ${late} ms after the change`);
      assert.ok(run?.node_id?.includes(`:${worker.child.pid}:`), "executed by the worker");
      const old = await db.query(
        `select 1 from runs where element_name = 'ticker' and run_param like '%"v":1%'`,
      );
      assert.equal(old.rowCount, 0, "the yearly expression never fired");
    } finally {
      await runs.close();
    }
  });
});
