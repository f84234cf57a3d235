import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DF } from "../helpers/flows.ts";
import { scopeHeaders, startServer, type TestServer } from "../helpers/server.ts";

/**
 * The names inside a flow graph are bounded (docs/flow-graph.md, "Names and IDs"): a node ID of
 * any length once reached the progress relay (docs/live-progress.md) and every finding, event
 * and log line that names the node. A deploy with one longer than 200 characters is a finding
 * naming its path, and the finding does not echo the long text. In both modes.
 */

const LONG = "n".repeat(201);
const MAX = "m".repeat(200);

describe("identifiers in a flow graph are at most 200 characters", () => {
  let server: TestServer;
  const h = scopeHeaders();
  const deploy = (flow: unknown, configure: unknown = {}) =>
    server.call("POST", `${DF}/flow/deploy`, {
      headers: h,
      body: { elementName: "ids", path: "/ids", revisionName: "r", flow, configure },
    });
  const errors = (r: { body: { data: { severity: number }[] } }) =>
    r.body.data.filter((x) => x.severity === 2) as unknown as {
      errorCode: number;
      nodeId: string;
      path: (string | number)[];
      errorMessage: string;
    }[];

  before(async () => {
    server = await startServer();
  });
  after(() => server.close());

  it("a long node ID is a finding naming flow.vertexes.N.id, and nothing is stored", async () => {
    const r = await deploy({
      vertexes: [
        { id: "in", type: "input" },
        { id: LONG, type: "output" },
      ],
      edges: [{ source: "in", target: LONG }],
    });
    assert.equal(r.body.code, 0, r.text);
    const found = errors(r);
    const byId = found.find((f) => JSON.stringify(f.path) === '["flow","vertexes",1,"id"]');
    assert.ok(byId, r.text.slice(0, 2000));
    assert.equal(byId.errorCode, 28050001);
    assert.match(byId.errorMessage, /200 characters/);
    // The finding names the node by its place, not by the long text.
    for (const f of found) assert.ok(f.nodeId.length <= 200, f.nodeId.slice(0, 50));
    assert.ok(r.text.length < 4000, `the answer repeats the long ID: ${r.text.length} bytes`);
    const [el] = await server.services.store.findElements(h, { type: "DPL", name: "ids" });
    assert.equal(el, undefined);
  });

  it("node names, types, edge IDs and ends, operator IDs and trigger names are bounded the same way", async () => {
    const r = await deploy(
      {
        vertexes: [
          { id: "in", type: "input", name: LONG },
          {
            id: "t",
            type: "transform",
            config: { operators: [{ id: LONG, type: "expr", expr: "1" }] },
          },
          { id: "out", type: "output" },
          { id: "odd", type: LONG },
        ],
        edges: [
          { id: LONG, source: "in", target: "t" },
          { source: "t", target: "out" },
          { source: "in", target: LONG },
        ],
      },
      { triggers: [{ type: "cron", name: LONG, crontab: "0 0 1 1 *" }] },
    );
    assert.equal(r.body.code, 0, r.text);
    const paths = errors(r).map((f) => JSON.stringify(f.path));
    for (const p of [
      '["flow","vertexes",0,"name"]',
      '["flow","vertexes",1,"config","operators",0,"id"]',
      '["flow","vertexes",3,"type"]',
      '["flow","edges",0,"id"]',
      '["flow","edges",2,"target"]',
      '["configure","triggers",0,"name"]',
    ])
      assert.ok(paths.includes(p), `${p} in ${paths.join(" ")}`);
    for (const f of errors(r)) assert.ok(f.nodeId.length <= 200, f.nodeId.slice(0, 50));
  });

  it("200 characters are accepted, and the flow runs", async () => {
    const r = await deploy({
      vertexes: [
        { id: "in", type: "input" },
        { id: MAX, type: "output" },
      ],
      edges: [{ source: "in", target: MAX }],
    });
    assert.equal(r.body.code, 0, r.text);
    assert.deepEqual(errors(r), []);
  });

  it("a flow stored before the bound with a longer node ID is still activated; batch-deploy re-validates it", async () => {
    const scope = { app: h.app, space: h.space };
    const store = server.services.store;
    const folder = await store.ensureFolder(scope, "/old", Date.now());
    const { element } = await store.deployFlow({
      scope,
      folderId: folder.id,
      name: "old-long",
      revisionName: "before the bound",
      flow: {
        vertexes: [
          { id: "in", type: "input" },
          { id: LONG, type: "output" },
        ],
        edges: [{ source: "in", target: LONG }],
      },
      configure: {},
      description: null,
      user: null,
      now: Date.now(),
    });
    const loc = { elementName: "old-long", path: "/old" };
    const on = await server.call("POST", `${DF}/flow/activate`, { headers: h, body: loc });
    assert.deepEqual([on.body.code, on.body.data], [0, "APPROVED"], on.text);
    const off = await server.call("POST", `${DF}/flow/deactivate`, { headers: h, body: loc });
    assert.equal(off.body.data, "OBSOLETE", off.text);
    const batch = await server.call("POST", `${DF}/flow/batch-deploy`, { headers: h, body: [loc] });
    assert.equal(batch.body.data[0].result, "ERROR", batch.text);
    assert.match(batch.body.data[0].message, /no longer validates.*200 characters/);
    const [el] = await store.findElements(scope, { type: "DPL", name: "old-long" });
    assert.equal(el?.id, element.id);
    assert.equal(el?.status, "OBSOLETE");
  });
});
