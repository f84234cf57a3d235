import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { signToken } from "../../src/auth/tokens.ts";
import { DF, deployAndActivate } from "../helpers/flows.ts";
import { gatedScript, release } from "../helpers/gate-file.ts";
import {
  OTHER_SCOPE,
  SCOPE,
  scopeHeaders,
  startServer,
  TEST_MODE,
  type TestServer,
  upload,
} from "../helpers/server.ts";
import { openSse } from "../helpers/sse.ts";

/**
 * docs/auth.md: another scope's runs and tasks answer like ones that do not exist. Attacked here
 * on the live paths (docs/security.md, "Attacks the suite performs"), while the owner's run or
 * task still runs: event streams and their HEAD, polls, result waits, run detail, artifacts,
 * re-run, resume, terminate and delete, asked by a caller of another space of the same app and of
 * another app, with headers (AUTH_MODE=off) and with tokens of their own (AUTH_MODE=signature).
 * Each answers as for an ID nobody has, changes nothing of the owner's run, and leaves nothing in
 * the owner's counts or trail.
 */
const OTHER_APP = { app: "app2", space: SCOPE.space, user: "mallory" } as const;
const SP = "/script";
/** A flow of one script node that waits for its gate (test/helpers/gate-file.ts). */
const GATED_FLOW = {
  vertexes: [
    { id: "in", type: "input" },
    {
      id: "wait",
      type: "script",
      config: { code: gatedScript(["print('a-line', flush=True)"], []) },
    },
  ],
  edges: [{ source: "in", target: "wait" }],
};

/** A task's directory is its own (a tmpfs), so no gate reaches it: it waits until terminated. */
const WAITING_TASK = [
  "import time",
  "def main(p):",
  "    print('a-line', flush=True)",
  "    time.sleep(120)",
  "    return p",
].join("\n");

type Scoped = { app: string; space: string; user: string };

