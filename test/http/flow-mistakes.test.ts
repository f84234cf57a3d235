/**
 * The usual mistakes of a flow author, answered so that the author finds the place without the
 * server's logs (docs/flow-graph.md, "Validation results" and "Where a run failed").
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DF, deployAndActivate } from "../helpers/flows.ts";
import { scopeHeaders, startServer, type TestServer, upload } from "../helpers/server.ts";

const SCORE = "def main(p):\n    return {'score': 1}\n";

describe("flow authors' mistakes", () => {
  let server: TestServer;
  const h = scopeHeaders();
  const call = (p: string, body: unknown) => server.call("POST", DF + p, { headers: h, body });
  const findings = async (flow: unknown) => {
    const r = await call("/flow/deploy", {
      elementName: "m",
      revisionName: "r",
      flow,
      configure: {},
    });
    assert.equal(r.body.status, true, r.text);
    return r.body.data as { nodeId: string; errorCode: number; errorMessage: string }[];
  };
  const scriptFlow = (element: Record<string, unknown>) => ({
    vertexes: [
      { id: "in", type: "input" },
      { id: "score", type: "script", config: { element } },
    ],
    edges: [{ source: "in", target: "score" }],
  });
  /** Runs `flow` and answers the run's error message (the summary of a FAILURE). */
  const failure = async (name: string, flow: unknown, parameter: unknown) => {
    await deployAndActivate(server, name, flow);
    const r = await call("/run-sync", { elementName: name, path: "/flows", parameter });
    assert.equal(r.body.code, 28020004, r.text);
    return r.body.message as string;
  };

  before(async () => {
    server = await startServer();
    for (const path of ["/a", "/b"]) {
      const u = await upload(server, [{ name: "score.py", content: SCORE }], { path }, h);
      assert.equal(u.body.data[0].status, 0, u.text);
    }
    const one = await upload(server, [{ name: "alone.py", content: SCORE }], { path: "/a" }, h);
    assert.equal(one.body.data[0].status, 0, one.text);
  });
  after(() => server.close());

  it("a script name held by two folders is not called missing: the finding says to give its path", async () => {
    const [f] = await findings(scriptFlow({ elementName: "score" }));
    assert.equal(f?.errorCode, 28050008);
    assert.equal(f?.nodeId, "score");
    assert.doesNotMatch(f?.errorMessage ?? "", /does not exist/);
    assert.match(f?.errorMessage ?? "", /not unique.*path or folderId/);
    assert.deepEqual(await findings(scriptFlow({ elementName: "score", path: "/b" })), []);
  });

  it("a script looked for in the wrong folder: the finding names the folder", async () => {
    const [f] = await findings(scriptFlow({ elementName: "alone", path: "/b" }));
    assert.equal(f?.errorCode, 28050008);
    assert.match(f?.errorMessage ?? "", /PY element alone does not exist in folder \/b/);
  });

  it("an expression failing on some data names the operator and the field", async () => {
    const msg = await failure(
      "upper",
      {
        vertexes: [
          { id: "in", type: "input" },
          {
            id: "calc",
            type: "transform",
            config: {
              operators: [
                { type: "filter", expr: "true" },
                { id: "m1", type: "map", fields: { a: "1", up: "$uppercase(name)" } },
              ],
            },
          },
        ],
        edges: [{ source: "in", target: "calc" }],
      },
      { name: 5 },
    );
    assert.match(msg, /^calc: operator m1 \(map\), fields\.up: Argument 1 of function "uppercase"/);
  });

  it("an edge condition failing names the edge, not only its source node", async () => {
    const msg = await failure(
      "edgy",
      {
        vertexes: [
          { id: "in", type: "input" },
          { id: "a", type: "transform", config: { operators: [{ type: "expr", expr: "$" }] } },
          { id: "b", type: "output" },
        ],
        edges: [
          { source: "in", target: "a" },
          { source: "a", target: "b", when: '$contains(name, "x")' },
        ],
      },
      { name: 5 },
    );
    assert.match(msg, /^a: edge a->b, when: Argument 1 of function "contains"/);
  });

  it("an http template failing names the field of the node's config", async () => {
    const http = (config: Record<string, unknown>) => ({
      vertexes: [
        { id: "in", type: "input" },
        { id: "h", type: "http", config: { url: "http://127.0.0.1:9/x", ...config } },
      ],
      edges: [{ source: "in", target: "h" }],
    });
    const body = await failure(
      "tbody",
      http({ method: "POST", body: { v: { w: ["{{$uppercase(n)}}"] } } }),
      { n: 5 },
    );
    assert.match(body, /^h: body\.v\.w\.0: Argument 1 of function "uppercase"/);
    const url = await failure("turl", http({ url: "http://127.0.0.1:9/{{$uppercase(n)}}" }), {
      n: 5,
    });
    assert.match(url, /^h: url: Argument 1 of function "uppercase"/);
    const header = await failure("thead", http({ headers: { "x-n": "{{$uppercase(n)}}" } }), {
      n: 5,
    });
    assert.match(header, /^h: headers\.x-n: Argument 1 of function "uppercase"/);
  });
});
