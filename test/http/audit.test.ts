import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { signToken } from "../../src/auth/tokens.ts";
import { DF, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import {
  OTHER_SCOPE,
  SCOPE,
  scopeHeaders,
  startServer,
  TEST_MODE,
  type TestServer,
  upload,
} from "../helpers/server.ts";

/** docs/audit.md: every change recorded once, with who, when, where, what and the outcome. */

const KEY = randomBytes(32).toString("base64");
const VALUE = `audit-secret-${randomBytes(12).toString("hex")}`;
/** Another scope's value: long and random, so it cannot turn up in IDs or hashes by chance. */
const OTHER_VALUE = `audit-other-${randomBytes(12).toString("hex")}`;
const h = scopeHeaders();
const CRON = { type: "cron", name: "nightly", crontab: "0 3 * * *", parameter: { orders: [] } };

/** A graph with an error: a trigger whose parameter the input schema refuses. */
const BROKEN = {
  revisionName: "r1",
  flow: NO_SCRIPT_FLOW,
  configure: { triggers: [{ ...CRON, parameter: {} }] },
};

// biome-ignore lint/suspicious/noExplicitAny: entries are read as JSON.
type Entry = any;

async function entries(
  server: TestServer,
  query = "",
  headers: Record<string, string> = h,
): Promise<Entry[]> {
  const r = await server.call("GET", `${DF}/audit?pageSize=100${query}`, { headers });
  assert.equal(r.body.status, true, r.text);
  return r.body.data.entries;
}

/** The one entry a change made: the newest with this action. */
async function last(server: TestServer, action: string): Promise<Entry> {
  const [e] = await entries(server, `&action=${action}`);
  assert.ok(e, `an entry for ${action}`);
  return e;
}

describe(`audit trail, auth off (${TEST_MODE})`, () => {
  let server: TestServer;
  before(async () => {
    server = await startServer({ SECRETS_KEY: KEY });
  });
  after(() => server.close());

  it("records each kind of change once with who, when, where, what and the outcome", async () => {
    const t0 = Date.now();
    const up = await upload(server, [{ name: "job.py", content: "def main(p):\n    return p\n" }], {
      path: "/jobs",
    });
    assert.equal(up.body.data[0].status, 0, up.text);
    const dep = await server.call("POST", `${DF}/flow/deploy`, {
      headers: h,
      body: {
        elementName: "nightly",
        revisionName: "r1",
        path: "/flows",
        flow: NO_SCRIPT_FLOW,
        configure: { triggers: [CRON] },
      },
    });
    assert.equal(dep.body.status, true, dep.text);
    const loc = { elementName: "nightly", path: "/flows" };
    await server.call("POST", `${DF}/flow/activate`, { headers: h, body: loc });
    await server.call("POST", `${DF}/flow/deactivate`, { headers: h, body: loc });
    const runIds = ["no-such-run"];
    await server.call("POST", `${DF}/run/terminate`, { headers: h, body: { runIds } });
    await server.call("POST", `${DF}/run/delete`, { headers: h, body: { runIds } });
    await server.call("PUT", `${DF}/secret/API_TOKEN`, { headers: h, body: { value: VALUE } });
    await server.call("DELETE", `${DF}/secret/API_TOKEN`, { headers: h });

    const all = await entries(server);
    const actions = all.map((e: Entry) => e.action).reverse();
    assert.deepEqual(actions, [
      "upload",
      "deploy",
      "activate",
      "deactivate",
      "terminate",
      "delete",
      "secret-put",
      "secret-delete",
    ]);
    for (const e of all) {
      assert.equal(e.app, SCOPE.app);
      assert.equal(e.space, SCOPE.space);
      assert.equal(e.user, SCOPE.user);
      assert.match(e.address, /127\.0\.0\.1/);
      assert.ok(e.at >= t0 && e.at <= Date.now(), "when");
      assert.equal(e.outcome, "success");
      assert.equal(e.code, 0);
      assert.equal(e.httpStatus, 200);
      assert.ok(e.durationMs >= 0);
      assert.ok(e.requestId);
    }
    const by = (a: string) => all.find((e: Entry) => e.action === a);
    assert.deepEqual(by("upload").target.files, [{ filePath: "/jobs/job", status: 0 }]);
    assert.equal(by("upload").route, "/script/file/batch-upload");
    assert.equal(by("deploy").target.elementName, "nightly");
    assert.equal(by("deploy").route, `${DF}/flow/deploy`);
    assert.deepEqual(by("terminate").target.runIds, runIds);
    assert.deepEqual(by("delete").target.runIds, runIds);
    assert.deepEqual(by("secret-put").target, { name: "API_TOKEN" });
    assert.equal(by("secret-delete").method, "DELETE");
    assert.equal(by("secret-delete").route, `${DF}/secret/:name`);
    // The cron trigger's schedule went live with the activation and away with the deactivation.
    const line = "nightly 0 3 * * * UTC";
    assert.deepEqual(by("activate").target.schedules, [
      { elementName: "nightly", before: [], after: [line] },
    ]);
    assert.deepEqual(by("deactivate").target.schedules, [
      { elementName: "nightly", before: [line], after: [] },
    ]);
  });

  it("does not audit reads or run starts", async () => {
    const before = (await entries(server)).length;
    await server.call("GET", `${DF}/monitor/flows`, { headers: h });
    await server.call("POST", `${DF}/monitor/runs`, {
      headers: h,
      body: { pageNo: 0, pageSize: 10, elementName: "nightly" },
    });
    await server.call("POST", `${DF}/run`, { headers: h, body: { elementName: "nightly" } });
    assert.equal((await entries(server)).length, before);
  });

  it("records a failed change with its code", async () => {
    const r = await server.call("POST", `${DF}/flow/activate`, {
      headers: h,
      body: { elementName: "no-such-flow" },
    });
    assert.equal(r.body.status, false);
    const e = await last(server, "activate");
    assert.equal(e.outcome, "failure");
    assert.equal(e.code, r.body.code);
    assert.equal(e.target.elementName, "no-such-flow");
    const invalid = await server.call("POST", `${DF}/flow/deploy`, {
      headers: h,
      body: { ...BROKEN, elementName: "broken" },
    });
    assert.equal(invalid.body.data[0].severity, 2, "the graph has an error: nothing deployed");
    const refused = await last(server, "deploy");
    assert.deepEqual([refused.outcome, refused.code], ["failure", invalid.body.data[0].errorCode]);
    const bad = await server.call("POST", `${DF}/flow/deploy`, { headers: h, body: {} });
    assert.equal(bad.body.code, 400);
    const d = await last(server, "deploy");
    assert.deepEqual([d.outcome, d.code, d.httpStatus], ["failure", 400, bad.status]);
    assert.deepEqual(
      (await entries(server, "&outcome=failure")).map((x: Entry) => x.action),
      ["deploy", "deploy", "activate"],
    );
  });

  it("shows a scope only its own entries", async () => {
    const other = scopeHeaders(OTHER_SCOPE);
    await server.call("PUT", `${DF}/secret/OTHER`, {
      headers: other,
      body: { value: OTHER_VALUE },
    });
    const theirs = await entries(server, "", other);
    assert.deepEqual(
      theirs.map((e: Entry) => [e.action, e.user, e.space]),
      [["secret-put", OTHER_SCOPE.user, OTHER_SCOPE.space]],
    );
    assert.ok((await entries(server)).every((e: Entry) => e.space === SCOPE.space));
    assert.equal((await entries(server, `&user=${OTHER_SCOPE.user}`)).length, 0);
  });

  it("filters by time and user, pages, and names a bad filter", async () => {
    const all = await entries(server);
    const mid = all[Math.floor(all.length / 2)];
    const since = await entries(server, `&from=${mid.at}`);
    assert.ok(since.length > 0 && since.every((e: Entry) => e.at >= mid.at));
    const until = await entries(server, `&to=${mid.at}`);
    assert.ok(until.every((e: Entry) => e.at <= mid.at));
    assert.equal((await entries(server, `&user=${SCOPE.user}`)).length, all.length);
    const page = await server.call("GET", `${DF}/audit?pageNo=1&pageSize=2`, { headers: h });
    assert.equal(page.body.data.totalCount, all.length);
    assert.equal(page.body.data.totalPage, Math.ceil(all.length / 2));
    assert.deepEqual(
      page.body.data.entries.map((e: Entry) => e.id),
      all.slice(2, 4).map((e: Entry) => e.id),
    );
    const bad = await server.call("GET", `${DF}/audit?outcome=maybe`, { headers: h });
    assert.equal(bad.body.code, 400);
    assert.match(bad.body.message, /outcome/);
    assert.match(bad.body.message, /success/);
  });

  it("has no way to change or delete an entry", async () => {
    for (const method of ["POST", "PUT", "PATCH", "DELETE"]) {
      const r = await server.call(method, `${DF}/audit`, { headers: h, body: {} });
      assert.equal(r.body.code, 404, `${method} /audit`);
    }
    const [e] = await entries(server);
    const r = await server.call("DELETE", `${DF}/audit/${e.id}`, { headers: h });
    assert.equal(r.body.code, 404);
    const doc = await server.call("GET", "/openapi.json");
    const paths = Object.keys(doc.body.paths).filter((p) => p.includes("/audit"));
    assert.deepEqual(paths, [`${DF}/audit`]);
    assert.deepEqual(Object.keys(doc.body.paths[`${DF}/audit`]), ["get"]);
  });

  it("never stores a secret's value", async () => {
    const rows = await server.services.store.db
      .withTables<{ audit_entries: Record<string, unknown> }>()
      .selectFrom("audit_entries")
      .selectAll()
      .execute();
    assert.ok(rows.some((r) => r.action === "secret-put"));
    const dump = JSON.stringify(rows);
    assert.ok(!dump.includes(VALUE), "the secret's value is nowhere in the table");
    assert.ok(!dump.includes(OTHER_VALUE));
  });
});

describe(`audit trail, signature mode (${TEST_MODE})`, () => {
  let server: TestServer;
  const now = () => Math.floor(Date.now() / 1000);
  const token = () => signToken("app-secret", SCOPE, now());
  before(async () => {
    server = await startServer({ AUTH_MODE: "signature", AUTH_APP_SECRETS: "app1=app-secret" });
  });
  after(() => server.close());

  it("records changes with the signed user, and each token's use once a minute", async () => {
    const tok = token();
    const headers = { ...h, token: tok };
    const body = {
      elementName: "signed",
      revisionName: "r1",
      path: "/f",
      flow: NO_SCRIPT_FLOW,
      configure: {},
    };
    await server.call("POST", `${DF}/flow/deploy`, { headers, body });
    await server.call("POST", `${DF}/flow/activate`, { headers, body: { elementName: "signed" } });
    await server.call("GET", `${DF}/monitor/flows`, { headers });
    const all = await entries(server, "", headers);
    assert.deepEqual(
      all.map((e: Entry) => e.action).reverse(),
      ["token-use", "deploy", "activate"],
      "one token-use entry for the token's three uses",
    );
    const use = all.find((e: Entry) => e.action === "token-use");
    assert.equal(use.outcome, "accepted");
    assert.equal(use.user, SCOPE.user);
    assert.match(use.target.token, /^[0-9a-f]{16}$/);
    assert.ok(!JSON.stringify(all).includes(tok), "the token itself is never kept");
    const deploy = all.find((e: Entry) => e.action === "deploy");
    assert.deepEqual([deploy.user, deploy.outcome, deploy.code], [SCOPE.user, "success", 0]);
  });

  it("records a refused token and the refused change with code 401", async () => {
    const forged = `${now()}.${"0".repeat(64)}`;
    const r = await server.call("POST", `${DF}/run/delete`, {
      headers: { ...h, token: forged },
      body: { runIds: ["r1"] },
    });
    assert.equal(r.body.code, 401);
    const refused = await entries(server, "&outcome=refused", { ...h, token: token() });
    assert.equal(refused.length, 1);
    assert.equal(refused[0].action, "token-use");
    const del = await entries(server, "&action=delete", { ...h, token: token() });
    assert.deepEqual(
      del.map((e: Entry) => [e.outcome, e.code, e.user]),
      [["failure", 401, SCOPE.user]],
    );
  });

  it("keeps refused traffic from one address bounded, however it varies its claims", async () => {
    const n = 40;
    for (let i = 0; i < n; i++) {
      // A fresh forged token and an invented user each time: every request a new limiter key.
      const r = await server.call("POST", `${DF}/flow/activate`, {
        headers: {
          ...h,
          user: `u${i}-${"x".repeat(5000)}`,
          token: `${now()}.${randomBytes(32).toString("hex")}`,
        },
        body: { elementName: "flooded" },
      });
      assert.equal(r.body.code, 401);
    }
    const all = await entries(server, "", { ...h, token: token() });
    const refused = all.filter((e: Entry) => e.code === 401 || e.outcome === "refused");
    assert.ok(refused.length > 0, "refused attempts are recorded");
    assert.ok(refused.length <= 20, `${refused.length} entries for ${n} refused requests`);
    for (const e of refused) assert.ok(e.user.length <= 201, "a claimed user is cut");
  });

  it("answers the listing only with a valid credential", async () => {
    const r = await server.call("GET", `${DF}/audit`, { headers: h });
    assert.equal(r.body.code, 401);
  });
});
