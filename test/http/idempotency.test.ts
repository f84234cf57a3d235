import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import fc from "fast-check";
import { DF, deployAndActivate, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import { rawRequest } from "../helpers/raw-http.ts";
import {
  OTHER_SCOPE,
  scopeHeaders,
  startServer,
  type TestServer,
  upload,
} from "../helpers/server.ts";

/** `Idempotency-Key` on the start endpoints (docs/idempotency.md), in both modes. */

const ORDERS = { orders: [{ amount: 2, qty: 3 }] };
const RESULT = [{ amount: 2, qty: 3, total: 6 }];
const h = scopeHeaders();
let seq = 0;
/** A key no other test uses. */
const newKey = (what: string) => `${what}-${process.pid}-${++seq}`;

describe("idempotent starts", () => {
  let server: TestServer;
  const post = (p: string, body: unknown, key?: string, headers: Record<string, string> = h) =>
    server.call("POST", p, {
      headers: key === undefined ? headers : { ...headers, "idempotency-key": key },
      body,
    });
  /** Runs of one element in the store, as monitoring counts them. */
  const count = async (elementName: string, headers: Record<string, string> = h) => {
    const r = await server.call("POST", `${DF}/monitor/runs`, {
      headers,
      body: {
        pageNo: 0,
        pageSize: 10,
        elementName,
        elementType: elementName === "echo" ? "PY" : "DPL",
      },
    });
    assert.equal(r.body.status, true, r.text);
    return r.body.data.totalCount as number;
  };

  before(async () => {
    server = await startServer();
    await deployAndActivate(server, "plain", NO_SCRIPT_FLOW);
    await deployAndActivate(server, "plain", NO_SCRIPT_FLOW, {}, scopeHeaders(OTHER_SCOPE));
    const up = await upload(
      server,
      [{ name: "echo.py", content: "def main(p):\n    return p\n" }],
      {
        path: "/s",
      },
    );
    assert.equal(up.body.status, true, up.text);
  });
  after(() => server?.close());

  it("POST /run twice with one key starts one run and answers its ID both times", async () => {
    const before = await count("plain");
    const key = newKey("run");
    const body = { elementName: "plain", parameter: ORDERS };
    const a = await post(`${DF}/run`, body, key);
    assert.equal(a.body.status, true, a.text);
    const b = await post(`${DF}/run`, body, key);
    assert.deepEqual(b.body, a.body);
    assert.equal(b.headers.get("x-run-id"), a.body.data);
    assert.equal(await count("plain"), before + 1);
    // Without a key every call starts a run, as before.
    await post(`${DF}/run`, body);
    await post(`${DF}/run`, body);
    assert.equal(await count("plain"), before + 3);
  });

  it("the same request written another way (key order, null for absent) is the same request", async () => {
    const before = await count("plain");
    const key = newKey("order");
    const a = await post(
      `${DF}/run`,
      { elementName: "plain", parameter: { orders: [], x: 1 } },
      key,
    );
    const b = await post(
      `${DF}/run`,
      { parameter: { x: 1, orders: [] }, folderId: null, elementName: "plain" },
      key,
    );
    assert.equal(b.body.data, a.body.data);
    assert.equal(await count("plain"), before + 1);
  });

  it("the same key with a different request is a 400 naming the header and starts nothing", async () => {
    const key = newKey("diff");
    const a = await post(`${DF}/run`, { elementName: "plain", parameter: ORDERS }, key);
    assert.equal(a.body.status, true, a.text);
    const before = await count("plain");
    for (const body of [
      { elementName: "plain", parameter: { orders: [] } },
      { elementName: "plain", parameter: ORDERS, inProcess: true },
    ]) {
      const b = await post(`${DF}/run`, body, key);
      assert.equal(b.body.code, 400, b.text);
      assert.match(b.body.message, /Idempotency-Key/);
      assert.equal(b.body.data, null);
    }
    // Another user under the same scope and key is another request too.
    const other = await post(`${DF}/run`, { elementName: "plain", parameter: ORDERS }, key, {
      ...h,
      user: "mallory",
    });
    assert.equal(other.body.code, 400, other.text);
    assert.equal(await count("plain"), before);
  });

  it("another scope or another endpoint with the same key is independent", async () => {
    const key = newKey("scope");
    const body = { elementName: "plain", parameter: ORDERS };
    const mine = await post(`${DF}/run`, body, key);
    const theirs = await post(`${DF}/run`, body, key, scopeHeaders(OTHER_SCOPE));
    assert.equal(theirs.body.status, true, theirs.text);
    assert.notEqual(theirs.body.data, mine.body.data);
    const sync = await post(`${DF}/run-sync`, body, key);
    assert.deepEqual(sync.body.data, RESULT);
    assert.notEqual(sync.headers.get("x-run-id"), mine.body.data);
    // Each scope still sees only its own run: the other scope's ID is unknown here.
    const look = await server.call("GET", `${DF}/run/${theirs.body.data}/result`, { headers: h });
    assert.equal(look.body.code, 28020002);
  });

  it("concurrent duplicates start one run: POST /run and POST /run-sync", async () => {
    for (const endpoint of ["/run", "/run-sync"]) {
      const before = await count("plain");
      const key = newKey(`race${endpoint}`);
      const body = { elementName: "plain", parameter: ORDERS };
      const answers = await Promise.all(
        Array.from({ length: 6 }, () => post(`${DF}${endpoint}`, body, key)),
      );
      const ids = new Set(answers.map((a) => a.headers.get("x-run-id")));
      assert.equal(ids.size, 1, `one run ID: ${[...ids].join(", ")}`);
      for (const a of answers) {
        assert.equal(a.body.status, true, a.text);
        if (endpoint === "/run-sync") assert.deepEqual(a.body.data, RESULT);
      }
      assert.equal(await count("plain"), before + 1, endpoint);
    }
  });

  it("a run-sync retried after it ended answers the same run and result", async () => {
    const key = newKey("sync");
    const body = { elementName: "plain", parameter: ORDERS };
    const a = await post(`${DF}/run-sync`, body, key);
    const b = await post(`${DF}/run-sync`, { ...body, timeout: 5 }, key);
    assert.deepEqual(b.body, a.body);
    assert.equal(b.headers.get("x-run-id"), a.headers.get("x-run-id"));
  });

  it("a start that was refused leaves the key free: the retry starts the run once it can", async () => {
    const key = newKey("refused");
    const body = { elementName: "later", parameter: ORDERS };
    const refused = await post(`${DF}/run`, body, key);
    assert.equal(refused.body.code, 28010001, refused.text);
    await deployAndActivate(server, "later", NO_SCRIPT_FLOW);
    const a = await post(`${DF}/run`, body, key);
    assert.equal(a.body.status, true, a.text);
    assert.equal((await post(`${DF}/run`, body, key)).body.data, a.body.data);
    assert.equal(await count("later"), 1);
  });

  it("a retry of a deleted run: POST /run answers its ID, POST /run-sync that it does not exist", async () => {
    const body = { elementName: "plain", parameter: ORDERS };
    const syncKey = newKey("deleted-sync");
    const first = await post(`${DF}/run-sync`, body, syncKey);
    const runId = first.headers.get("x-run-id");
    const del = await post(`${DF}/run/delete`, { runIds: [runId] });
    assert.deepEqual(del.body.data, { [runId as string]: true });
    const again = await post(`${DF}/run-sync`, body, syncKey);
    assert.equal(again.body.code, 28020002, again.text);
    assert.equal(again.headers.get("x-run-id"), runId);

    const asyncKey = newKey("deleted-async");
    const started = (await post(`${DF}/run`, body, asyncKey)).body.data;
    const ended = await server.call("GET", `${DF}/run/${started}/result?timeout=10`, {
      headers: h,
    });
    assert.deepEqual(ended.body.data, RESULT);
    await post(`${DF}/run/delete`, { runIds: [started] });
    const retried = await post(`${DF}/run`, body, asyncKey);
    assert.equal(retried.body.data, started);
  });

  it("script endpoints: external and internal run and run-sync answer the first task", async () => {
    const routes: [string, unknown][] = [
      ["/script/external/echo/run?path=/s", { n: 1 }],
      ["/script/external/echo/run-sync?path=/s", { n: 2 }],
      ["/script/script/run", { elementName: "echo", path: "/s", parameter: { n: 3 } }],
      ["/script/script/run-sync", { elementName: "echo", path: "/s", parameter: { n: 4 } }],
    ];
    for (const [route, body] of routes) {
      const before = await count("echo");
      const key = newKey("script");
      const [a, b] = await Promise.all([post(route, body, key), post(route, body, key)]);
      assert.equal(a.status, 200);
      const id = a.headers.get("x-task-id");
      assert.ok(id, `${route}: ${a.text}`);
      assert.equal(b.headers.get("x-task-id"), id, route);
      assert.equal(b.text, a.text, route);
      const c = await post(route, body, key);
      assert.equal(c.headers.get("x-task-id"), id, route);
      assert.equal(await count("echo"), before + 1, route);
      const different = route.includes("/external/")
        ? { different: true }
        : { ...(body as object), parameter: { different: true } };
      const other = await post(route, different, key);
      assert.equal(other.body.code, 400, `${route}: ${other.text}`);
      assert.match(other.body.message, /Idempotency-Key/);
    }
  });

  it("a key that is not 1–255 printable ASCII characters is a 400 naming the header; an empty one is no key", async () => {
    const body = { elementName: "plain", parameter: ORDERS };
    for (const key of ["k".repeat(256), "caf\u00e9", "a\tb"]) {
      const r = await rawStart(server, body, Buffer.from(key, "latin1"));
      assert.equal(r.code, 400, `${JSON.stringify(key)}: ${JSON.stringify(r)}`);
      assert.match(r.message, /header Idempotency-Key must be 1 to 255 printable ASCII/);
    }
    assert.equal((await post(`${DF}/run`, body, "k".repeat(255))).body.status, true);
    const before = await count("plain");
    const a = await post(`${DF}/run`, body, "");
    const b = await post(`${DF}/run`, body, "");
    assert.notEqual(a.body.data, b.body.data);
    assert.equal(await count("plain"), before + 2);
  });

  it("the OpenAPI document lists the header on the six start operations only", async () => {
    const doc = (await server.call("GET", "/openapi.json")).body;
    const has = (p: string) =>
      (doc.paths[p].post.parameters as { in: string; name: string }[]).some(
        (x) => x.in === "header" && x.name === "Idempotency-Key",
      );
    for (const p of [
      `${DF}/run`,
      `${DF}/run-sync`,
      "/script/external/{elementName}/run",
      "/script/external/{elementName}/run-sync",
      "/script/script/run",
      "/script/script/run-sync",
    ])
      assert.equal(has(p), true, p);
    assert.equal(has(`${DF}/run/terminate`), false);
  });

  it("fuzzed header values: always an envelope, never a 500; valid keys start once", async () => {
    const bytes = fc.oneof(
      fc.string({ unit: "binary-ascii", maxLength: 300 }),
      fc.string({ unit: "grapheme-ascii", minLength: 1, maxLength: 300 }),
      fc.uint8Array({ maxLength: 64 }).map((u) => Buffer.from(u).toString("latin1")),
    );
    const body = { elementName: "plain", parameter: ORDERS };
    await fc.assert(
      fc.asyncProperty(bytes, async (raw) => {
        // CR and LF end the header line: what follows is framing, not the value.
        const value = raw.replace(/[\r\n]/g, "");
        const r = await rawStart(server, body, Buffer.from(value, "latin1"));
        assert.ok(r.code === 0 || r.code === 400, JSON.stringify(r));
        const key = value.replace(/^[ \t]+|[ \t]+$/g, "");
        const reachesApp = ![...value].some(isControl);
        const valid = /^[\x20-\x7e]{0,255}$/.test(key);
        if (reachesApp)
          assert.equal(r.code === 0, valid, `${JSON.stringify(value)}: ${JSON.stringify(r)}`);
        if (r.code === 0 && key !== "") {
          const again = await rawStart(server, body, Buffer.from(value, "latin1"));
          assert.equal(again.data, r.data, "the same key answers the same run");
        }
      }),
      { numRuns: Number(process.env.FUZZ_RUNS ?? 150) },
    );
    assert.equal((await server.call("GET", "/health")).status, 200);
  });
});

/** POST /run over a raw socket, with the key header's bytes exactly as given. */
async function rawStart(
  server: TestServer,
  body: unknown,
  key: Buffer,
): Promise<{ code: number; message: string; data: unknown }> {
  const port = Number(new URL(server.url).port);
  const json = Buffer.from(JSON.stringify(body));
  const head = Buffer.concat([
    Buffer.from(
      `POST ${DF}/run HTTP/1.1\r\nhost: 127.0.0.1\r\napp: ${h.app}\r\nspace: ${h.space}\r\nuser: ${h.user}\r\ncontent-type: application/json\r\ncontent-length: ${json.length}\r\nidempotency-key: `,
    ),
    key,
    Buffer.from("\r\n\r\n"),
  ]);
  const answer = await rawRequest(port, head.toString("latin1"), json, 10_000);
  assert.equal(answer.status, 200, `status ${answer.status}: ${answer.body.toString()}`);
  return JSON.parse(answer.body.toString("utf8"));
}

describe("idempotency window", () => {
  let server: TestServer;
  /**
   * Moves the key's window `ms` nearer its end: the window passes without waiting for it. By its
   * row, not the service's clock: in a cluster the window is counted by the database's clock.
   */
  const pass = (key: string, ms: number) =>
    server.services.store.db
      .updateTable("idempotency_keys")
      .set((eb) => ({ expires_at: eb("expires_at", "-", ms) }))
      .where("idem_key", "=", key)
      .execute();

  before(async () => {
    server = await startServer({ IDEMPOTENCY_WINDOW_SECONDS: "60" });
    await deployAndActivate(server, "plain", NO_SCRIPT_FLOW);
  });
  after(() => server?.close());

  it("a key answers its run within the window and starts a new run after it", async () => {
    const key = newKey("window");
    const call = (body: unknown) =>
      server.call("POST", `${DF}/run`, { headers: { ...h, "idempotency-key": key }, body });
    const body = { elementName: "plain", parameter: ORDERS };
    const first = (await call(body)).body.data;
    await pass(key, 55_000);
    assert.equal((await call(body)).body.data, first, "still within the window");
    await pass(key, 5_000);
    const second = (await call(body)).body.data;
    assert.equal(typeof second, "string");
    assert.notEqual(second, first, "the window has passed");
    // The new run holds the key for a window of its own; a different request is refused again.
    assert.equal((await call(body)).body.data, second);
    assert.equal((await call({ ...body, parameter: { orders: [] } })).body.code, 400);
  });
});

/** Bytes the HTTP parser refuses in a header value (tab is allowed there). */
function isControl(c: string): boolean {
  const n = c.charCodeAt(0);
  return (n < 0x20 && n !== 0x09) || n === 0x7f;
}
