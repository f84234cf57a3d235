import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { dto, JSON_CLIENTS, sendJson } from "../helpers/clients.ts";
import { DF, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import { scopeHeaders, startServer, type TestServer } from "../helpers/server.ts";

/**
 * Endpoints 9–13 (deploy, batch-deploy, activate, deactivate, batch-deactivate) as every client
 * writes them (docs/errors.md, "How fields are read"): one element per client, the same outcome.
 */
describe("flow lifecycle requests from every client", () => {
  let server: TestServer;
  const h = scopeHeaders();
  const FOLDER = "/life";
  const LOCATOR_UNSET = ["elementType", "folderId", "elementId"];
  const nameOf = (client: string) => `life-${client}`;
  const locator = (client: string) =>
    dto({ elementName: nameOf(client) }, { path: FOLDER }, LOCATOR_UNSET);
  const call = (method: string, p: string, body?: unknown, headers: Record<string, string> = h) =>
    server.call(method, p, { headers, body });

  before(async () => {
    server = await startServer();
  });
  after(() => server.close());

  it("deploy: the full form reads alike, description text included", async () => {
    const description = { en: "Orders", "zh-cn": "订单 <b>&'+" };
    for (const c of JSON_CLIENTS) {
      const body = dto(
        { elementName: nameOf(c.name), revisionName: "r1" },
        { path: FOLDER, flow: NO_SCRIPT_FLOW, configure: {}, description },
        LOCATOR_UNSET,
      );
      const r = await sendJson(server, c, "POST", `${DF}/flow/deploy`, body);
      assert.equal(r.body.status, true, `${c.name}: ${r.text}`);
      assert.deepEqual(r.body.data, [], `${c.name}: ${r.text}`);
    }
    const zh = await call("GET", `${DF}/monitor/flows`, undefined, { ...h, language: "zh-cn" });
    for (const c of JSON_CLIENTS) {
      const f = zh.body.data.find(
        (x: { element: { elementName: string } }) => x.element.elementName === nameOf(c.name),
      );
      assert.equal(f?.element.description, description["zh-cn"], `${c.name}: ${zh.text}`);
      assert.equal(f?.status, "DRAFT");
    }
  });

  it("deploy: flow and configure unset (null or left out) is the rename form", async () => {
    for (const c of JSON_CLIENTS) {
      const body = dto({ elementName: nameOf(c.name), revisionName: "renamed" }, { path: FOLDER }, [
        ...LOCATOR_UNSET,
        "flow",
        "configure",
        "description",
      ]);
      const r = await sendJson(server, c, "POST", `${DF}/flow/deploy`, body);
      assert.deepEqual(r.body.data, [], `${c.name}: ${r.text}`);
    }
    const flows = await call("GET", `${DF}/monitor/flows`);
    for (const c of JSON_CLIENTS) {
      const f = flows.body.data.find(
        (x: { element: { elementName: string } }) => x.element.elementName === nameOf(c.name),
      );
      assert.deepEqual(f?.revision, { version: "1", name: "renamed" }, c.name);
    }
  });

  it("activate, then deactivate: the same status for every client", async () => {
    for (const c of JSON_CLIENTS) {
      const on = await sendJson(server, c, "POST", `${DF}/flow/activate`, locator(c.name));
      assert.equal(on.body.data, "APPROVED", `${c.name}: ${on.text}`);
      const off = await sendJson(server, c, "POST", `${DF}/flow/deactivate`, locator(c.name));
      assert.equal(off.body.data, "OBSOLETE", `${c.name}: ${off.text}`);
    }
  });

  it("batch-deploy and batch-deactivate: items with null fields read as items without them", async () => {
    const results = (r: { body: { data: { result: string }[] } }) =>
      r.body.data.map((x) => x.result);
    for (const c of JSON_CLIENTS) {
      const items = [locator(c.name), dto({ elementName: "no-such-flow" }, {}, LOCATOR_UNSET)];
      const on = await sendJson(server, c, "POST", `${DF}/flow/batch-deploy`, items);
      assert.deepEqual(results(on), ["OK", "ERROR"], `${c.name}: ${on.text}`);
      assert.equal(on.body.data[0].element.path, FOLDER, on.text);
      const off = await sendJson(server, c, "POST", `${DF}/flow/batch-deactivate`, items);
      assert.deepEqual(results(off), ["OK", "ERROR"], `${c.name}: ${off.text}`);
    }
  });

  it("a value of the wrong JSON type is a 400 naming the field", async () => {
    const full = { elementName: "x", revisionName: "r", flow: NO_SCRIPT_FLOW, configure: {} };
    const cases: [string, unknown, RegExp][] = [
      ["/flow/deploy", { ...full, elementName: 123 }, /body\.elementName must be string/],
      ["/flow/deploy", { ...full, revisionName: false }, /body\.revisionName must be string/],
      ["/flow/deploy", { ...full, flow: "graph" }, /body\.flow must be object/],
      ["/flow/deploy", { ...full, description: "Orders" }, /body\.description must be object/],
      ["/flow/deploy", { ...full, path: 5 }, /body\.path must be string/],
      ["/flow/activate", { elementName: ["x"] }, /body\.elementName must be string/],
      ["/flow/deactivate", { elementName: "x", folderId: 7 }, /body\.folderId must be string/],
      ["/flow/activate", { elementName: "x", elementId: true }, /body\.elementId/],
      ["/flow/batch-deploy", { elementName: "x" }, /body must be array/],
      ["/flow/batch-deploy", [{ elementName: 1 }], /body\.0\.elementName must be string/],
      ["/flow/batch-deactivate", "x", /body must be array/],
    ];
    for (const [url, body, field] of cases) {
      const r = await call("POST", `${DF}${url}`, body);
      assert.equal(r.body.code, 400, `${url} ${JSON.stringify(body)}: ${r.text}`);
      assert.match(r.body.message, field, r.text);
    }
  });

  it("a required field sent as null is a 400 naming it", async () => {
    const r = await call("POST", `${DF}/flow/deploy`, {
      elementName: "x",
      revisionName: null,
      path: FOLDER,
    });
    assert.equal(r.body.code, 400, r.text);
    assert.match(r.body.message, /body\.revisionName is required/);
    const items = await call("POST", `${DF}/flow/batch-deploy`, [{ elementName: null }]);
    assert.match(items.body.message, /body\.0\.elementName is required/, items.text);
  });

  it("an empty JSON body where one is required is the 400 for a missing body", async () => {
    for (const url of [
      "/flow/deploy",
      "/flow/batch-deploy",
      "/flow/activate",
      "/flow/deactivate",
      "/flow/batch-deactivate",
    ]) {
      const r = await server.call("POST", `${DF}${url}`, {
        headers: { ...h, "content-type": "application/json" },
        raw: "",
      });
      assert.equal(r.body.code, 400, `${url}: ${r.text}`);
      assert.match(r.body.message, /body is required/, `${url}: ${r.text}`);
    }
  });
});
