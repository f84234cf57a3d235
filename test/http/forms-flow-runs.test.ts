import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { dto, JSON_CLIENTS, QUERY_CLIENTS, sendJson } from "../helpers/clients.ts";
import { DF, deployAndActivate, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import { scopeHeaders, startServer, type TestServer } from "../helpers/server.ts";

/**
 * Endpoints 1–5 (run, result, run-sync, terminate, delete) as every client writes them
 * (docs/errors.md, "How fields are read").
 */
describe("flow run requests from every client", () => {
  let server: TestServer;
  const h = scopeHeaders();
  const ORDERS = { orders: [{ amount: 2, qty: 3 }], note: null, text: "订单 <&>" };
  const EXPECTED = [{ amount: 2, qty: 3, total: 6 }];
  const RUN_UNSET = ["elementType", "folderId", "elementId", "parentRunId"];
  const call = (method: string, p: string, body?: unknown) =>
    server.call(method, p, { headers: h, body });
  const runBody = (extra: Record<string, unknown> = {}, unset: string[] = []) =>
    dto({ elementName: "runs" }, { path: "/runs", parameter: ORDERS, ...extra }, [
      ...RUN_UNSET,
      ...unset,
    ]);
  /** A finished run of the flow, for the endpoints that read or delete runs. */
  const finishedRun = async (): Promise<string> => {
    const r = await call("POST", `${DF}/run-sync`, {
      elementName: "runs",
      path: "/runs",
      parameter: ORDERS,
    });
    assert.deepEqual(r.body.data, EXPECTED, r.text);
    const id = r.headers.get("x-run-id");
    assert.ok(id);
    return id;
  };

  before(async () => {
    server = await startServer();
    await deployAndActivate(server, "runs", NO_SCRIPT_FLOW, {}, h, "/runs");
  });
  after(() => server.close());

  it("run-sync: unset fields as null or left out, inProcess false left out, give the same result", async () => {
    for (const c of JSON_CLIENTS) {
      for (const body of [
        runBody({}, ["timeout", "inProcess"]),
        runBody({ timeout: 30, inProcess: false }),
      ]) {
        const r = await sendJson(server, c, "POST", `${DF}/run-sync`, body);
        assert.deepEqual(r.body.data, EXPECTED, `${c.name} ${c.render(body)}: ${r.text}`);
      }
    }
  });

  it("run: every client starts a run whose result is the same", async () => {
    for (const c of JSON_CLIENTS) {
      for (const inProcess of [true, false]) {
        const r = await sendJson(server, c, "POST", `${DF}/run`, runBody({ inProcess }));
        assert.equal(r.body.status, true, `${c.name}: ${r.text}`);
        const result = await call("GET", `${DF}/run/${r.body.data}/result?timeout=30`);
        assert.deepEqual(result.body.data, EXPECTED, `${c.name}: ${result.text}`);
      }
    }
  });

  it("result: the query as every client writes it, with and without a timeout", async () => {
    const id = await finishedRun();
    for (const q of QUERY_CLIENTS) {
      for (const timeout of [undefined, 30]) {
        const r = await call("GET", `${DF}/run/${id}/result?${q.render({ timeout })}`);
        assert.deepEqual(r.body.data, EXPECTED, `${q.name} ${q.render({ timeout })}: ${r.text}`);
      }
    }
  });

  it("terminate and delete: the same map for every client", async () => {
    for (const c of JSON_CLIENTS) {
      const id = await finishedRun();
      const body = dto({ runIds: [id, "no-such-run"] });
      const t = await sendJson(server, c, "POST", `${DF}/run/terminate`, body);
      assert.deepEqual(t.body.data, { [id]: false, "no-such-run": false }, `${c.name}: ${t.text}`);
      const d = await sendJson(server, c, "POST", `${DF}/run/delete`, body);
      assert.deepEqual(d.body.data, { [id]: true, "no-such-run": false }, `${c.name}: ${d.text}`);
      const empty = await sendJson(server, c, "POST", `${DF}/run/delete`, dto({ runIds: [] }));
      assert.deepEqual(empty.body.data, {}, `${c.name}: ${empty.text}`);
    }
  });

  it("runIds sent as null (a Go nil slice without omitempty) is a 400 naming it", async () => {
    for (const url of ["/run/terminate", "/run/delete"]) {
      const r = await call("POST", `${DF}${url}`, { runIds: null });
      assert.equal(r.body.code, 400, r.text);
      assert.match(r.body.message, /body\.runIds is required/, r.text);
    }
  });

  it("a value of the wrong JSON type is a 400 naming the field", async () => {
    const base = { elementName: "runs", path: "/runs", parameter: ORDERS };
    const cases: [string, unknown, RegExp][] = [
      ["/run", { ...base, inProcess: 1 }, /body\.inProcess must be boolean/],
      ["/run", { ...base, inProcess: "yes" }, /body\.inProcess must be boolean/],
      ["/run", { ...base, elementType: 5 }, /body\.elementType must be string/],
      ["/run", { ...base, folderId: ["f"] }, /body\.folderId must be string/],
      ["/run", { ...base, elementId: false }, /body\.elementId/],
      ["/run-sync", { ...base, timeout: "30" }, /body\.timeout must be integer/],
      ["/run-sync", { ...base, timeout: 1.5 }, /body\.timeout must be integer/],
      ["/run-sync", { ...base, timeout: -1 }, /body\.timeout must be >= 0/],
      ["/run-sync", { ...base, elementName: 7 }, /body\.elementName must be string/],
      ["/run-sync", { ...base, path: { p: 1 } }, /body\.path must be string/],
      ["/run/terminate", { runIds: "abc" }, /body\.runIds must be array/],
      ["/run/delete", { runIds: [1] }, /body\.runIds\.0 must be string/],
      ["/run/delete", [], /body must be object/],
    ];
    for (const [url, body, field] of cases) {
      const r = await call("POST", `${DF}${url}`, body);
      assert.equal(r.body.code, 400, `${url} ${JSON.stringify(body)}: ${r.text}`);
      assert.match(r.body.message, field, r.text);
    }
  });

  it("a query value that is not an integer is a 400 naming it", async () => {
    const id = await finishedRun();
    // Python's str(30.0): read as the JSON number it spells, like 30.0 in a body.
    for (const t of ["30.0", "3e1", " 30 "]) {
      const r = await call("GET", `${DF}/run/${id}/result?timeout=${encodeURIComponent(t)}`);
      assert.deepEqual(r.body.data, EXPECTED, `${t}: ${r.text}`);
    }
    for (const t of ["abc", "1.5", "-1", "true"]) {
      const r = await call("GET", `${DF}/run/${id}/result?timeout=${t}`);
      assert.equal(r.body.code, 400, `${t}: ${r.text}`);
      assert.match(r.body.message, /querystring\.timeout must be/, r.text);
    }
  });

  it("an empty JSON body where one is required is the 400 for a missing body", async () => {
    for (const url of ["/run", "/run-sync", "/run/terminate", "/run/delete"]) {
      // No body at all (no content-type either), empty, blank, or the JSON value null.
      for (const raw of [undefined, "", "  \n", "null"]) {
        const r = await server.call("POST", `${DF}${url}`, {
          headers: raw === undefined ? h : { ...h, "content-type": "application/json" },
          ...(raw === undefined ? {} : { raw }),
        });
        assert.equal(r.body.code, 400, `${url}: ${r.text}`);
        assert.match(
          r.body.message,
          /body is required/,
          `${url} ${JSON.stringify(raw)}: ${r.text}`,
        );
      }
    }
  });

  it("a body that is not JSON says why; a prototype key is refused by name", async () => {
    const cases: [string, RegExp][] = [
      ['{"elementName": "runs",}', /^invalid request: body is not valid JSON: .*position/],
      ["{'elementName': 'runs'}", /^invalid request: body is not valid JSON: .*position/],
      [
        '{"__proto__": {"x": 1}}',
        /body is not valid JSON: a __proto__ or constructor\.prototype key/,
      ],
    ];
    for (const [raw, message] of cases) {
      const r = await server.call("POST", `${DF}/run-sync`, {
        headers: { ...h, "content-type": "application/json" },
        raw,
      });
      assert.equal(r.body.code, 400, r.text);
      assert.match(r.body.message, message, r.text);
    }
  });

  it("curl -d without a content type (x-www-form-urlencoded) is a 400 saying what is read", async () => {
    const r = await server.call("POST", `${DF}/run-sync`, {
      headers: { ...h, "content-type": "application/x-www-form-urlencoded" },
      raw: JSON.stringify({ elementName: "runs", path: "/runs", parameter: ORDERS }),
    });
    assert.equal(r.body.code, 400, r.text);
    assert.match(
      r.body.message,
      /unsupported content type "application\/x-www-form-urlencoded"; bodies are application\/json/,
    );
  });

  it("a UTF-8 byte order mark before the JSON text (.NET's StreamWriter) is ignored", async () => {
    const r = await server.call("POST", `${DF}/run-sync`, {
      headers: { ...h, "content-type": "application/json; charset=utf-8" },
      raw: `\uFEFF${JSON.stringify({ elementName: "runs", path: "/runs", parameter: ORDERS })}`,
    });
    assert.deepEqual(r.body.data, EXPECTED, r.text);
  });

  it("a GET sent with Content-Type: application/json and an empty body reads as without", async () => {
    const id = await finishedRun();
    const r = await server.call("GET", `${DF}/run/${id}/result`, {
      headers: { ...h, "content-type": "application/json" },
    });
    assert.deepEqual(r.body.data, EXPECTED, r.text);
  });
});
