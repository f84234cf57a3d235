import assert from "node:assert/strict";
import { existsSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { scopeHeaders, startServer, type TestServer, upload } from "../helpers/server.ts";

const PROBE = `
import os, socket

def attempt(fn):
    try:
        fn()
        return "read"
    except Exception as e:
        return type(e).__name__

def main(p):
    out = {"uid": os.getuid()}
    out["env"] = sorted(k for k in os.environ if "SECRET" in k or k.startswith("AUTH"))
    for key, file in p["files"].items():
        out[key] = attempt(lambda: open(file, "rb").read(1))
    s = socket.socket()
    s.settimeout(1)
    try:
        s.connect(("127.0.0.1", p["port"]))
        out["net"] = "connected"
    except Exception as e:
        out["net"] = type(e).__name__
    return out
`;

describe("scripts cannot reach the service (through the real service)", () => {
  let server: TestServer;
  before(async () => {
    server = await startServer({
      AUTH_APP_SECRETS: "app1=topsecret",
      AUTH_INTERNAL_SECRET: "internal-secret",
      AUTH_SESSION_SECRET: "sess",
    });
    const r = await upload(
      server,
      [{ name: "probe.py", content: PROBE }],
      { path: "/" },
      { ...scopeHeaders() },
    );
    assert.equal(r.body.data[0].status, 0);
  });
  after(() => server.close());

  it("sees no secrets, no database, no config or sources, no service environ, no network", {
    skip: process.getuid?.() !== 0 && "the uid drop needs root",
  }, async () => {
    // The SQLite database in embedded mode; a stand-in secret file beside it in both modes.
    const db = path.join(server.dataDir, "sluice.db");
    const secret = path.join(server.dataDir, "service-secret.txt");
    writeFileSync(secret, "do not read");
    const files = {
      ...(existsSync(db) ? { db } : {}),
      secret,
      config: path.resolve("src/config.ts"),
      environ: `/proc/${process.pid}/environ`,
      shadow: "/etc/shadow",
    };
    const r = await server.call("POST", "/script/external/probe/run-sync", {
      headers: scopeHeaders(),
      body: { files, port: Number(new URL(server.url).port) },
    });
    assert.equal(r.headers.get("x-task-status"), "SUCCESS", r.text);
    const v = r.body;
    assert.notEqual(v.uid, 0);
    assert.deepEqual(v.env, []);
    for (const key of Object.keys(files))
      assert.notEqual(v[key], "read", `${key} must not be readable`);
    if (server.services.runner.sandbox === "bwrap") assert.notEqual(v.net, "connected");
  });

  it("health reports the sandbox in force", async () => {
    const r = await server.call("GET", "/health");
    assert.equal(r.body.sandbox, server.services.runner.sandbox);
    // SCRIPT_SANDBOX=auto: bubblewrap, which `npm test` installs, or tasks are refused.
    assert.equal(r.body.sandbox, "bwrap", r.body.problem);
    assert.equal(r.body.problem, undefined);
  });
});
