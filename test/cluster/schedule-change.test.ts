import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { DF, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import { startPostgres } from "../helpers/pg.ts";
import { killHard, startProcess } from "../helpers/process.ts";
import { scopeHeaders } from "../helpers/server.ts";
import { pgRuns, pollUntil } from "../helpers/wait.ts";

/**
 * docs/scheduler.md, "In a cluster": a schedule changed through one API process reaches every node
 * by NOTIFY, not at the next periodic re-read (set to ten minutes here, so only NOTIFY can pass).
 */

const H = { ...scopeHeaders(), "content-type": "application/json" };
const PARAM = { orders: [{ amount: 1, qty: 2 }] };
type Proc = Awaited<ReturnType<typeof startProcess>>;

async function post(url: string, body: unknown): Promise<{ status: boolean; data: unknown }> {
  const res = await fetch(url, { method: "POST", headers: H, body: JSON.stringify(body) });
  return (await res.json()) as { status: boolean; data: unknown };
}

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
  let databaseUrl = "";
  const dataDirs: string[] = [];
  const procs: Proc[] = [];
  let apis: Proc[] = [];
  let worker: Proc;

  const start = async (role: "serve" | "worker", extra: Record<string, string> = {}) => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-sched-"));
    dataDirs.push(dataDir);
    const p = await startProcess(
      { DATA_DIR: dataDir, DATABASE_URL: databaseUrl, SCHEDULE_SYNC_MS: "600000", ...extra },
      role,
    );
    procs.push(p);
    return p;
  };

  const deploy = async (api: Proc, crontab: string, v: number) => {
    const configure = {
      triggers: [{ type: "cron", name: "tick", crontab, parameter: { ...PARAM, v } }],
    };
    const d = await post(`${api.url}${DF}/flow/deploy`, {
      elementName: "ticker",
      revisionName: `r${v}`,
      path: "/c",
      flow: NO_SCRIPT_FLOW,
      configure,
    });
    assert.equal(d.status, true, JSON.stringify(d));
    const a = await post(`${api.url}${DF}/flow/activate`, { elementName: "ticker" });
    assert.equal(a.data, "APPROVED");
  };

  before(async () => {
    databaseUrl = await (await startPostgres()).createDatabase();
    apis = [
      await start("serve", { SLUICE_ROLE: "api" }),
      await start("serve", { SLUICE_ROLE: "api" }),
    ];
    worker = await start("worker");
  });

  after(async () => {
    for (const p of procs) await killHard(p.child);
    for (const d of dataDirs) fs.rmSync(d, { recursive: true, force: true });
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
