import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { DatabaseSync } from "node:sqlite";
import { describe, it } from "node:test";
import pg from "pg";
import { DF } from "../helpers/flows.ts";
import { gatedScript } from "../helpers/gate-file.ts";
import { killHard, startProcess } from "../helpers/process.ts";
import { modeEnv, scopeHeaders } from "../helpers/server.ts";
import { line, pollUntil } from "../helpers/wait.ts";

/**
 * kill -9 after a schedule's tick was claimed and before its run was stored (here: while its start
 * waits for room in a full queue, docs/scheduler.md "A full queue"), then restart before the next
 * tick: the tick's run is started then, not lost (docs/scheduler.md, "Catch-up").
 */
const h = { ...scopeHeaders(), "content-type": "application/json" };
const PERIOD_MS = 20_000;

async function post(url: string, p: string, body: unknown) {
  const r = await fetch(url + p, { method: "POST", headers: h, body: JSON.stringify(body) });
  return (await r.json()) as { status: boolean; data: unknown };
}

async function deployActive(url: string, elementName: string, flow: unknown, configure: unknown) {
  const d = await post(url, `${DF}/flow/deploy`, {
    elementName,
    revisionName: "r",
    path: "/",
    flow,
    configure,
  });
  assert.equal(d.status, true, JSON.stringify(d));
  const a = await post(url, `${DF}/flow/activate`, { elementName, path: "/" });
  assert.equal(a.data, "APPROVED", JSON.stringify(a));
}

/** The create times of the SCHEDULED runs stored, read from the database itself. */
function scheduledRuns(env: Record<string, string>, dataDir: string): () => Promise<number[]> {
  const q = "select create_time from runs where trigger_type = 'SCHEDULED' order by create_time";
  if (env.DATABASE_URL) {
    const url = env.DATABASE_URL;
    return async () => {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      try {
        return (await c.query(q)).rows.map((r) => Number(r.create_time));
      } finally {
        await c.end();
      }
    };
  }
  return async () => {
    const db = new DatabaseSync(path.join(dataDir, "sluice.db"), { readOnly: true });
    try {
      return db
        .prepare(q)
        .all()
        .map((r) => Number(r.create_time));
    } finally {
      db.close();
    }
  };
}

describe("kill -9 between a tick's claim and its run", () => {
  it("starts the tick's run at the restart, before the next tick", async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-crash-schedule-"));
    // One flow slot and one queued run at most: a held run and queued ones fill both.
    const env = {
      DATA_DIR: dataDir,
      FLOW_CONCURRENCY: "1",
      LIMIT_QUEUED_RUNS: "1",
      SCRIPT_PREFORK: "1",
      ...(await modeEnv()),
    };
    let proc = await startProcess(env);
    try {
      const holder = {
        vertexes: [
          { id: "in", type: "input" },
          { id: "py", type: "script", config: { code: gatedScript([], []) } },
        ],
        edges: [{ source: "in", target: "py" }],
      };
      await deployActive(proc.url, "holder", holder, {});
      // Runs until one is refused: the queue is full (a worker may have fetched a few ahead).
      let refusedRun = false;
      for (let i = 0; i < 20 && !refusedRun; i++)
        refusedRun = !(await post(proc.url, `${DF}/run`, { elementName: "holder" })).status;
      assert.ok(refusedRun, "the queue never filled");
      const ticker = { vertexes: [{ id: "in", type: "input" }], edges: [] };
      const out = proc.child.stdout;
      assert.ok(out);
      const refused = line(out, /retrying within its tick/, PERIOD_MS + 10_000);
      await deployActive(proc.url, "ticker", ticker, {
        triggers: [{ type: "cron", name: "t", crontab: `*/${PERIOD_MS / 1000} * * * * *` }],
      });
      const tick = Number(JSON.parse(await refused).tick);
      await killHard(proc.child);

      proc = await startProcess(env);
      const runs = await pollUntil(
        scheduledRuns(env, dataDir),
        (times) => times.length > 0,
        "a scheduled run after the restart",
        { ms: PERIOD_MS + 10_000 },
      );
      // The claimed tick's own run, not the next tick's.
      assert.ok(runs[0] !== undefined && runs[0] < tick + PERIOD_MS, `${runs} for tick ${tick}`);
    } finally {
      await killHard(proc.child);
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
