import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { modeEnv, scopeHeaders, startServer, type TestServer, upload } from "../helpers/server.ts";
import { pollUntil } from "../helpers/wait.ts";

/**
 * Attacks of issue 12, "every task in its own cgroup", as tenants would upload them. The memory
 * limit used to be per process (RLIMIT_AS), so a task could hold it once per process it forks,
 * and shared memory that no process maps any more was not counted at all. Defence
 * (docs/security.md, "One cgroup per task"): the limit binds the task's cgroup, all its
 * processes and the shared memory they create together; a task the kernel kills for memory
 * fails with a message saying so.
 */
const MiB = 1024 * 1024;
const LIMIT = 128 * MiB;

/** Forks children that each write (so hold) most of the limit, and reports how much was held. */
const FORKS = `import os, select, time
MiB = 1 << 20
def main(p):
    n, size = p["children"], p["mib"] * MiB
    r, w = os.pipe()
    pids = []
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            os.close(r)
            block = b"\\x01" * size  # every page written: resident, not just reserved
            os.write(w, b"+")
            time.sleep(60)
            os._exit(0)
        pids.append(pid)
    os.close(w)
    held, died, deadline = 0, 0, time.monotonic() + 20
    while held + died < n and time.monotonic() < deadline:
        if select.select([r], [], [], 0.05)[0]:
            held += len(os.read(r, n))
        for pid in list(pids):
            if os.waitpid(pid, os.WNOHANG)[0]:
                pids.remove(pid)
                died += 1
    return {"held_mib": held * p["mib"], "died": died}
`;

/** SysV segments, each filled and detached: no process maps them, they stay. */
const SYSV = `import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
libc.shmdt.argtypes = [ctypes.c_void_p]
MiB = 1 << 20
def main(p):
    size, total = p["mib"] * MiB, 0
    for _ in range(p["segments"]):
        shmid = libc.shmget(0, size, 0o1000 | 0o600)  # IPC_PRIVATE, IPC_CREAT; never removed
        if shmid < 0:
            return {"error": os.strerror(ctypes.get_errno()), "held_mib": total}
        addr = libc.shmat(shmid, None, 0)
        ctypes.memset(addr, 1, size)
        libc.shmdt(ctypes.c_void_p(addr))
        total += p["mib"]
    return {"held_mib": total}
`;

/** An honest task that needs most of its limit in one process. */
const BIG = `MiB = 1 << 20
def main(p):
    block = b"\\x01" * (p["mib"] * MiB)
    return len(block) // MiB
`;

/**
 * Runs until the test says stop (a file in its working directory), so that two run at once. Its
 * cgroup is read from the host: the task itself sees only `/` for it (its own cgroup namespace).
 */
const WHERE = `import os, time
def main(p=None):
    open("started", "w").close()
    deadline = time.monotonic() + 30
    while not os.path.exists("stop") and time.monotonic() < deadline:
        time.sleep(0.01)
    return open("/proc/self/cgroup").read()
`;

/** The host pids of the tasks that said `started` and were not told to stop yet. */
function startedTasks(): number[] {
  const pids: number[] = [];
  for (const pid of fs.readdirSync("/proc").filter((n) => /^\d+$/.test(n))) {
    try {
      const cwd = `/proc/${pid}/cwd`;
      if (fs.existsSync(`${cwd}/started`) && !fs.existsSync(`${cwd}/stop`)) pids.push(Number(pid));
    } catch {
      // ended while we looked
    }
  }
  return pids;
}

