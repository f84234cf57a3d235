import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, it } from "node:test";
import { killHard, startProcess } from "../helpers/process.ts";
import { modeEnv, scopeHeaders } from "../helpers/server.ts";
import { within } from "../helpers/wait.ts";
import { writeWheel } from "../helpers/wheels.ts";

/**
 * kill -9 while an unused environment is being removed (docs/script-dependencies.md, "Caching and
 * removal"), then restart on the same data directory and database: an upload with the same
 * dependencies must give an element that runs, not one that lists and fails.
 */
const h = scopeHeaders();

const withDeps = (name: string) => `# /// script
# dependencies = ["sluice-bulky"]
# ///
import sluice_bulky

def main():
    return {"${name}": sluice_bulky.VALUE}
`;

async function upload(url: string, name: string, content: string) {
  const form = new FormData();
  form.append("path", "/crash");
  form.append("overwrite", "true");
  form.append("batchFile", new Blob([content]), `${name}.py`);
  const r = await fetch(`${url}/script/file/batch-upload`, {
    method: "POST",
    body: form,
    headers: h,
  });
  const body = (await r.json()) as { data: [{ status: number; message: string }] };
  return body.data[0];
}

async function runSync(url: string, name: string) {
  const r = await fetch(`${url}/script/external/${name}/run-sync`, {
    method: "POST",
    headers: { ...h, "content-type": "application/json" },
    body: "{}",
  });
  return { status: r.headers.get("x-task-status"), body: await r.text() };
}

/** Resolves as soon as `file` in `dir` is gone (an inotify event, no polling). */
function gone(dir: string, file: string): Promise<void> {
  return new Promise((resolve) => {
    const w = fs.watch(dir, () => {
      if (fs.existsSync(path.join(dir, file))) return;
      w.close();
      resolve();
    });
  });
}

/** A wheel of thousands of files (removing or installing it takes a while) and a service's env. */
async function setUp() {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-crash-envs-"));
  const wheels = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-wheels-"));
  const files: Record<string, string> = { "sluice_bulky/__init__.py": "VALUE = 42\n" };
  for (let d = 0; d < 40; d++)
    for (let f = 0; f < 100; f++) files[`sluice_bulky/d${d}/f${f}.txt`] = "x\n";
  writeWheel(wheels, { name: "sluice-bulky", version: "1.0", files, topLevel: ["sluice_bulky"] });
  const env = {
    DATA_DIR: dataDir,
    PIP_NO_INDEX: "1",
    PIP_FIND_LINKS: wheels,
    SCRIPT_PREFORK: "1",
    ...(await modeEnv()),
  };
  const root = path.join(dataDir, "envs");
  const cleanUp = () => {
    fs.rmSync(dataDir, { recursive: true, force: true });
    fs.rmSync(wheels, { recursive: true, force: true });
  };
  return { env, root, cleanUp };
}

describe("kill -9 while an environment is built or removed", () => {
  it("leaves no half-removed environment that a later upload reuses", async () => {
    const { env, root, cleanUp } = await setUp();
    let proc = await startProcess(env);
    try {
      const first = await upload(proc.url, "bulky", withDeps("bulky"));
      assert.equal(first.status, 0, first.message);
      const [hash] = fs.readdirSync(root).filter((n) => /^[0-9a-f]{32}$/.test(n));
      assert.ok(hash, "the environment was built");
      const envDir = path.join(root, hash);
      // The overwrite leaves the environment unused: the upload's clean-up removes it. Killed
      // the moment its manifest goes, the removal is cut off in the middle.
      const removing = gone(envDir, "sluice-env.json");
      const overwrite = upload(proc.url, "bulky", "def main():\n    return 1\n").catch(() => null);
      await within(removing, 60_000, "the environment's removal to start");
      await killHard(proc.child);
      await overwrite;
      // What the cut-off removal left (the environment, or the folder it was moved to).
      assert.ok(fs.readdirSync(root).length > 0, "the kill came after the whole removal");

      proc = await startProcess(env);
      // The same dependencies again: the element must run with them.
      const again = await upload(proc.url, "again", withDeps("again"));
      assert.equal(again.status, 0, again.message);
      const run = await runSync(proc.url, "again");
      assert.equal(run.status, "SUCCESS", run.body);
      assert.deepEqual(JSON.parse(run.body), { again: 42 });
      // The upload's clean-up removed what the cut-off removal left: only the environment stays.
      assert.deepEqual(fs.readdirSync(root), [hash]);
    } finally {
      await killHard(proc.child);
      cleanUp();
    }
  });

  it("killed while an upload installs: nothing imported, and the same upload then succeeds", async () => {
    const { env, root, cleanUp } = await setUp();
    let proc = await startProcess(env);
    try {
      fs.mkdirSync(root, { mode: 0o755 });
      const building = new Promise<void>((resolve) => {
        const w = fs.watch(root, () => {
          if (!fs.readdirSync(root).some((n) => n.startsWith(".build-"))) return;
          w.close();
          resolve();
        });
      });
      const pending = upload(proc.url, "bulky", withDeps("bulky")).catch(() => null);
      await within(building, 60_000, "the upload's build to start");
      await killHard(proc.child);
      assert.equal(await pending, null, "the upload was answered before the kill");

      proc = await startProcess(env);
      // Nothing of it is listed, and a crash's build folders are all it left (removed by a later
      // pass once older than any live build: docs/script-dependencies.md).
      const listed = await runSync(proc.url, "bulky");
      assert.equal(listed.status, null, listed.body);
      assert.match(listed.body, /bulky/);
      const left = fs.readdirSync(root);
      assert.ok(
        left.every((n) => n.startsWith(".build-") || n.startsWith(".home-")),
        left.join(),
      );
      const again = await upload(proc.url, "bulky", withDeps("bulky"));
      assert.equal(again.status, 0, again.message);
      const run = await runSync(proc.url, "bulky");
      assert.equal(run.status, "SUCCESS", run.body);
      assert.deepEqual(JSON.parse(run.body), { bulky: 42 });
    } finally {
      await killHard(proc.child);
      cleanUp();
    }
  });
});