for (const auth of ["off", "signature"] as const) {
  describe(`another tenant's running runs and tasks (${TEST_MODE}, AUTH_MODE=${auth})`, () => {
    let server: TestServer;
    const env: Record<string, string> =
      auth === "off"
        ? {}
        : {
            AUTH_MODE: "signature",
            AUTH_APP_SECRETS: "app1=k1,app2=k2",
            AUTH_INTERNAL_SECRET: "ik",
          };
    /** The caller's headers: its scope, and in signature mode a token its own app signed. */
    const at = Math.floor(Date.now() / 1000);
    // One token per caller for the whole test: each distinct token's use is an entry of its own
    // in the caller's trail (docs/audit.md), which the owner's counts below must not gain.
    const as = (s: Scoped, internal = false): Record<string, string> => {
      if (auth === "off") return scopeHeaders(s);
      const secret = internal ? "ik" : s.app === "app1" ? "k1" : "k2";
      return { ...s, token: signToken(secret, s, at) };
    };
    const call = (method: string, p: string, who: Scoped, body?: unknown, internal = false) =>
      server.call(method, p, { headers: as(who, internal), body });
    /**
     * A GET or HEAD that never waits on a stream: an event stream that opened (it should not have)
     * is answered by its headers and closed, so a failing check fails at once.
     */
    const look = async (method: string, p: string, who: Scoped) => {
      const ctl = new AbortController();
      const res = await fetch(server.url + p, { method, headers: as(who), signal: ctl.signal });
      const type = res.headers.get("content-type");
      if (type?.startsWith("text/event-stream")) ctl.abort();
      const text = type?.startsWith("text/event-stream") ? "" : await res.text();
      return {
        status: res.status,
        headers: res.headers,
        text,
        body: text ? JSON.parse(text) : null,
      };
    };

    before(async () => {
      server = await startServer(env);
      await deployAndActivate(server, "gated", GATED_FLOW, {}, as(SCOPE));
      const up = await upload(
        server,
        [{ name: "waits.py", content: WAITING_TASK }],
        { path: "/py" },
        as(SCOPE, true),
      );
      assert.equal(up.body.data[0].status, 0, up.text);
    });
    after(() => server.close());

    /** What the owner can see of its own scope: its flow's counts and its trail's size. */
    const ownerView = async () => {
      const flows = await call("GET", `${DF}/monitor/flows`, SCOPE);
      const list = await call("GET", `${DF}/flow/list`, SCOPE);
      const audit = await call("GET", `${DF}/audit?pageSize=100`, SCOPE);
      return {
        totalRuns: flows.body.data.map((f: { totalRuns: number }) => f.totalRuns),
        inProcess: list.body.data.map((f: { inProcessCount: number }) => f.inProcessCount),
        // The owner's own token, used again in a new clock minute, is a new token-use entry
        // (docs/audit.md): what must not change is every other entry.
        audit: audit.body.data.entries.filter((e: { action: string }) => e.action !== "token-use"),
      };
    };

    /**
     * The caller's answer for `id` is the one it gets for an ID nobody has: same HTTP status,
     * same code, the same message but for the ID, no data, no run or task header.
     */
    const asMissing = async (
      who: Scoped,
      method: string,
      path: (id: string) => string,
      body?: (id: string) => unknown,
      id = "",
    ) => {
      const nobody = `${id.slice(0, -8)}zzzzzzzz`;
      const ask = (x: string) =>
        body ? call(method, path(x), who, body(x)) : look(method, path(x), who);
      const theirs = await ask(id);
      const none = await ask(nobody);
      const where = `${method} ${path(id)} as ${who.app}/${who.space}`;
      assert.equal(theirs.status, none.status, where);
      assert.equal(theirs.headers.get("content-type"), none.headers.get("content-type"), where);
      if (method === "HEAD") return;
      assert.equal(theirs.body.code, none.body.code, `${where}: ${theirs.text}`);
      assert.notEqual(theirs.body.code, 0, `${where}: ${theirs.text}`);
      assert.equal(theirs.body.message.replaceAll(id, nobody), none.body.message, where);
      assert.equal(theirs.body.data, null, where);
      assert.equal(theirs.headers.get("x-run-id"), null, where);
      assert.equal(theirs.headers.get("x-task-id"), null, where);
      assert.ok(!theirs.text.includes("a-line"), where);
    };

    const stopOwn = async (id: string, own: { abort(): void }) => {
      own.abort();
      await call("POST", `${DF}/run/terminate`, SCOPE, { runIds: [id] });
    };

    it("a running flow run: streams, HEAD, polls, waits, detail, terminate and delete answer as for no run", async (t) => {
      const start = await call("POST", `${DF}/run`, SCOPE, {
        elementName: "gated",
        parameter: {},
        inProcess: true,
      });
      const runId = start.body.data as string;
      const own = await openSse(`${server.url}${DF}/run/${runId}/events`, as(SCOPE));
      // A failed check ends the owner's run at once rather than leave it to its gate's minute.
      t.after(() => stopOwn(runId, own));
      await own.next((m) => m.event === "output" && /a-line/.test(m.data.text));
      const seen = await ownerView();
      assert.deepEqual(seen.inProcess, [1]);
      for (const who of [OTHER_SCOPE, OTHER_APP]) {
        for (const method of ["GET", "HEAD"])
          await asMissing(who, method, (id) => `${DF}/run/${id}/events`, undefined, runId);
        for (const p of [
          (id: string) => `${DF}/run/${id}/progress`,
          (id: string) => `${DF}/run/${id}/result?timeout=1`,
          (id: string) => `${DF}/monitor/run?runId=${id}`,
          (id: string) => `${DF}/monitor/run-detail?runId=${id}`,
          (id: string) => `${DF}/run/${id}/artifacts`,
        ])
          await asMissing(who, "GET", p, undefined, runId);
        for (const kind of ["rerun", "resume"])
          await asMissing(
            who,
            "POST",
            (id) => `${DF}/run/${id}/${kind}`,
            () => ({}),
            runId,
          );
        for (const op of ["terminate", "delete"]) {
          const r = await call("POST", `${DF}/run/${op}`, who, { runIds: [runId] });
          assert.deepEqual(r.body.data, { [runId]: false }, r.text);
        }
      }
      // The owner's run went on untouched, and its counts and trail are what they were.
      assert.deepEqual(await ownerView(), seen);
      const mid = await call("GET", `${DF}/run/${runId}/progress`, SCOPE);
      assert.equal(mid.body.data.runStatus, "STARTED", mid.text);
      await release(server.dataDir, runId);
      const done = await call("GET", `${DF}/run/${runId}/result?timeout=60`, SCOPE);
      assert.equal(done.body.code, 0, done.text);
      await own.closed;
      assert.equal(own.messages.at(-1)?.data.runStatus, "SUCCESS");
    });

    it("a running script task: its stream, poll, result and lifespan answer as for no task", async (t) => {
      const start = await call(
        "POST",
        `${SP}/script/run`,
        SCOPE,
        { elementName: "waits", parameter: {} },
        true,
      );
      const taskId = start.body.data as string;
      assert.equal(start.body.code, 0, start.text);
      const own = await openSse(`${server.url}${SP}/script/events/${taskId}`, as(SCOPE));
      t.after(() => stopOwn(taskId, own));
      await own.next((m) => m.event === "output" && /a-line/.test(m.data.text));
      for (const who of [OTHER_SCOPE, OTHER_APP]) {
        for (const method of ["GET", "HEAD"])
          await asMissing(who, method, (id) => `${SP}/script/events/${id}`, undefined, taskId);
        for (const p of [
          (id: string) => `${SP}/script/progress/${id}`,
          (id: string) => `${SP}/script/result/${id}?timeout=1`,
          (id: string) => `${SP}/script/lifespan/${id}`,
        ])
          await asMissing(who, "GET", p, undefined, taskId);
        const r = await call("POST", `${DF}/run/terminate`, who, { runIds: [taskId] });
        assert.deepEqual(r.body.data, { [taskId]: false }, r.text);
      }
      // Still running, and the owner's own terminate is what ends it.
      const mid = await call("GET", `${SP}/script/progress/${taskId}`, SCOPE);
      assert.equal(mid.body.data.runStatus, "STARTED", mid.text);
      const stop = await call("POST", `${DF}/run/terminate`, SCOPE, { runIds: [taskId] });
      assert.deepEqual(stop.body.data, { [taskId]: true }, stop.text);
      await own.closed;
      assert.equal(own.messages.at(-1)?.data.runStatus, "CANCELED");
    });
  });
}
