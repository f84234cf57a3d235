import assert from "node:assert/strict";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";
import { freePort, sluice } from "../helpers/process.ts";

/**
 * What stops `sluice serve` at start (docs/operations.md, "Start-up"): one line on stderr naming
 * the setting and what was given, exit status 1, no stack trace, never a secret.
 */
describe("sluice serve refused at start", () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-startup-"));
  after(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  async function refused(env: Record<string, string>, names: RegExp): Promise<string> {
    const port = String(await freePort());
    const r = await sluice(["serve"], {
      DATA_DIR: dataDir,
      PORT: port,
      SCRIPT_PREFORK: "1",
      LOG_LEVEL: "warn",
      ...env,
    });
    assert.equal(r.code, 1, `${JSON.stringify(env)}\n${r.stdout}${r.stderr}`);
    const lines = r.stderr.trimEnd().split("\n");
    assert.equal(lines.length, 1, r.stderr);
    assert.match(lines[0] ?? "", /^sluice: cannot start: /);
    assert.match(lines[0] ?? "", names);
    assert.doesNotMatch(r.stderr + r.stdout, /\n\s+at /, "no stack trace");
    return r.stderr;
  }

  const cases: [Record<string, string>, RegExp][] = [
    [{ PORT: "abc" }, /PORT must be a whole number from 0 to 65535, got "abc"/],
    [{ PORT: "70000" }, /PORT .* got "70000"/],
    [{ SCRIPT_CONCURRENCY: "abc" }, /SCRIPT_CONCURRENCY must be a whole number .* got "abc"/],
    [{ MAX_RUN_S: "-5" }, /MAX_RUN_S must be a whole number .* got "-5"/],
    [{ LIMIT_BODY_BYTES: "0" }, /LIMIT_BODY_BYTES .* got "0"/],
    [{ SHUTDOWN_GRACE_S: "1e9" }, /SHUTDOWN_GRACE_S .* got "1e9"/],
    [{ SCRIPT_SANDBOX: "bubble" }, /SCRIPT_SANDBOX must be auto, bwrap or none, got "bubble"/],
    [{ SCRIPT_NETWORK: "ture" }, /SCRIPT_NETWORK must be true or false, got "ture"/],
    [{ LOG_LEVEL: "verbose" }, /LOG_LEVEL must be one of .* got "verbose"/],
    [
      { SCRIPT_CONCURRENCY: "100000" },
      /SCRIPT_UID_COUNT 16384 is smaller than one block of \d+ uids .* lower SCRIPT_CONCURRENCY/,
    ],
  ];
  for (const [env, names] of cases)
    it(`names ${Object.entries(env)[0]?.join("=")}`, async () => {
      await refused(env, names);
    });

  it("names SECRETS_KEY without showing it", async () => {
    const out = await refused({ SECRETS_KEY: "shortsecretvalue" }, /SECRETS_KEY must be 32 bytes/);
    assert.doesNotMatch(out, /shortsecretvalue/);
  });

  it("names a DATA_DIR that is a file", async () => {
    const file = path.join(dataDir, "a-file");
    fs.writeFileSync(file, "");
    await refused({ DATA_DIR: file }, new RegExp(`DATA_DIR "${file}" is not a directory`));
  });

  it("names a DATABASE_URL that is not PostgreSQL's, its password hidden", async () => {
    const out = await refused(
      { DATABASE_URL: "mysql://u:pw-SECRET-1@db/x" },
      /DATABASE_URL must be a postgres:\/\/ or postgresql:\/\/ URL .* got "mysql:\/\/u:\*\*\*@db\/x"/,
    );
    assert.doesNotMatch(out, /pw-SECRET-1/);
  });

  it("names a DATABASE_URL nothing answers at, its password hidden", async () => {
    const port = await freePort();
    const out = await refused(
      { DATABASE_URL: `postgres://u:pw-SECRET-2@127.0.0.1:${port}/x` },
      /cannot reach the database of DATABASE_URL "postgres:\/\/u:\*\*\*@127\.0\.0\.1:\d+\/x": .*ECONNREFUSED/,
    );
    assert.doesNotMatch(out, /pw-SECRET-2/);
  });

  it("names the HOST and PORT already in use", async () => {
    const holder = net.createServer();
    const port = await new Promise<number>((resolve) =>
      holder.listen(0, "127.0.0.1", () => resolve((holder.address() as net.AddressInfo).port)),
    );
    try {
      await refused(
        { PORT: String(port), HOST: "127.0.0.1" },
        new RegExp(`cannot listen on HOST "127.0.0.1" PORT ${port}: .*EADDRINUSE`),
      );
    } finally {
      holder.close();
    }
  });

  it("`token` and `retention` name a bad setting the same way", async () => {
    for (const args of [["token", "--app", "a", "--space", "s"], ["retention"]]) {
      const r = await sluice(args, { DATA_DIR: dataDir, LOG_LEVEL: "verbose" });
      assert.equal(r.code, 1, r.stderr);
      assert.match(r.stderr, /^sluice: config: LOG_LEVEL must be one of .* got "verbose"\n$/);
    }
  });
});
