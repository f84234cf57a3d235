import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";
import { DF } from "../helpers/flows.ts";
import { killHard, startProcess } from "../helpers/process.ts";
import { processesOf } from "../helpers/process-tree.ts";
import { modeEnv, scopeHeaders } from "../helpers/server.ts";
import { pollUntil } from "../helpers/wait.ts";

/**
 * docs/security.md, "The end of a task": no process of a dead service is left behind. A task's
 * child dies with the zygote through its parent-death signal, and everything else of the task with
 * it (the child is its pid namespace's first process). The attack: the task clears that signal
 * itself (`prctl(PR_SET_PDEATHSIG, 0)`, or sets one it ignores), then the service is killed.
 * Before, the task ran on, unsupervised, as a uid of the block, until something claimed the block
 * again; now the prctl is refused (the zygote's seccomp filter allows only SIGKILL) and the task
 * dies with the service.
 */
const root = process.getuid?.() === 0;
const h = { ...scopeHeaders(), "content-type": "application/json" };
const post = async (url: string, p: string, body: unknown) =>
  (
    await fetch(url + p, { method: "POST", headers: h, body: JSON.stringify(body) })
  ).json() as Promise<{ status: boolean; code: number; data: unknown }>;

/** The task: tries to keep living past its zygote, then says how its prctl calls went. */
const CODE = `import ctypes, os, signal, time
def main(p):
    libc = ctypes.CDLL(None, use_errno=True)
    got = []
    for sig in (0, int(signal.SIGTERM)):
        if sig:
            signal.signal(sig, signal.SIG_IGN)
        r = libc.prctl(1, sig, 0, 0, 0)
        got.append(f"{sig}:{r}:{ctypes.get_errno()}")
    open("uid", "w").write(f"{os.getuid()} {' '.join(got)}")
    time.sleep(120)
`;

describe("a task that clears its parent-death signal", { skip: !root && "needs root" }, () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-pdeathsig-"));
  after(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  for (const sandbox of ["auto", "none"]) {
    it(`still dies with the killed service (SCRIPT_SANDBOX=${sandbox})`, async () => {
      const own = fs.mkdtempSync(path.join(dataDir, `${sandbox}-`));
      const svc = await startProcess({
        DATA_DIR: own,
        SCRIPT_SANDBOX: sandbox,
        SCRIPT_PREFORK: "1",
        ...(await modeEnv()),
      });
      const tasks = path.join(own, "tasks");
      let uid = Number.NaN;
      try {
        const flow = {
          vertexes: [
            { id: "in", type: "input" },
            { id: "py", type: "script", config: { code: CODE } },
          ],
          edges: [{ source: "in", target: "py" }],
        };
        const d = await post(svc.url, `${DF}/flow/deploy`, {
          elementName: "clinger",
          revisionName: "r",
          path: "/",
          flow,
          configure: {},
        });
        assert.equal(d.status, true, JSON.stringify(d));
        await post(svc.url, `${DF}/flow/activate`, { elementName: "clinger" });
        const r = await post(svc.url, `${DF}/run`, { elementName: "clinger", parameter: {} });
        assert.equal(r.status, true, JSON.stringify(r));
        // Written by another process tree, announced to nobody here: the shared poll.
        const written = () =>
          (fs.existsSync(tasks) ? fs.readdirSync(tasks) : [])
            .map((d) => path.join(tasks, d, "uid"))
            .filter((f) => fs.existsSync(f) && fs.readFileSync(f, "utf8") !== "")
            .map((f) => fs.readFileSync(f, "utf8"));
        const [said] = await pollUntil(written, (w) => w.length === 1, "the task wrote its uid");
        const [first, ...calls] = (said as string).split(" ");
        uid = Number(first);
        // Each prctl refused (-1, EPERM = 1): the signal stays SIGKILL.
        assert.deepEqual(calls, ["0:-1:1", "15:-1:1"], said);
        await killHard(svc.child);
        const left = () => processesOf(uid);
        await pollUntil(left, (pids) => pids.length === 0, "the task outlived the killed service", {
          ms: 5000,
        });
      } finally {
        await killHard(svc.child);
        // What outlived it (before the fix): killed here, not left to the next test.
        for (const pid of Number.isNaN(uid) ? [] : processesOf(uid)) process.kill(pid, "SIGKILL");
      }
    });
  }
});
