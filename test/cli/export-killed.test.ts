import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { BIN, killHard, sluice } from "../helpers/process.ts";
import { SCOPE, startServer, type TestServer, upload } from "../helpers/server.ts";
import { within } from "../helpers/wait.ts";

/**
 * `sluice export -o FILE` killed while it writes (docs/cli.md): FILE is the previous export or the
 * new one, whole, never a cut-off mix that has lost the previous one.
 */
describe("sluice export killed while it writes its file", () => {
  let server: TestServer;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-cli-export-"));
  const env = () => ({
    SLUICE_URL: server.url,
    SLUICE_APP: SCOPE.app,
    SLUICE_SPACE: SCOPE.space,
    SLUICE_USER: SCOPE.user,
  });

  before(async () => {
    server = await startServer();
    // Tens of MiB of export: written in many chunks, so the kill lands while it is written.
    const pad = `# ${"x".repeat(1000 * 1024)}\n`;
    const files = Array.from({ length: 7 }, (_, i) => ({
      name: `big${i}.py`,
      content: `${pad}def main():\n    return ${i}\n`,
    }));
    const r = await upload(server, files, { path: "/big" });
    assert.ok(
      r.body.data.every((d: { status: number }) => d.status === 0),
      r.text,
    );
  });
  after(async () => {
    await server.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("leaves the previous export whole", async () => {
    const file = path.join(dir, "backup.json");
    const first = await sluice(["export", "--path", "/big", "-o", file], env());
    assert.equal(first.code, 0, first.stderr);
    const previous = fs.readFileSync(file, "utf8");
    assert.equal(JSON.parse(previous).scripts.length, 7);

    const child = spawn(process.execPath, [BIN, "export", "--path", "/big", "-o", file], {
      env: { PATH: process.env.PATH ?? "", ...env() },
      stdio: "ignore",
    });
    // Killed at the first change in the folder: the export is being written.
    const changed = new Promise<void>((resolve) => {
      const w = fs.watch(dir, () => {
        w.close();
        resolve();
      });
    });
    await within(changed, 60_000, "the export to start writing");
    await killHard(child);

    const now = fs.readFileSync(file, "utf8");
    assert.equal(now.length, previous.length, "the file is whole");
    assert.equal(JSON.parse(now).scripts.length, 7);
    // Whatever the killed export left beside it is not kept for good: a next export succeeds.
    const next = await sluice(["export", "--path", "/big", "-o", file], env());
    assert.equal(next.code, 0, next.stderr);
    assert.equal(JSON.parse(fs.readFileSync(file, "utf8")).scripts.length, 7);
    assert.deepEqual(fs.readdirSync(dir), ["backup.json"]);
  });
});
