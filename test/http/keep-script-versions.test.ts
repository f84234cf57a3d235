import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DF } from "../helpers/flows.ts";
import { scopeHeaders, startServer, type TestServer, upload } from "../helpers/server.ts";

/**
 * The bound on what a script keeps (docs/script-service.md, "How many versions are kept"): an
 * upload with `overwrite` past `LIMIT_VERSIONS_PER_SCRIPT` (default 100) removes the oldest
 * versions nothing needs in its own transaction: never the newest, one a kept flow revision
 * pins, or one an unfinished task runs. In both modes.
 */

const LIMIT = 100;
const source = (n: number) => `def main(p):\n    return {'n': ${n}}\n`;

/** input → s (the PY element `s` in /kv) → output. */
const SCRIPT_FLOW = {
  vertexes: [
    { id: "in", type: "input" },
    { id: "s", type: "script", config: { element: { elementName: "s", path: "/kv" } } },
    { id: "out", type: "output" },
  ],
  edges: [
    { source: "in", target: "s" },
    { source: "s", target: "out" },
  ],
};

describe("script versions kept per script (LIMIT_VERSIONS_PER_SCRIPT)", () => {
  let server: TestServer;
  const h = scopeHeaders();
  const df = (p: string, body: unknown) => server.call("POST", DF + p, { headers: h, body });
  const sc = (p: string, body: unknown) =>
    server.call("POST", `${server.config.scriptPrefix}${p}`, { headers: h, body });
  const S = { elementName: "s", path: "/kv" };
  /** Uploads versions `from`..`to` of `s`, a few files per request, each item stored. */
  const uploadVersions = async (from: number, to: number) => {
    for (let n = from; n <= to; n += 20) {
      const files = [];
      for (let i = n; i <= Math.min(to, n + 19); i++)
        files.push({ name: "s.py", content: source(i) });
      const r = await upload(server, files, { path: "/kv", overwrite: "true" });
      assert.equal(r.body.code, 0, r.text);
      for (const item of r.body.data) assert.equal(item.status, 0, r.text);
    }
  };
  const deployAndActivate = async (name: string) => {
    const d = await df("/flow/deploy", {
      elementName: name,
      path: "/kv",
      revisionName: "r",
      flow: SCRIPT_FLOW,
      configure: {},
    });
    assert.equal(d.body.code, 0, d.text);
    const a = await df("/flow/activate", { elementName: name, path: "/kv" });
    assert.equal(a.body.data, "APPROVED", a.text);
  };
  const runFlow = async (name: string) => {
    const r = await df("/run-sync", { elementName: name, path: "/kv", parameter: {} });
    assert.equal(r.body.code, 0, r.text);
    return { value: r.body.data, runId: r.headers.get("x-run-id") ?? "" };
  };
  const kept = async (): Promise<number[]> => {
    const r = await sc("/script/element/versions", { ...S, pageNo: 0, pageSize: 100 });
    assert.equal(r.body.code, 0, r.text);
    return r.body.data.items.map((i: { version: number }) => i.version);
  };
  const range = (from: number, to: number) =>
    Array.from({ length: to - from + 1 }, (_, i) => to - i);

  before(async () => {
    server = await startServer();
  });
  after(() => server.close());

  it("106 uploads keep 100: pinned versions stay, re-runs of removed ones are refused naming them", async () => {
    await uploadVersions(1, 1);
    await deployAndActivate("pinsOne"); // pins s@1 for good
    await uploadVersions(2, 2);
    await deployAndActivate("pinsTwo"); // pins s@2 until it is activated again
    const ranTwo = await runFlow("pinsTwo");
    assert.deepEqual(ranTwo.value, { n: 2 });
    await uploadVersions(3, 3);
    const task = await sc("/script/run-sync", S); // a task of the newest: version 3
    assert.deepEqual(task.body.data, { n: 3 });
    const taskId = task.headers.get("x-task-id") ?? "";

    await uploadVersions(4, 105);
    // Five had to go: the oldest unpinned ones, 3 to 7.
    assert.deepEqual(await kept(), [...range(8, 105), 2, 1]);
    assert.equal((await kept()).length, LIMIT);
    assert.deepEqual((await runFlow("pinsOne")).value, { n: 1 });

    // pinsTwo re-pins the newest: version 2 is no longer needed, and the next upload removes it.
    await df("/flow/activate", { elementName: "pinsTwo", path: "/kv" });
    await uploadVersions(106, 106);
    assert.deepEqual(await kept(), [...range(8, 106), 1]);

    // A removed version reads as one that never was (28030006), and runs of it are refused.
    for (const [path, body] of [
      ["/script/element/version", { ...S, version: 2 }],
      ["/script/element/version", { ...S, version: 7 }],
      ["/script/run-sync", { ...S, version: 5 }],
      ["/script/run", { ...S, version: 3 }],
    ] as const) {
      const r = await sc(path, body);
      assert.equal(r.body.code, 28030006, `${path} ${JSON.stringify(body)}: ${r.text}`);
    }
    const one = await sc("/script/element/version", { ...S, version: 1 });
    assert.equal(one.body.data.source, source(1));

    // The task's re-run and the flow run's re-run would run a removed version: refused, named.
    const rerunTask = await server.call("POST", `${DF}/run/${taskId}/rerun`, {
      headers: h,
      body: {},
    });
    assert.equal(rerunTask.body.code, 28020007, rerunTask.text);
    assert.match(
      rerunTask.body.message,
      /script s version 3, which it ran, was removed.*LIMIT_VERSIONS_PER_SCRIPT/,
    );
    const rerunFlow = await server.call("POST", `${DF}/run/${ranTwo.runId}/rerun`, {
      headers: h,
      body: {},
    });
    assert.equal(rerunFlow.body.code, 28020007, rerunFlow.text);
    assert.match(
      rerunFlow.body.message,
      /script s version 2, which its node s ran, was removed.*LIMIT_VERSIONS_PER_SCRIPT/,
    );
    // Monitoring of those runs still answers.
    const det = await server.call("GET", `${DF}/monitor/run-detail?runId=${taskId}`, {
      headers: h,
    });
    assert.deepEqual([det.body.code, det.body.data.run.version], [0, "3"], det.text);
  });
});
