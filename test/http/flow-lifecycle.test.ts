import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DF, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import {
  OTHER_SCOPE,
  scopeHeaders,
  startServer,
  type TestServer,
  upload,
} from "../helpers/server.ts";

describe("flow lifecycle: deploy, activate, deactivate, batches", () => {
  let server: TestServer;
  const h = scopeHeaders();
  const deploy = (body: Record<string, unknown>) =>
    server.call("POST", `${DF}/flow/deploy`, { headers: h, body });
  before(async () => {
    server = await startServer();
  });
  after(() => server.close());

  it("deploys a new flow as DRAFT with version 1, then a second revision keeps its status", async () => {
    const r = await deploy({
      elementName: "orders",
      revisionName: "first",
      path: "/f",
      flow: NO_SCRIPT_FLOW,
      configure: {},
      description: { en: "Orders", "zh-cn": "订单" },
    });
    assert.deepEqual([r.body.status, r.body.data], [true, []]);
    const scope = { app: h.app, space: h.space };
    const [el] = await server.services.store.findElements(scope, { type: "DPL", name: "orders" });
    assert.deepEqual([el?.status, el?.releaseVersion], ["DRAFT", 1]);
    assert.equal(
      (
        await server.call("POST", `${DF}/flow/activate`, {
          headers: h,
          body: { elementName: "orders" },
        })
      ).body.data,
      "APPROVED",
    );
    await deploy({
      elementName: "orders",
      revisionName: "second",
      path: "/f",
      flow: NO_SCRIPT_FLOW,
      configure: {},
    });
    const [again] = await server.services.store.findElements(scope, {
      type: "DPL",
      name: "orders",
    });
    assert.deepEqual([again?.status, again?.releaseVersion], ["APPROVED", 2]);
  });

  it("stores nothing when validation finds an error, and answers the results with paths", async () => {
    const bad = {
      vertexes: [
        { id: "a", type: "input" },
        { id: "b", type: "nope" },
      ],
      edges: [{ source: "a", target: "zz" }],
    };
    const r = await deploy({
      elementName: "broken",
      revisionName: "x",
      path: "/f",
      flow: bad,
      configure: {},
    });
    assert.equal(r.body.status, true);
    const problems = r.body.data as { nodeId: string; severity: number; path: unknown[] }[];
    assert.ok(
      problems.some(
        (p) =>
          p.nodeId === "b" &&
          p.severity === 2 &&
          JSON.stringify(p.path) === '["flow","vertexes",1,"type"]',
      ),
      JSON.stringify(problems),
    );
    const found = await server.services.store.findElements(
      { app: h.app, space: h.space },
      { type: "DPL", name: "broken" },
    );
    assert.equal(found.length, 0);
  });

  it("reports a missing script element and a Python syntax error in inline code", async () => {
    const flow = {
      vertexes: [
        { id: "in", type: "input" },
        {
          id: "s1",
          type: "script",
          config: { element: { elementName: "ghost", path: "/nowhere" } },
        },
        { id: "s2", type: "script", config: { code: "def main(p):\n    return (\n" } },
      ],
      edges: [
        { source: "in", target: "s1" },
        { source: "in", target: "s2" },
      ],
    };
    const r = await deploy({
      elementName: "refs",
      revisionName: "x",
      path: "/f",
      flow,
      configure: {},
    });
    const ids = (r.body.data as { nodeId: string; severity: number }[])
      .filter((p) => p.severity === 2)
      .map((p) => p.nodeId)
      .sort();
    assert.deepEqual(ids, ["s1", "s2"]);
  });

  it("renames the newest revision with the rename form; one of flow/configure alone is 400", async () => {
    const r = await deploy({ elementName: "orders", revisionName: "renamed", path: "/f" });
    assert.deepEqual(r.body.data, []);
    const [el] = await server.services.store.findElements(
      { app: h.app, space: h.space },
      { type: "DPL", name: "orders" },
    );
    assert.equal((await server.services.store.flowRevision(el?.id ?? "", 2))?.name, "renamed");
    assert.equal(
      (await deploy({ elementName: "orders", revisionName: "x", path: "/f", flow: NO_SCRIPT_FLOW }))
        .body.code,
      400,
    );
    assert.equal(
      (await deploy({ elementName: "ghost", revisionName: "x", path: "/f" })).body.code,
      28010001,
    );
  });

  it("moves DRAFT → APPROVED → OBSOLETE → APPROVED; deactivating a DRAFT keeps it", async () => {
    await deploy({
      elementName: "states",
      revisionName: "x",
      path: "/f",
      flow: NO_SCRIPT_FLOW,
      configure: {},
    });
    const act = (p: string) =>
      server.call("POST", `${DF}/flow/${p}`, {
        headers: h,
        body: { elementName: "states", path: "/f" },
      });
    assert.equal((await act("deactivate")).body.data, "DRAFT");
    assert.equal((await act("activate")).body.data, "APPROVED");
    assert.equal((await act("activate")).body.data, "APPROVED");
    assert.equal((await act("deactivate")).body.data, "OBSOLETE");
    assert.equal((await act("deactivate")).body.data, "OBSOLETE");
    assert.equal((await act("activate")).body.data, "APPROVED");
  });

  it("batch-deploy answers OK, SKIP and ERROR per element, independently and in order", async () => {
    await deploy({
      elementName: "b1",
      revisionName: "x",
      path: "/b",
      flow: NO_SCRIPT_FLOW,
      configure: {},
    });
    await upload(server, [{ name: "dep.py", content: "def main(p): return p\n" }], { path: "/b" });
    const usesScript = {
      vertexes: [
        { id: "in", type: "input" },
        { id: "s", type: "script", config: { element: { elementName: "dep", path: "/b" } } },
      ],
      edges: [{ source: "in", target: "s" }],
    };
    await deploy({
      elementName: "b2",
      revisionName: "x",
      path: "/b",
      flow: usesScript,
      configure: {},
    });
    // The referenced script disappears: the release no longer validates.
    await server.services.store.db.deleteFrom("elements").where("name", "=", "dep").execute();
    // Deleted behind Sluice's back (no endpoint deletes a script): embedded mode remembers script
    // lookups until the next upload, so upload something else to make the deletion visible.
    await upload(server, [{ name: "unrelated.py", content: "def main(): pass\n" }], { path: "/c" });
    await server.call("POST", `${DF}/flow/activate`, {
      headers: h,
      body: { elementName: "orders" },
    });
    const r = await server.call("POST", `${DF}/flow/batch-deploy`, {
      headers: h,
      body: [
        { elementName: "b1", path: "/b" },
        { elementName: "orders" },
        { elementName: "missing" },
        { elementName: "b2", path: "/b" },
      ],
    });
    assert.deepEqual(
      r.body.data.map((x: { result: string }) => x.result),
      ["OK", "SKIP", "ERROR", "ERROR"],
    );
    assert.ok(
      r.body.data[0].element.elementId &&
        r.body.data[0].element.folderId &&
        r.body.data[0].element.path === "/b",
    );
    assert.match(r.body.data[3].message, /no longer validates/);
  });

  it("batch-deactivate answers OK for APPROVED, SKIP otherwise, ERROR when missing", async () => {
    const r = await server.call("POST", `${DF}/flow/batch-deactivate`, {
      headers: h,
      body: [
        { elementName: "b1", path: "/b" },
        { elementName: "b1", path: "/b" },
        { elementName: "nope" },
      ],
    });
    assert.deepEqual(
      r.body.data.map((x: { result: string }) => x.result),
      ["OK", "SKIP", "ERROR"],
    );
  });

  it("requires the context headers and a valid body", async () => {
    const noUser = await server.call("POST", `${DF}/flow/activate`, {
      headers: { app: h.app, space: h.space },
      body: { elementName: "orders" },
    });
    assert.deepEqual([noUser.body.code, /user/.test(noUser.body.message)], [400, true]);
    const noName = await server.call("POST", `${DF}/flow/deploy`, {
      headers: h,
      body: { revisionName: "x" },
    });
    assert.deepEqual([noName.body.code, /elementName/.test(noName.body.message)], [400, true]);
    const both = await server.call("POST", `${DF}/flow/activate`, {
      headers: h,
      body: { elementName: "orders", path: "/f", folderId: "x" },
    });
    assert.equal(both.body.code, 400);
  });

  it("another space sees none of it", async () => {
    const r = await server.call("POST", `${DF}/flow/activate`, {
      headers: scopeHeaders(OTHER_SCOPE),
      body: { elementName: "orders" },
    });
    assert.equal(r.body.code, 28010001);
  });
});
