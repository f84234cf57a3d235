import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { gzipSync } from "node:zlib";
import { DF, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import { scopeHeaders, startServer, type TestServer, upload } from "../helpers/server.ts";

/**
 * The same logical request as different client serialisers send it (docs/errors.md, "How fields
 * are read"): Jackson and System.Text.Json write unset fields as null, Go and JavaScript leave
 * them out, browser forms send empty values and booleans as text.
 */
describe("request fields as every client sends them", () => {
  let server: TestServer;
  const h = scopeHeaders();
  const call = (method: string, p: string, body?: unknown) =>
    server.call(method, p, { headers: h, body });
  const ORDERS = { orders: [{ amount: 2, qty: 3 }] };

  before(async () => {
    server = await startServer();
    const deployed = await call("POST", `${DF}/flow/deploy`, {
      elementName: "forms",
      elementId: null,
      folderId: null,
      path: "/forms",
      revisionName: "r1",
      description: null,
      flow: NO_SCRIPT_FLOW,
      configure: {},
    });
    assert.equal(deployed.body.status, true, deployed.text);
    const activated = await call("POST", `${DF}/flow/activate`, {
      elementName: "forms",
      folderId: null,
      path: "/forms",
      elementId: null,
    });
    assert.equal(activated.body.data, "APPROVED", activated.text);
    const up = await upload(
      server,
      [{ name: "echo.py", content: "def main(p):\n    return p\n" }],
      {
        path: "/forms",
      },
    );
    assert.equal(up.body.data[0].status, 0, up.text);
  });
  after(() => server.close());

  it("null optional fields are the fields left out: run-sync answers the same result", async () => {
    const omitted = await call("POST", `${DF}/run-sync`, {
      elementName: "forms",
      path: "/forms",
      parameter: ORDERS,
    });
    const nulls = await call("POST", `${DF}/run-sync`, {
      elementName: "forms",
      path: "/forms",
      folderId: null,
      elementId: null,
      runName: null,
      parentRunId: null,
      timeout: null,
      inProcess: null,
      parameter: ORDERS,
    });
    assert.equal(omitted.body.status, true, omitted.text);
    assert.deepEqual(nulls.body.data, omitted.body.data, nulls.text);
  });

  it("a run-list filter whose unset fields are null lists what the bare filter lists", async () => {
    const bare = await call("POST", `${DF}/monitor/runs`, {
      pageNo: 0,
      pageSize: 10,
      elementName: "forms",
      path: "/forms",
    });
    const jackson = await call("POST", `${DF}/monitor/runs`, {
      pageNo: 0,
      pageSize: 10,
      elementName: "forms",
      path: "/forms",
      folderId: null,
      elementId: null,
      versionFilter: null,
      runStatusFilter: null,
      quickSearch: null,
      colFilters: null,
      orderBy: null,
    });
    assert.equal(bare.body.status, true, bare.text);
    assert.ok(bare.body.data.totalCount >= 1, bare.text);
    assert.equal(jackson.body.data.totalCount, bare.body.data.totalCount, jackson.text);
  });

  it("an explicit null where the field is required is still refused, naming it", async () => {
    const r = await call("POST", `${DF}/run-sync`, { elementName: null, parameter: ORDERS });
    assert.equal(r.body.code, 400, r.text);
    assert.match(r.body.message, /elementName/);
  });

  it("text booleans in a query string: TRUE, 1, false and 0 in any case; anything else names the field", async () => {
    for (const value of ["TRUE", "1", "False", "0", ""]) {
      const r = await call(
        "POST",
        `/script/external/echo/run-sync?path=/forms&terminateOnTimeout=${value}`,
        { a: value },
      );
      assert.deepEqual(r.body, { a: value }, `${value}: ${r.text}`);
    }
    const bad = await call(
      "POST",
      "/script/external/echo/run-sync?path=/forms&terminateOnTimeout=yes",
      { a: 1 },
    );
    assert.equal(bad.body.code, 400, bad.text);
    assert.match(bad.body.message, /terminateOnTimeout must be true, false, 1 or 0/);
  });

  it("an empty query value is the field left out", async () => {
    const r = await call("POST", "/script/external/echo/run-sync?path=/forms&timeout=", { b: 2 });
    assert.deepEqual(r.body, { b: 2 }, r.text);
  });

  it("an empty body sent as application/json is no body", async () => {
    const r = await server.call("POST", "/script/external/echo/run-sync?path=/forms", {
      headers: { ...h, "content-type": "application/json" },
      raw: "",
    });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.headers.get("x-task-status"), "SUCCESS", r.text);
  });

  it("multipart overwrite accepts text booleans in any case and names the field otherwise", async () => {
    const file = { name: "echo.py", content: "def main(p):\n    return [p]\n" };
    const yes = await upload(server, [file], { path: "/forms", overwrite: "True" });
    assert.equal(yes.body.data[0].message, "overwritten", yes.text);
    const bad = await upload(server, [file], { path: "/forms", overwrite: "yes" });
    assert.equal(bad.body.code, 400, bad.text);
    assert.match(bad.body.message, /overwrite must be true, false, 1 or 0/);
  });
  it("a value of the wrong JSON type is a 400 naming the field, never a coerced lookup", async () => {
    const cases: [string, unknown, RegExp][] = [
      [`${DF}/run-sync`, { elementName: 123, parameter: ORDERS }, /elementName/],
      [`${DF}/run/terminate`, { runIds: "abc" }, /runIds/],
      [`${DF}/run/terminate`, { runIds: { a: "b" } }, /runIds/],
      [`${DF}/run/delete`, { runIds: [1, 2] }, /runIds/],
      [`${DF}/monitor/runs`, { pageNo: "0", pageSize: 10, elementName: "forms" }, /pageNo/],
    ];
    for (const [url, body, field] of cases) {
      const r = await call("POST", url, body);
      assert.equal(r.body.code, 400, `${JSON.stringify(body)}: ${r.text}`);
      assert.match(r.body.message, field, r.text);
    }
  });

  it("a boolean sent as text in a JSON body is read like one in a query string", async () => {
    const r = await call("POST", `${DF}/run-sync`, {
      elementName: "forms",
      path: "/forms",
      inProcess: "TRUE",
      parameter: ORDERS,
    });
    assert.equal(r.body.status, true, r.text);
    const bad = await call("POST", `${DF}/run-sync`, {
      elementName: "forms",
      path: "/forms",
      inProcess: "yes",
      parameter: ORDERS,
    });
    assert.equal(bad.body.code, 400, bad.text);
    assert.match(bad.body.message, /inProcess/);
  });
  it("a deactivation leaves lastRelease as the last deploy or activate set it", async () => {
    const carol = scopeHeaders({ app: "app1", space: "space1", user: "carol" });
    const flows = async () =>
      (await call("GET", `${DF}/monitor/flows`)).body.data.find(
        (f: { element: { elementName: string } }) => f.element.elementName === "forms",
      );
    const before = (await flows()).lastRelease;
    assert.equal(before.user.userId, "alice", JSON.stringify(before));
    const off = await server.call("POST", `${DF}/flow/deactivate`, {
      headers: carol,
      body: { elementName: "forms", path: "/forms" },
    });
    assert.equal(off.body.status, true, off.text);
    assert.deepEqual((await flows()).lastRelease, before);
    const on = await server.call("POST", `${DF}/flow/activate`, {
      headers: carol,
      body: { elementName: "forms", path: "/forms" },
    });
    assert.equal(on.body.data, "APPROVED", on.text);
    assert.equal((await flows()).lastRelease.user.userId, "carol");
  });
  it("elementType PY on /run and /run-sync is a 400 saying flows are DPL", async () => {
    for (const url of [`${DF}/run`, `${DF}/run-sync`]) {
      const r = await call("POST", url, { elementName: "echo", elementType: "PY", path: "/forms" });
      assert.equal(r.body.code, 400, r.text);
      assert.match(r.body.message, /elementType must be DPL/);
    }
    const dpl = await call("POST", `${DF}/run-sync`, {
      elementName: "forms",
      elementType: "DPL",
      path: "/forms",
      parameter: ORDERS,
    });
    assert.equal(dpl.body.status, true, dpl.text);
  });
  it("an enum error lists the allowed values, in English and in zh-cn", async () => {
    const body = { pageNo: 0, pageSize: 10, elementName: "forms", runStatusFilter: ["DONE"] };
    const en = await call("POST", `${DF}/monitor/runs`, body);
    assert.equal(en.body.code, 400, en.text);
    assert.match(
      en.body.message,
      /runStatusFilter\.0 must be one of QUEUED, STARTED, SUCCESS, FAILURE, CANCELED/,
    );
    const zh = await server.call("POST", `${DF}/monitor/runs`, {
      headers: { ...h, language: "zh-cn" },
      body,
    });
    assert.equal(zh.body.code, 400, zh.text);
    assert.notEqual(zh.body.message, en.body.message);
    assert.match(
      zh.body.message,
      /runStatusFilter\.0 必须是以下值之一：QUEUED, STARTED, SUCCESS, FAILURE, CANCELED/,
    );
  });
  it("interval colFilters refuse keys they do not read, naming them", async () => {
    const r = await call("POST", `${DF}/monitor/runs`, {
      pageNo: 0,
      pageSize: 10,
      elementName: "forms",
      path: "/forms",
      colFilters: [{ name: "startTime", start: 0, end: 1 }],
    });
    assert.equal(r.body.code, 400, r.text);
    assert.match(r.body.message, /colFilters\[0\]\.start is not allowed for column startTime/);
  });

  it("runs sort by every listed column; runStatus in lifecycle order", async () => {
    await call("POST", `${DF}/flow/deploy`, {
      elementName: "sorts",
      path: "/forms",
      revisionName: "r1",
      flow: {
        vertexes: [
          { id: "in", type: "input" },
          {
            id: "calc",
            type: "transform",
            config: {
              operators: [{ id: "e1", type: "expr", expr: '$params.fail ? $error("no") : "ok"' }],
            },
          },
          { id: "out", type: "output" },
        ],
        edges: [
          { source: "in", target: "calc" },
          { source: "calc", target: "out" },
        ],
      },
      configure: {},
    });
    await call("POST", `${DF}/flow/activate`, { elementName: "sorts", path: "/forms" });
    for (const fail of [false, true, false]) {
      await call("POST", `${DF}/run-sync`, {
        elementName: "sorts",
        path: "/forms",
        parameter: { fail },
      });
    }
    const statuses = async (asc: boolean) =>
      (
        await call("POST", `${DF}/monitor/runs`, {
          pageNo: 0,
          pageSize: 10,
          elementName: "sorts",
          path: "/forms",
          orderBy: [{ name: "runStatus", asc }],
        })
      ).body.data.runs.map((x: { runStatus: string }) => x.runStatus);
    assert.deepEqual(await statuses(true), ["SUCCESS", "SUCCESS", "FAILURE"]);
    assert.deepEqual(await statuses(false), ["FAILURE", "SUCCESS", "SUCCESS"]);
    for (const name of ["runName", "triggerType", "version", "initiator"]) {
      const r = await call("POST", `${DF}/monitor/runs`, {
        pageNo: 0,
        pageSize: 10,
        elementName: "sorts",
        path: "/forms",
        orderBy: [{ name, asc: true }],
      });
      assert.equal(r.body.data?.totalCount, 3, `${name}: ${r.text}`);
    }
  });

  /** A JSON body as text: a JavaScript number cannot spell an integer past 2^53. */
  const rawJson = (method: string, p: string, text: string) =>
    server.call(method, p, { headers: { ...h, "content-type": "application/json" }, raw: text });

  it("an integer past ±(2^53 − 1) in a JSON body is a 400 naming it, never run rounded (Go's int64)", async () => {
    // encoding/json writes an int64 ID as a plain number; JSON.parse would make this ID
    // 1789012345678901200 and the flow would run with another order's ID.
    const cases: [string, string, string][] = [
      [
        `${DF}/run-sync`,
        '{"elementName":"forms","path":"/forms","parameter":{"orders":[{"amount":2,"qty":3,"id":1789012345678901234}]}}',
        "body.parameter.orders.0.id",
      ],
      [
        `${DF}/run`,
        '{"elementName":"forms","path":"/forms","parameter":{"n":-9007199254740992}}',
        "body.parameter.n",
      ],
      [
        "/script/external/echo/run-sync?path=/forms",
        '{"a":{"b":[1,9223372036854775807]}}',
        "body.a.b.1",
      ],
      [
        `${DF}/run-sync`,
        '{"elementName":"forms","path":"/forms","timeout":18446744073709551615}',
        "body.timeout",
      ],
    ];
    for (const [p, text, field] of cases) {
      const r = await rawJson("POST", p, text);
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(r.body, {
        status: false,
        code: 400,
        message: `invalid request: ${field} is an integer beyond ±(2^53 − 1), which would not be kept exactly; send it as a string`,
        data: null,
      });
      assert.equal(r.headers.get("x-run-id"), null, r.text);
      assert.equal(r.headers.get("x-task-id"), null, r.text);
    }
  });

  it("the same integers as strings, safe integers, and numbers with a fraction or exponent reach the script as sent", async () => {
    const text =
      '{"id":"1789012345678901234","max":9007199254740991,"min":-9007199254740991,"f":1.5,"e":1e300,"digits":"12345678901234567890"}';
    const up = await upload(
      server,
      [{ name: "keep.py", content: "def main(p):\n    return p\n" }],
      {
        path: "/forms",
      },
    );
    assert.equal(up.body.data[0].status, 0, up.text);
    const r = await rawJson("POST", "/script/external/keep/run-sync?path=/forms", text);
    assert.equal(r.headers.get("x-task-status"), "SUCCESS", r.text);
    // The script's own value, as Python's json wrote it back (1e300 as 1e+300).
    assert.equal(r.text, text.replace("1e300", "1e+300"));
  });

  it("an integer past 2^53 in a compressedFlag parameter is a 400 naming it", async () => {
    const gz = gzipSync(Buffer.from('{"orders":[{"id":1789012345678901234}]}')).toString("base64");
    const r = await rawJson(
      "POST",
      "/script/external/echo/run-sync?path=/forms&compressedFlag=true",
      JSON.stringify(gz),
    );
    assert.equal(r.body.code, 400, r.text);
    assert.equal(
      r.body.message,
      "invalid request: body.orders.0.id is an integer beyond ±(2^53 − 1), which would not be kept exactly; send it as a string",
    );
  });

  it("a compressedFlag parameter nesting deeper than a body may is a 400, as a body sent as it is", async () => {
    for (const inner of ["12345678901234567890", "1"]) {
      const deep = `${"[".repeat(100_000)}${inner}${"]".repeat(100_000)}`;
      const gz = gzipSync(Buffer.from(deep)).toString("base64");
      const r = await rawJson(
        "POST",
        "/script/external/echo/run-sync?path=/forms&compressedFlag=true",
        JSON.stringify(gz),
      );
      assert.deepEqual(
        [r.status, r.body.code, r.body.message],
        [200, 400, "invalid request: body nests deeper than 512 levels"],
        r.text,
      );
      assert.equal(r.headers.get("x-task-id"), null, r.text);
    }
  });

  it("a script returning an integer past 2^53 fails naming it, never answered rounded", async () => {
    const up = await upload(
      server,
      [
        {
          name: "bigid.py",
          content:
            "def main(p):\n    return {'ok': 2**53 - 1, 'rows': [{'id': 1789012345678901234}]}\n",
        },
      ],
      { path: "/forms" },
    );
    assert.equal(up.body.data[0].status, 0, up.text);
    const r = await rawJson("POST", "/script/external/bigid/run-sync?path=/forms", "{}");
    assert.equal(r.headers.get("x-task-status"), "FAILURE", r.text);
    assert.equal(r.body.code, 28030001, r.text);
    assert.match(
      r.body.message,
      /ValueError: return value\.rows\.0\.id is an integer beyond ±\(2\^53 − 1\), which would not be kept exactly; return it as a string/,
    );
  });
});
