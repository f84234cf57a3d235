import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { DF, deployAndActivate } from "../helpers/flows.ts";
import {
  modeEnv,
  scopeHeaders,
  startServer,
  TEST_MODE,
  type TestServer,
} from "../helpers/server.ts";
import { pollUntil } from "../helpers/wait.ts";

/**
 * Attack (docs/security.md, "Disk", "Kept directories"): an app's flow keeps its run's working
 * directory (`fileCleanup` `default`, `days`, `keep`), each within SCRIPT_RUN_DISK_BYTES, and the
 * app runs it again and again. No running node holds that space, so nothing is stopped: the data
 * directory's filesystem goes down to DATA_DIR_FREE_BYTES_MIN and from then on every app's script
 * nodes are refused. Defence: an app's kept directories on a node are bounded
 * (SCRIPT_KEPT_BYTES_PER_APP, its oldest go first), and below the floor kept directories are given
 * back (the app holding the most first, its oldest first) before any script node is refused or
 * stopped. The run whose directory went says so in its record (`filesRemoved`).
 */

const MiB = 1024 * 1024;
const SIZE = 64 * MiB;
const FLOOR = 12 * MiB;
const BUDGET = 12 * MiB;
const KEPT = 28 * MiB;

const APP_A = { app: "hoarder", space: "s", user: "mallory" };
const APP_C = { app: "hoarder2", space: "s", user: "trudy" };
const APP_B = { app: "good", space: "s", user: "alice" };

/**
 * 5 MiB of a file in the run's directory, kept after the run; near the floor, only as much as
 * leaves the filesystem 64 KiB above it (a run that takes it below is stopped, and keeps nothing).
 */
const WRITE = `import os
def main(p):
    s = os.statvfs(".")
    n = max(0, min(5242880, s.f_bavail * s.f_frsize - ${FLOOR} - 65536))
    with open("data.bin", "wb") as f:
        f.write(b"x" * n)
    return {"ok": True}
`;

const SMALL = `def main(p):
    with open("report.csv", "w") as f:
        f.write("id,total\\n1,42\\n" * 20000)
    return {"ok": True, "n": p["n"]}
`;

const flowOf = (code: string) => ({
  vertexes: [
    { id: "in", type: "input" },
    { id: "s", type: "script", config: { code } },
  ],
  edges: [{ source: "in", target: "s" }],
});

