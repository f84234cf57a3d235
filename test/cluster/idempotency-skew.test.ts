import assert from "node:assert/strict";
import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { DF } from "../helpers/flows.ts";
import { startPostgres } from "../helpers/pg.ts";
import { killHard, startProcess } from "../helpers/process.ts";
import { scopeHeaders } from "../helpers/server.ts";
import { type PgRuns, pgRuns } from "../helpers/wait.ts";

/**
 * docs/idempotency.md, "Concurrent duplicates": a call that finds the key claimed and the run not
 * yet recorded waits for it, and takes the key over only once the claim is `CLAIM_TAKEOVER_MS`
 * old by the database's clock. An API node whose clock is minutes behind must not make its fresh
 * claims look old to the other nodes: the same key sent to both at once starts one run.
 */

const H = { ...scopeHeaders(), "content-type": "application/json" };
const SKEW_MS = 5 * 60_000;
type Proc = Awaited<ReturnType<typeof startProcess>>;

const skewed = (ms: number) =>
  `--import=data:text/javascript,${encodeURIComponent(
    `const n = Date.now.bind(Date); Date.now = () => n() + (${ms});`,
  )}`;

describe("cluster: one Idempotency-Key on two API nodes whose clocks disagree", () => {
  let databaseUrl = "";
  let hook: http.Server;
  const hits: http.ServerResponse[] = [];
  let firstHit: () => void = () => {};
  const dataDirs: string[] = [];
  const apis: Proc[] = [];
  let runs: PgRuns;

  const start = async (extra: Record<string, string> = {}) => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-idem-skew-"));
    dataDirs.push(dataDir);
    const p = await startProcess({
      DATA_DIR: dataDir,
      DATABASE_URL: databaseUrl,
      SCRIPT_PREFORK: "1",
      ...extra,
    });
    apis.push(p);
    return p;
  };
  const post = async (api: Proc, p: string, body: unknown, key?: string) => {
    const res = await fetch(`${api.url}${DF}${p}`, {
      method: "POST",
      headers: key ? { ...H, "idempotency-key": key } : H,
      body: JSON.stringify(body),
    });
    const json = (await res.json()) as { status: boolean; data: unknown };
    return { ...json, runId: res.headers.get("x-run-id") };
  };

  before(async () => {
    databaseUrl = await (await startPostgres()).createDatabase();
    hook = http.createServer((_req, res) => {
      hits.push(res);
      if (hits.length === 1) firstHit();
    });
    await new Promise<void>((r) => hook.listen(0, "127.0.0.1", r));
    const hookUrl = `http://127.0.0.1:${(hook.address() as AddressInfo).port}`;
    await start({ NODE_OPTIONS: skewed(-SKEW_MS) });
    await start();
    runs = await pgRuns(databaseUrl);
    const [a] = apis as [Proc];
    const flow = {
      vertexes: [
        { id: "in", type: "input" },
        { id: "call", type: "http", config: { method: "GET", url: `${hookUrl}/x` } },
      ],
      edges: [{ source: "in", target: "call" }],
    };
    const d = await post(a, "/flow/deploy", {
      elementName: "held",
      revisionName: "r",
      path: "/c",
      flow,
      configure: {},
    });
    assert.equal(d.status, true, JSON.stringify(d));
    assert.equal((await post(a, "/flow/activate", { elementName: "held" })).status, true);
  });

  after(async () => {
    for (const res of hits) res.destroy();
    for (const p of apis) await killHard(p.child);
    await runs?.close();
    hook?.close();
    for (const d of dataDirs) fs.rmSync(d, { recursive: true, force: true });
  });

  it("a run-sync on the node behind, then the same key on the other within its write-behind: one run", async () => {
    const [behind, other] = apis as [Proc, Proc];
    const body = { elementName: "held", parameter: { n: 1 } };
    const executing = new Promise<void>((r) => {
      firstHit = r;
    });
    const first = post(behind, "/run-sync", body, "skew-1");
    // The first call's run executes (its record waits for the write-behind grace).
    await executing;
    const second = post(other, "/run-sync", body, "skew-1");
    // The second call looks at the key while the first run is unrecorded (its takeover, if any,
    // is at its first look); once the run is recorded it can only wait for it.
    await runs.until(
      async (d) =>
        (await d.query<{ n: number }>("select count(*)::int as n from runs")).rows[0]?.n ?? 0,
      (n) => n >= 1,
      "the first call's run recorded",
    );
    // Let both end: answer every request the flow made, however many runs made them.
    const answered = Promise.all([first, second]);
    const release = () => {
      for (const res of hits) if (!res.writableEnded) res.end('{"ok":true}');
    };
    release();
    const timer = setInterval(release, 20);
    const [a, b] = await answered.finally(() => clearInterval(timer));
    assert.equal(a.status, true, JSON.stringify(a));
    assert.equal(b.runId, a.runId, "the second call answers the first call's run");
    assert.equal(hits.length, 1, "the flow's http node was called once");
  });
});
