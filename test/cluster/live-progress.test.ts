import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DF, deployAndActivate } from "../helpers/flows.ts";
import { gatedScript, release } from "../helpers/gate-file.ts";
import { startPostgres } from "../helpers/pg.ts";
import { scopeHeaders, startServer, type TestServer } from "../helpers/server.ts";
import { openSse } from "../helpers/sse.ts";
import { pollUntil } from "../helpers/wait.ts";

const h = scopeHeaders();

/** in → work (prints while it runs) → out. */
const FLOW = {
  vertexes: [
    { id: "in", type: "input" },
    {
      id: "work",
      type: "script",
      config: {
        code: gatedScript(["print('on the worker', flush=True)"], ["print('still on the worker')"]),
      },
    },
    { id: "out", type: "output" },
  ],
  edges: [
    { source: "in", target: "work" },
    { source: "work", target: "out" },
  ],
};

/**
 * docs/live-progress.md, "In a cluster": a run executing on a worker node is followed through an
 * API node, which does not execute it; its progress crosses by NOTIFY while someone watches.
 */
describe("cluster: following a run on a worker through an API node", () => {
  let api: TestServer;
  let worker: TestServer;
  before(async () => {
    const databaseUrl = await (await startPostgres()).createDatabase();
    api = await startServer({ DATABASE_URL: databaseUrl, SLUICE_ROLE: "api" });
    worker = await startServer({ DATABASE_URL: databaseUrl, SLUICE_ROLE: "worker" });
    await deployAndActivate(api, "remote", FLOW);
  });
  after(async () => {
    await api?.close();
    await worker?.close();
  });

  it("streams the worker's node states and output over SSE, then the end", async () => {
    const r = await api.call("POST", `${DF}/run`, {
      headers: h,
      body: { elementName: "remote", parameter: {} },
    });
    assert.equal(r.body.status, true, r.text);
    const runId = r.body.data as string;
    const sse = await openSse(`${api.url}${DF}/run/${runId}/events`, h);
    assert.equal(sse.status, 200);
    const out = await sse.next((m) => m.event === "output" && /on the worker/.test(m.data.text));
    assert.equal(out.data.nodeId, "work");
    const mid = await api.services.store.getRun(null, runId);
    assert.equal(mid?.status, "STARTED");
    assert.equal(mid?.nodeId, worker.services.nodeId, "the run executes on the worker");
    // The run's working directory is on the worker's data directory.
    await release(worker.dataDir, runId);
    const end = await sse.next((m) => m.event === "end");
    assert.equal(end.data.runStatus, "SUCCESS");
    await sse.closed;
    const nodes = sse.messages.filter((m) => m.event === "node").map((m) => m.data.node);
    assert.ok(
      nodes.some((n) => n.nodeId === "work" && n.status === "RUNNING"),
      JSON.stringify(nodes),
    );
  });

  it("polling through the API node sees the worker's events", async () => {
    const r = await api.call("POST", `${DF}/run`, {
      headers: h,
      body: { elementName: "remote", parameter: {} },
    });
    const runId = r.body.data as string;
    let after = 0;
    const seen: { kind: string; text?: string }[] = [];
    const poll = async () => {
      const p = await api.call("GET", `${DF}/run/${runId}/progress?after=${after}`, {
        headers: h,
      });
      assert.equal(p.body.status, true, p.text);
      seen.push(...p.body.data.events);
      after = p.body.data.seq;
      return p.body.data;
    };
    // The output arrives while the run waits on the worker; then it is let finish.
    await pollUntil(
      poll,
      () => seen.some((e) => e.kind === "output" && /on the worker/.test(e.text ?? "")),
      "the worker's output through polling",
      { ms: 60_000, everyMs: 100 },
    );
    await release(worker.dataDir, runId);
    const last = await pollUntil(poll, (d) => d.ended, "the run's end through polling", {
      ms: 60_000,
      everyMs: 100,
    });
    assert.equal(last.runStatus, "SUCCESS");
    assert.ok(
      seen.some((e) => e.kind === "output" && /on the worker/.test(e.text ?? "")),
      JSON.stringify(seen),
    );
  });
});