describe(`kept run directories cannot take the data directory to its floor (${TEST_MODE})`, {
  skip: process.getuid?.() !== 0 && "mounting a small filesystem for the data directory needs root",
}, () => {
  let server: TestServer;
  let mountPoint: string;
  let env: Record<string, string>;
  const runsOf = new Map<string, string[]>();

  const dirOf = (runId: string) => path.join(mountPoint, "tasks", runId);
  const present = (app: string) => (runsOf.get(app) ?? []).filter((id) => fs.existsSync(dirOf(id)));

  async function run(scope: typeof APP_B, elementName: string, n: number): Promise<boolean> {
    const r = await server.call("POST", `${DF}/run-sync`, {
      headers: scopeHeaders(scope),
      body: { elementName, path: "/f", parameter: { n } },
    });
    const runId = r.headers.get("x-run-id") ?? "";
    runsOf.set(scope.app, [...(runsOf.get(scope.app) ?? []), runId]);
    return r.body.status === true;
  }

  /** The other app's script node runs and succeeds. */
  async function victimRuns(n: number): Promise<void> {
    const r = await server.call("POST", `${DF}/run-sync`, {
      headers: scopeHeaders(APP_B),
      body: { elementName: "small", path: "/f", parameter: { n } },
    });
    assert.equal(r.body.status, true, r.text);
    assert.deepEqual(r.body.data, { ok: true, n });
  }

  /** A run's record as the monitor shows it. */
  const display = async (scope: typeof APP_B, runId: string) =>
    (
      await server.call("GET", `${DF}/monitor/run?runId=${runId}`, {
        headers: scopeHeaders(scope),
      })
    ).body;

  const start = () =>
    startServer(
      {
        ...env,
        FILE_SWEEP_MS: "0",
        SCRIPT_RUN_DISK_BYTES: String(BUDGET),
        DATA_DIR_FREE_BYTES_MIN: String(FLOOR),
        SCRIPT_KEPT_BYTES_PER_APP: String(KEPT),
        DATA_DIR_CHECK_MS: "20",
      },
      { dataDir: mountPoint, keepData: true },
    );

  before(async () => {
    mountPoint = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-kept-fs-"));
    execFileSync("mount", ["-t", "tmpfs", "-o", `size=${SIZE},mode=0755`, "tmpfs", mountPoint]);
    env = await modeEnv();
    server = await start();
    await deployAndActivate(
      server,
      "write",
      flowOf(WRITE),
      { fileCleanup: { type: "default" } },
      scopeHeaders(APP_A),
      "/f",
    );
    await deployAndActivate(
      server,
      "write",
      flowOf(WRITE),
      { fileCleanup: { type: "days", days: 30 } },
      scopeHeaders(APP_C),
      "/f",
    );
    await deployAndActivate(
      server,
      "small",
      flowOf(SMALL),
      { fileCleanup: { type: "keep" } },
      scopeHeaders(APP_B),
      "/f",
    );
  });
  after(async () => {
    await server?.close();
    execFileSync("umount", [mountPoint]);
    fs.rmdirSync(mountPoint);
  });

  it("an app's kept directories stay within SCRIPT_KEPT_BYTES_PER_APP; another app's script node runs", async () => {
    await victimRuns(1);
    // 60 MiB of kept files: past the filesystem's floor without a bound.
    const ok: boolean[] = [];
    for (let n = 0; n < 12; n++) ok.push(await run(APP_A, "write", n));
    await victimRuns(2);
    assert.deepEqual(ok, Array(12).fill(true), "each of the app's runs ran");
    // At most five directories of 5 MiB (and their entries) within 28 MiB; the oldest went.
    const left = await pollUntil(
      () => present(APP_A.app),
      (ids) => ids.length <= 5,
      "the app's kept directories within its bound",
    );
    const runs = runsOf.get(APP_A.app) ?? [];
    assert.ok(left.length >= 4, `the newest stay: ${left.length}`);
    assert.deepEqual(left, runs.slice(runs.length - left.length), "the oldest went first");
    const gone = await display(APP_A, runs[0] ?? "");
    assert.equal(gone.status, true, JSON.stringify(gone));
    assert.match(gone.data.filesRemoved?.reason ?? "", /SCRIPT_KEPT_BYTES_PER_APP/);
    assert.equal(typeof gone.data.filesRemoved?.time, "number");
    const kept = await display(APP_A, runs.at(-1) ?? "");
    assert.equal(kept.data.filesRemoved, undefined, "a directory still kept is not removed");
  });

  it("below the floor, kept directories are given back before any script node is refused", async () => {
    // A second app keeps as much: together past the floor.
    const ok: boolean[] = [];
    for (let n = 0; n < 8; n++) ok.push(await run(APP_C, "write", n));
    await victimRuns(3);
    assert.deepEqual(ok, Array(8).fill(true), "each of the second app's runs ran, none stopped");
    const s = fs.statfsSync(mountPoint);
    assert.ok(s.bavail * s.bsize >= FLOOR - BUDGET / 2, "the filesystem is back near its floor");
    // Some kept directories went for the floor, and their runs say so.
    const all = [...(runsOf.get(APP_A.app) ?? []), ...(runsOf.get(APP_C.app) ?? [])];
    const reasons: string[] = [];
    for (const id of all) {
      const scope = (runsOf.get(APP_A.app) ?? []).includes(id) ? APP_A : APP_C;
      const d = await display(scope, id);
      if (d.data.filesRemoved) reasons.push(d.data.filesRemoved.reason);
    }
    assert.ok(
      reasons.some((r) => /DATA_DIR_FREE_BYTES_MIN/.test(r)),
      `a directory was given back for the floor: ${JSON.stringify(reasons)}`,
    );
  });

  it("a restarted service counts the kept directories it finds", async () => {
    const before = present(APP_A.app);
    assert.ok(before.length > 0, "the app still keeps directories");
    await server.close();
    // The operator clears the second app's directories meanwhile: room for the first app's runs.
    for (const id of runsOf.get(APP_C.app) ?? [])
      fs.rmSync(dirOf(id), { recursive: true, force: true });
    server = await start();
    // Six more runs of 5 MiB: the bound holds only if those of the previous life count.
    for (let n = 0; n < 6; n++) assert.ok(await run(APP_A, "write", 100 + n));
    const left = await pollUntil(
      () => present(APP_A.app),
      (ids) => ids.length <= 5,
      "the app's kept directories within its bound after a restart",
    );
    assert.ok(
      before.every((id) => !left.includes(id)),
      "the previous life's directories, the oldest, went",
    );
    await victimRuns(4);
  });
});
