import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { gzipSync } from "node:zlib";
import { dto, JSON_CLIENTS, type Param, QUERY_CLIENTS, sendJson } from "../helpers/clients.ts";
import { scopeHeaders, startServer, type TestServer, upload } from "../helpers/server.ts";

/**
 * Endpoints 15–20 (external and internal run and run-sync, result, lifespan) as every client
 * writes them (docs/errors.md, "How fields are read"). Scope headers are always sent.
 */
describe("script requests from every client", () => {
  let server: TestServer;
  const h = scopeHeaders();
  // A free-form parameter keeps its own nulls: only declared fields are read as absent.
  const PARAM = { id: 7, note: null, text: "订单 <&>", nested: { x: null } };
  const EXT = "/script/external/echo";
  const call = (method: string, p: string, body?: unknown, headers: Record<string, string> = h) =>
    server.call(method, p, { headers, body });
  const extQuery = (extra: Record<string, Param> = {}): Record<string, Param> => ({
    path: "/scripts",
    folderId: undefined,
    taskName: undefined,
    elementType: undefined,
    timeout: 30,
    terminateOnTimeout: false,
    compressedFlag: false,
    ...extra,
  });
  const internal = (extra: Record<string, unknown>, unset: string[]) =>
    dto({ elementName: "echo" }, { path: "/scripts", parameter: PARAM, ...extra }, [
      "elementType",
      "folderId",
      ...unset,
    ]);

  before(async () => {
    server = await startServer();
    const up = await upload(
      server,
      [{ name: "echo.py", content: "def main(p):\n    return p\n" }],
      {
        path: "/scripts",
      },
    );
    assert.equal(up.body.data[0].status, 0, up.text);
  });
  after(() => server.close());

  it("external run-sync: the query of every client, the body of every client", async () => {
    for (const q of QUERY_CLIENTS) {
      for (const query of [
        extQuery(),
        extQuery({ timeout: undefined, terminateOnTimeout: undefined }),
      ]) {
        const r = await call("POST", `${EXT}/run-sync?${q.render(query)}`, PARAM);
        assert.equal(r.headers.get("x-task-status"), "SUCCESS", `${q.name}: ${r.text}`);
        assert.deepEqual(r.body, PARAM, `${q.name} ${q.render(query)}: ${r.text}`);
      }
    }
    for (const c of JSON_CLIENTS) {
      const r = await sendJson(server, c, "POST", `${EXT}/run-sync?path=/scripts`, PARAM);
      assert.deepEqual(r.body, PARAM, `${c.name}: ${r.text}`);
    }
  });

  it("external run-sync: compressedFlag as every client writes true", async () => {
    const packed = gzipSync(Buffer.from(JSON.stringify(PARAM))).toString("base64");
    for (const q of QUERY_CLIENTS) {
      const query = q.render(extQuery({ compressedFlag: true }));
      const r = await call("POST", `${EXT}/run-sync?${query}`, packed);
      assert.deepEqual(r.body, PARAM, `${q.name} ${query}: ${r.text}`);
    }
  });

  it("external run, then result and lifespan with every client's query", async () => {
    for (const q of QUERY_CLIENTS) {
      const query = q.render(extQuery({ taskName: "forms-task" }));
      const started = await call("POST", `${EXT}/run?${query}`, PARAM);
      assert.equal(started.body.status, true, `${q.name}: ${started.text}`);
      const id = started.body.data;
      const result = await call("GET", `/script/script/result/${id}?${q.render({ timeout: 30 })}`);
      assert.deepEqual(result.body.data, PARAM, `${q.name}: ${result.text}`);
      // The task has ended: no timeout (left out, empty or a bare name) reads it at once.
      const life = await call(
        "GET",
        `/script/script/lifespan/${id}?${q.render({ timeout: undefined })}`,
      );
      assert.equal(life.body.data?.success, true, `${q.name}: ${life.text}`);
      assert.deepEqual(life.body.data.retval, PARAM);
      const run = await call("GET", `/dataflow-3-0/monitor/run?runId=${id}`);
      assert.equal(run.body.data?.runName, "forms-task", run.text);
    }
  });

  it("internal run-sync: unset fields as null or left out, the same return value", async () => {
    for (const c of JSON_CLIENTS) {
      for (const body of [
        internal({}, ["timeout", "terminateOnTimeout"]),
        internal({ timeout: 30, terminateOnTimeout: false }, []),
      ]) {
        const r = await sendJson(server, c, "POST", "/script/script/run-sync", body);
        assert.deepEqual(r.body.data, PARAM, `${c.name} ${c.render(body)}: ${r.text}`);
      }
    }
  });

  it("internal run, then result and lifespan", async () => {
    for (const c of JSON_CLIENTS) {
      const started = await sendJson(server, c, "POST", "/script/script/run", internal({}, []));
      assert.equal(started.body.status, true, `${c.name}: ${started.text}`);
      const result = await call("GET", `/script/script/result/${started.body.data}?timeout=30`);
      assert.deepEqual(result.body.data, PARAM, `${c.name}: ${result.text}`);
      const life = await call("GET", `/script/script/lifespan/${started.body.data}?timeout=`);
      assert.deepEqual(life.body.data?.retval, PARAM, `${c.name}: ${life.text}`);
    }
  });

  it("an empty JSON body on an external run is no body; on an internal run it is missing", async () => {
    const none = await call("POST", `${EXT}/run-sync?path=/scripts`);
    assert.equal(none.headers.get("x-task-status"), "SUCCESS", none.text);
    for (const contentType of ["application/json", "application/json; charset=utf-8"]) {
      const empty = await server.call("POST", `${EXT}/run-sync?path=/scripts`, {
        headers: { ...h, "content-type": contentType },
        raw: "",
      });
      assert.equal(empty.headers.get("x-task-status"), "SUCCESS", empty.text);
      assert.deepEqual(empty.body, none.body);
      const started = await server.call("POST", `${EXT}/run?path=/scripts`, {
        headers: { ...h, "content-type": contentType },
        raw: "",
      });
      assert.equal(started.body.status, true, started.text);
    }
    for (const url of ["/script/script/run", "/script/script/run-sync"]) {
      const r = await server.call("POST", url, {
        headers: { ...h, "content-type": "application/json" },
        raw: "",
      });
      assert.equal(r.body.code, 400, r.text);
      assert.match(r.body.message, /body is required/, r.text);
    }
  });

  it("a value of the wrong JSON type is a 400 naming the field", async () => {
    const base = { elementName: "echo", path: "/scripts", parameter: PARAM };
    const cases: [string, unknown, RegExp][] = [
      ["run-sync", { ...base, elementName: 5 }, /body\.elementName must be string/],
      ["run-sync", { ...base, timeout: "30" }, /body\.timeout must be integer/],
      ["run-sync", { ...base, terminateOnTimeout: 1 }, /body\.terminateOnTimeout must be boolean/],
      [
        "run-sync",
        { ...base, terminateOnTimeout: "on" },
        /body\.terminateOnTimeout must be boolean/,
      ],
      ["run", { ...base, folderId: 3 }, /body\.folderId must be string/],
      ["run", { ...base, elementType: true }, /body\.elementType must be string/],
      ["run", { ...base, path: ["/scripts"] }, /body\.path must be string/],
      ["run", [base], /body must be object/],
    ];
    for (const [url, body, field] of cases) {
      const r = await call("POST", `/script/script/${url}`, body);
      assert.equal(r.body.code, 400, `${url} ${JSON.stringify(body)}: ${r.text}`);
      assert.match(r.body.message, field, r.text);
    }
  });

  it("a query value of the wrong form is a 400 naming it", async () => {
    const cases: [string, RegExp][] = [
      ["timeout=abc", /querystring\.timeout must be integer/],
      ["timeout=-5", /querystring\.timeout must be >= 0/],
      ["compressedFlag=yes", /querystring\.compressedFlag must be true, false, 1 or 0/],
      ["terminateOnTimeout=on", /querystring\.terminateOnTimeout must be true, false, 1 or 0/],
      ["folderId=f1", /folderId and path must not both be given/],
      // A repeated name is a list, not the first or last value.
      ["path=/other", /querystring\.path must be string/],
    ];
    for (const [qs, message] of cases) {
      const r = await call("POST", `${EXT}/run-sync?path=/scripts&${qs}`, PARAM);
      assert.equal(r.body.code, 400, `${qs}: ${r.text}`);
      assert.match(r.body.message, message, r.text);
    }
    const life = await call("GET", "/script/script/lifespan/some-task?timeout=x");
    assert.match(life.body.message, /querystring\.timeout must be integer/, life.text);
  });
});
