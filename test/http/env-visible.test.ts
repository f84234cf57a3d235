import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { DF, deployAndActivate } from "../helpers/flows.ts";
import {
  OTHER_SCOPE,
  scopeHeaders,
  startServer,
  type TestServer,
  upload,
} from "../helpers/server.ts";
import { writeWheel } from "../helpers/wheels.ts";

/**
 * The run detail names the environment a script ran in (docs/script-dependencies.md, "Where it
 * is visible"): GET /monitor/run and /monitor/run-detail for a task, run-detail's `scripts` for
 * a flow run's script nodes; always the environment of the version the run recorded.
 */
const WITH_DEPS = `# /// script
# dependencies = ["sluice-helper"]
# ///
import sluice_helper

def main(p=None):
    return sluice_helper.help()
`;
const PLAIN = "def main(p=None):\n    return 'plain'\n";

describe("the run detail names the environment", () => {
  let server: TestServer;
  let wheels: string;
  const h = scopeHeaders();
  const put = async (name: string, content: string, overwrite = false) => {
    const r = await upload(server, [{ name: `${name}.py`, content }], {
      path: "/envvis",
      ...(overwrite ? { overwrite: "true" } : {}),
    });
    assert.equal(r.body.data[0].status, 0, r.text);
  };
  const task = async (name: string) => {
    const r = await server.call("POST", `/script/external/${name}/run-sync`, {
      headers: h,
      body: {},
    });
    assert.equal(r.headers.get("x-task-status"), "SUCCESS", r.text);
    return { id: r.headers.get("x-task-id") ?? "", body: r.body };
  };
  const monitorRun = async (runId: string, headers = h) =>
    (await server.call("GET", `${DF}/monitor/run?runId=${runId}`, { headers })).body;
  const runDetail = async (runId: string) =>
    (await server.call("GET", `${DF}/monitor/run-detail?runId=${runId}`, { headers: h })).body;

  before(async () => {
    wheels = mkdtempSync(path.join(os.tmpdir(), "sluice-wheels-"));
    writeWheel(wheels, {
      name: "sluice-helper",
      version: "2.1",
      files: { "sluice_helper.py": "def help():\n    return 'helped'\n" },
    });
    server = await startServer({ PIP_NO_INDEX: "1", PIP_FIND_LINKS: wheels });
  });
  after(async () => {
    await server.close();
    rmSync(wheels, { recursive: true, force: true });
  });

  it("a task names the environment of the version it ran, even after an overwrite", async () => {
    await put("env_task", WITH_DEPS);
    const v = await server.call("POST", "/script/script/element/version", {
      headers: h,
      body: { elementName: "env_task", path: "/envvis" },
    });
    const hash = v.body.data.env.hash;
    assert.match(hash, /^[0-9a-f]{32}$/);
    const ran = await task("env_task");
    assert.equal(ran.body, "helped");
    const expected = { hash, packages: ["sluice-helper==2.1"] };

    const shown = await monitorRun(ran.id);
    assert.equal(shown.status, true, JSON.stringify(shown));
    assert.deepEqual(shown.data.environment, expected);
    assert.deepEqual((await runDetail(ran.id)).data.environment, expected);

    // Version 2 has no dependencies: the first task still names version 1's environment.
    await put("env_task", PLAIN, true);
    const second = await task("env_task");
    assert.equal(second.body, "plain");
    assert.equal((await monitorRun(second.id)).data.environment, null);
    assert.deepEqual((await monitorRun(ran.id)).data.environment, expected);

    // Another scope's run answers as a missing one, environment and all.
    const other = await monitorRun(ran.id, scopeHeaders(OTHER_SCOPE));
    assert.deepEqual([other.status, other.code, other.data], [false, 28020002, null]);
  });

  it("a flow run's script nodes name theirs; the flow run itself names none", async () => {
    await put("env_node", WITH_DEPS);
    await put("plain_node", PLAIN);
    const node = (id: string, name: string) => ({
      id,
      type: "script",
      config: { element: { elementName: name, path: "/envvis" } },
    });
    const flow = {
      vertexes: [
        { id: "in", type: "input" },
        node("deps", "env_node"),
        node("plain", "plain_node"),
        { id: "out", type: "output" },
      ],
      edges: [
        { source: "in", target: "deps" },
        { source: "deps", target: "plain" },
        { source: "plain", target: "out" },
      ],
    };
    await deployAndActivate(server, "env_flow", flow);
    const r = await server.call("POST", `${DF}/run-sync`, {
      headers: h,
      body: { elementName: "env_flow", parameter: {} },
    });
    assert.equal(r.body.status, true, r.text);
    const runId = r.headers.get("x-run-id") ?? "";
    const d = (await runDetail(runId)).data;
    const envOf = (nodeId: string) =>
      d.scripts.find((s: { nodeId: string }) => s.nodeId === nodeId)?.environment;
    assert.deepEqual(envOf("deps")?.packages, ["sluice-helper==2.1"]);
    assert.match(envOf("deps")?.hash, /^[0-9a-f]{32}$/);
    assert.equal(envOf("plain"), null);
    assert.equal(d.environment, undefined);
    assert.equal("environment" in (await monitorRun(runId)).data, false);
  });
});
