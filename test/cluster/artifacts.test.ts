import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { artifactsSaved, WRITERS } from "../helpers/artifacts.ts";
import { DF, deployAndActivate } from "../helpers/flows.ts";
import { startPostgres } from "../helpers/pg.ts";
import { scopeHeaders, startServer, type TestServer } from "../helpers/server.ts";
import { within } from "../helpers/wait.ts";

const H = scopeHeaders();

/**
 * docs/artifacts.md, "What is kept, and when" (where): a run executes on a worker, whose disk the
 * API node cannot see; its kept files are downloaded through the API node, from the shared
 * database.
 */
describe("cluster: artifacts of a run executed on a worker, through an API node", () => {
  let api: TestServer;
  let worker: TestServer;

  before(async () => {
    const env = {
      DATABASE_URL: await (await startPostgres()).createDatabase(),
      FILE_SWEEP_MS: "0",
    };
    api = await startServer({ ...env, SLUICE_ROLE: "api" });
    worker = await startServer({ ...env, SLUICE_ROLE: "worker" });
    await deployAndActivate(api, "keeper", WRITERS, { fileCleanup: { type: "keep" } });
  });
  after(async () => {
    await api.close();
    await worker.close();
  });

  it("lists and downloads through the API node what the worker kept", async () => {
    const saved = artifactsSaved(worker.services);
    const r = await api.call("POST", `${DF}/run`, { headers: H, body: { elementName: "keeper" } });
    assert.equal(r.body.status, true, r.text);
    const runId: string = r.body.data;
    await within(saved(runId), 60_000, "the worker kept the run's files");

    const run = await api.services.store.getRun(null, runId);
    assert.equal(run?.nodeId, worker.services.nodeId, "the run executed on the worker");
    const onWorker = path.join(worker.dataDir, "tasks", runId);
    assert.ok(
      fs.existsSync(path.join(onWorker, "report.csv")),
      "the files are on the worker's disk",
    );
    assert.equal(fs.existsSync(path.join(api.dataDir, "tasks", runId)), false, "not on the API's");
    // Gone from the worker's disk too: what the API serves comes from the database.
    fs.rmSync(onWorker, { recursive: true, force: true });

    const list = await api.call("GET", `${DF}/run/${runId}/artifacts`, { headers: H });
    assert.equal(list.body.data.collected, true, list.text);
    assert.deepEqual(
      list.body.data.files.map((f: { name: string; nodeId: string }) => `${f.nodeId}:${f.name}`),
      ["b:b.txt", "a:big.bin", "b:page.html", "a:report.csv", "a:sub/data.json"],
    );
    const dl = await api.call("GET", `${DF}/run/${runId}/artifacts/report.csv`, { headers: H });
    assert.equal(dl.text, "id,total\n1,42\n");
    assert.equal(dl.headers.get("content-type"), "text/csv; charset=utf-8");
    assert.match(dl.headers.get("content-disposition") ?? "", /^attachment;/);
  });
});
