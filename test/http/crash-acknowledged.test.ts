import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, it } from "node:test";
import { DF, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import { killHard, startProcess } from "../helpers/process.ts";
import { modeEnv, scopeHeaders } from "../helpers/server.ts";

/**
 * What a deploy, an activation, an upload and a secret rotation acknowledged is there after a
 * kill -9 that comes the moment the last answer arrives (docs/operations.md, SQLite's commits;
 * PostgreSQL's in a cluster), and the next identical requests succeed.
 */
const h = { ...scopeHeaders(), "content-type": "application/json" };
type Answer = { status: boolean; code: number; data: unknown };

async function post(url: string, p: string, body: unknown): Promise<Answer> {
  const r = await fetch(url + p, { method: "POST", headers: h, body: JSON.stringify(body) });
  return (await r.json()) as Answer;
}

async function upload(url: string, overwrite: boolean): Promise<{ status: number }> {
  const form = new FormData();
  form.append("path", "/acked");
  form.append("overwrite", String(overwrite));
  form.append("batchFile", new Blob(["def main():\n    return {'ok': 1}\n"]), "acked.py");
  const r = await fetch(`${url}/script/file/batch-upload`, {
    method: "POST",
    body: form,
    headers: scopeHeaders(),
  });
  return ((await r.json()) as { data: [{ status: number }] }).data[0];
}

const deploy = (url: string, revisionName: string, release: boolean) =>
  post(url, `${DF}/flow/deploy`, {
    elementName: "acked",
    revisionName,
    path: "/acked",
    flow: NO_SCRIPT_FLOW,
    configure: {},
    release,
  });

describe("kill -9 right after acknowledged changes", () => {
  it("keeps every one of them, and the next identical requests succeed", async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-crash-acked-"));
    const env = { DATA_DIR: dataDir, SCRIPT_PREFORK: "1", ...(await modeEnv()) };
    let proc = await startProcess(env);
    try {
      assert.equal((await upload(proc.url, false)).status, 0);
      assert.equal((await deploy(proc.url, "r1", true)).status, true);
      const activated = await post(proc.url, `${DF}/flow/activate`, {
        elementName: "acked",
        path: "/acked",
      });
      assert.equal(activated.data, "APPROVED");
      assert.equal((await deploy(proc.url, "r2", false)).status, true);
      const rotated = await post(proc.url, `${DF}/webhook/secret/rotate`, {});
      await killHard(proc.child);
      const secret = (rotated.data as { secret: string }).secret;
      assert.ok(secret);

      proc = await startProcess(env);
      const revisions = await post(proc.url, `${DF}/flow/revisions`, {
        elementName: "acked",
        path: "/acked",
        pageNo: 0,
        pageSize: 10,
      });
      const page = revisions.data as {
        totalCount: number;
        element: { releaseVersion: number; status: string };
      };
      assert.deepEqual(
        [page.totalCount, page.element.releaseVersion, page.element.status],
        [2, 1, "APPROVED"],
      );
      const ran = await post(proc.url, `${DF}/run-sync`, {
        elementName: "acked",
        parameter: { orders: [{ amount: 2, qty: 3 }] },
      });
      assert.equal(ran.status, true, JSON.stringify(ran));
      const task = await post(proc.url, "/script/external/acked/run-sync", {});
      assert.deepEqual(task, { ok: 1 });
      const read = await fetch(`${proc.url}${DF}/webhook/secret`, { headers: h });
      assert.equal(((await read.json()) as { data: { secret: string } }).data.secret, secret);

      // The same requests again: a new revision, an existing element skipped.
      assert.equal((await deploy(proc.url, "r2", false)).status, true);
      assert.equal((await upload(proc.url, false)).status, 1);
    } finally {
      await killHard(proc.child);
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