describe("every task in its own cgroup", {
  skip: process.getuid?.() !== 0 && "cgroups need root",
}, () => {
  let server: TestServer;
  const h = scopeHeaders({ app: "app1", space: "tenant-one", user: "mallory" });
  const run = (elementName: string, parameter: unknown) =>
    server.call("POST", "/script/script/run-sync", {
      headers: h,
      body: { elementName, path: "/s", parameter },
    });

  before(async () => {
    server = await startServer({ SCRIPT_MEMORY_BYTES: String(LIMIT), SCRIPT_CONCURRENCY: "4" });
    const files = [
      { name: "forks.py", content: FORKS },
      { name: "sysv.py", content: SYSV },
      { name: "big.py", content: BIG },
      { name: "where.py", content: WHERE },
    ];
    const r = await upload(server, files, { path: "/s" }, h);
    for (const item of r.body.data) assert.equal(item.status, 0, r.text);
  });
  after(() => server.close());

  it("/health names the cgroup version in force", async () => {
    const r = await server.call("GET", "/health");
    assert.match(r.body.cgroup, /^v[12]$/, r.text);
    assert.equal(r.body.problem, undefined);
  });

  it("4 processes of 80 MiB each do not get 4 × a 128 MiB limit: the task fails for memory", async () => {
    const r = await run("forks", { children: 4, mib: 80 });
    assert.equal(r.body.status, false, `the task held ${JSON.stringify(r.body.data)}`);
    assert.equal(r.body.code, 28030001, r.text);
    assert.match(r.body.message, /MemoryLimit: task exceeded its memory limit of 134217728 bytes/);
  });

  it("SysV segments no process maps any more count: 4 × 48 MiB fails for memory", async () => {
    const r = await run("sysv", { segments: 4, mib: 48 });
    assert.equal(r.body.status, false, `the task held ${JSON.stringify(r.body.data)}`);
    assert.match(r.body.message, /MemoryLimit: task exceeded its memory limit of 134217728 bytes/);
  });

  it("what an attacker left charged does not shrink the next tasks' limit", async () => {
    await run("sysv", { segments: 2, mib: 60 }); // within the limit, and left behind
    for (let i = 0; i < 6; i++) {
      const r = await run("big", { mib: 90 });
      assert.equal(r.body.status, true, r.text);
      assert.equal(r.body.data, 90);
    }
  });

  it("tasks running at once are in different cgroups, each of its own", async () => {
    const both = Promise.all([run("where", null), run("where", null)]);
    let pids: number[] = [];
    await pollUntil(
      () => {
        pids = startedTasks();
        return pids.length;
      },
      (n) => n === 2,
      "both tasks started",
    );
    const cgroupOf = (pid: number) => {
      const text = fs.readFileSync(`/proc/${pid}/cgroup`, "utf8");
      const line = text.split("\n").find((l) => /^(\d+:memory:|0::)\/sluice\//.test(l));
      assert.ok(line, text);
      return line.slice(line.indexOf(":/") + 1);
    };
    const [a, b] = pids.map(cgroupOf);
    for (const pid of pids) fs.writeFileSync(`/proc/${pid}/cwd/stop`, "");
    assert.notEqual(a, b);
    // Inside, each sees its own cgroup as the root of its cgroup namespace, named nothing.
    for (const r of await both) {
      assert.equal(r.body.status, true, r.text);
      for (const l of (r.body.data as string).trim().split("\n")) assert.match(l, /:\/$/);
    }
  });
});

describe("where no cgroup can be created, tasks are refused unless SCRIPT_CGROUP=off", () => {
  const h = scopeHeaders();
  /** No cgroup file system is mounted there: as on a host without them. */
  let NO_CGROUPS: Record<string, string> = { SCRIPT_CGROUP_ROOT: "/nonexistent" };
  let dataDir: string;
  const servers: TestServer[] = [];
  const serve = async (env: Record<string, string>) => {
    const s = await startServer(env, { dataDir, keepData: true });
    servers.push(s);
    return s;
  };

  before(async () => {
    // Elements are stored by a node that can check them; the nodes below serve the same data.
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-test-"));
    const env = await modeEnv();
    const seed = await startServer(env, { dataDir, keepData: true });
    try {
      const r = await upload(seed, [{ name: "echo.py", content: "def main(p):\n    return p\n" }], {
        path: "/s",
      });
      assert.equal(r.body.data[0].status, 0, r.text);
    } finally {
      await seed.close();
    }
    NO_CGROUPS = { ...env, ...NO_CGROUPS }; // the same database, in cluster mode
  });
  after(async () => {
    for (const s of servers) await s.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it("auto: /health and every task say why and how to fix it", async () => {
    const server = await serve(NO_CGROUPS);
    const health = await server.call("GET", "/health");
    assert.equal(health.body.cgroup, "refused", health.text);
    assert.match(health.body.problem, /no cgroup v2 .* is mounted under \/nonexistent/);
    assert.match(health.body.problem, /SCRIPT_CGROUP=off/);
    const r = await server.call("POST", "/script/external/echo/run-sync?path=/s", {
      headers: h,
      body: { a: 1 },
    });
    assert.equal(r.body.status, false, r.text);
    assert.match(r.body.message, /tasks cannot have a cgroup of their own/);
    assert.equal(r.headers.get("x-task-id"), null, "no task is created");
  });

  it("required: the service does not start", async () => {
    await assert.rejects(
      serve({ ...NO_CGROUPS, SCRIPT_CGROUP: "required" }),
      /SCRIPT_CGROUP=required/,
    );
  });

  it("off: the operator accepted per-process limits only, and tasks run", async () => {
    const server = await serve({ ...NO_CGROUPS, SCRIPT_CGROUP: "off" });
    assert.equal((await server.call("GET", "/health")).body.cgroup, "off");
    const r = await server.call("POST", "/script/external/echo/run-sync?path=/s", {
      headers: h,
      body: { a: 1 },
    });
    assert.deepEqual(r.body, { a: 1 }, r.text);
  });
});
