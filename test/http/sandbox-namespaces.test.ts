import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import type { PythonRunner } from "../../src/scripts/python-runner.ts";
import { processesOf } from "../helpers/process-tree.ts";
import { scopeHeaders, startServer, type TestServer, upload } from "../helpers/server.ts";

/**
 * Attacks of issue 12, items 3, 5 and the user-namespace half of 8, as tenants would upload them
 * (docs/security.md, "Attacks the suite performs"). Two tenants in different apps and spaces.
 * Defence: every task gets IPC and network namespaces of its own (set up in the pre-forked child
 * before its task arrives), and a seccomp filter denies user namespaces inside the sandbox.
 */

/** Tenant one leaves a keyed SysV segment holding a secret; it never removes it. */
const SHM_WRITER = `import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
def main(p):
    shmid = libc.shmget(p["key"], 4096, 0o1000 | 0o666)  # IPC_CREAT, readable by anyone
    if shmid < 0:
        return {"error": os.strerror(ctypes.get_errno())}
    addr = libc.shmat(shmid, None, 0)
    secret = p["secret"].encode()
    ctypes.memmove(addr, secret, len(secret))
    libc.shmdt(ctypes.c_void_p(addr))
    return {"shmid": shmid, "ipc": os.readlink("/proc/self/ns/ipc"), "pid": os.getpid(),
            "uid": os.getuid()}
`;

/** Any later task (the other tenant, or the same one) attaches by key and reads. */
const SHM_READER = `import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
def main(p):
    shmid = libc.shmget(p["key"], 0, 0)
    if shmid < 0:
        return {"read": None, "error": errno.errorcode[ctypes.get_errno()]}
    addr = libc.shmat(shmid, None, 0o10000)  # SHM_RDONLY
    if addr is None or addr == ctypes.c_void_p(-1).value:
        return {"read": None, "error": errno.errorcode[ctypes.get_errno()]}
    return {"read": ctypes.string_at(addr, 64).split(b"\\0")[0].decode()}
`;

/** Tenant one listens on loopback TCP and on an abstract unix socket while it runs. */
const LISTENER = `import os, select, socket, time
def main(p):
    tcp = socket.socket()
    tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    tcp.bind(("127.0.0.1", p["port"]))
    tcp.listen()
    uds = socket.socket(socket.AF_UNIX)
    uds.bind("\\0" + p["name"])
    uds.listen()
    # One connection to itself, closed by the client first: it would linger in TIME_WAIT.
    client = socket.create_connection(("127.0.0.1", p["port"]))
    tcp.accept()[0].close()
    client.close()
    open("listening", "w").close()  # the test waits for this file
    accepted = []
    deadline = time.monotonic() + 30
    while not os.path.exists("stop") and time.monotonic() < deadline:
        ready, _, _ = select.select([tcp, uds], [], [], 0.02)
        for s in ready:
            conn, _ = s.accept()
            accepted.append("tcp" if s is tcp else "unix")
            conn.close()
    return {"accepted": accepted, "net": os.readlink("/proc/self/ns/net")}
`;

/** Tenant two, started while tenant one listens, tries to connect to both. */
const CONNECTOR = `import os, socket
def main(p):
    out = {"net": os.readlink("/proc/self/ns/net")}
    for kind, family, addr in (("tcp", socket.AF_INET, ("127.0.0.1", p["port"])),
                               ("unix", socket.AF_UNIX, "\\0" + p["name"])):
        s = socket.socket(family)
        s.settimeout(5)
        try:
            s.connect(addr)
            out[kind] = "connected"
        except OSError as e:
            out[kind] = type(e).__name__
        finally:
            s.close()
    # Every TCP socket of this network namespace (after the header line of each table).
    out["sockets"] = [line.split()[1:4] for table in ("/proc/net/tcp", "/proc/net/tcp6")
                      for line in open(table).read().splitlines()[1:]]
    return out
`;

/**
 * Creates user namespaces every way a script can: clone3, clone and unshare (raw system calls
 * through ctypes), and util-linux's unshare(1). Then checks that ordinary process creation still
 * works (glibc falls back from clone3 to clone on ENOSYS) and reads its own capabilities.
 */
const USERNS = `import ctypes, errno, os, platform, subprocess
libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWUSER, SIGCHLD = 0x10000000, 17
NR_CLONE = {"x86_64": 56, "aarch64": 220}[platform.machine()]
NR_CLONE3 = 435

def outcome(r):
    if r == 0:
        os._exit(0)  # we are the new child (in a new user namespace): leave at once
    if r > 0:
        os.waitpid(r, 0)
        return "created"
    return errno.errorcode[ctypes.get_errno()]

def main(p=None):
    out = {}
    args = (ctypes.c_uint64 * 11)()  # struct clone_args
    args[0], args[4] = CLONE_NEWUSER, SIGCHLD
    out["clone3"] = outcome(libc.syscall(NR_CLONE3, ctypes.byref(args), ctypes.c_size_t(88)))
    out["clone"] = outcome(libc.syscall(NR_CLONE, ctypes.c_ulong(CLONE_NEWUSER | SIGCHLD), 0, 0, 0, 0))
    out["unshare(1)"] = subprocess.run(["unshare", "--user", "--map-root-user", "true"],
                                       capture_output=True).returncode
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    out["fork"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    out["true"] = subprocess.run(["true"]).returncode
    with open("/proc/self/status") as f:
        status = dict(line.rstrip("\\n").split(":\\t", 1) for line in f if ":\\t" in line)
    out["status"] = {k: status[k].strip() for k in ("CapEff", "CapPrm", "CapInh", "CapAmb", "NoNewPrivs")}
    out["uid"] = os.getuid()
    out["unshare"] = "ok" if libc.unshare(CLONE_NEWUSER) == 0 else errno.errorcode[ctypes.get_errno()]
    return out
`;

/** Lists every process it can see and reads its command line, with a child of its own running. */
const PROCESSES = `import os, subprocess
def main(p=None):
    child = subprocess.Popen(["sleep", "30"])
    while b"sleep" not in open(f"/proc/{child.pid}/cmdline", "rb").read():
        pass  # until it has run sleep: its command line is empty while it execs
    seen = {}
    for n in os.listdir("/proc"):
        if n.isdigit():
            try:
                seen[n] = open(f"/proc/{n}/cmdline", "rb").read().replace(b"\\0", b" ").decode().strip()
            except OSError:
                pass
    child.kill()
    child.wait()
    return {"self": os.getpid(), "child": child.pid, "seen": seen}
`;

const NAMESPACES = `import os
def main(p=None):
    return {k: os.readlink(f"/proc/self/ns/{k}") for k in ("ipc", "net")}
`;

const one = scopeHeaders({ app: "app1", space: "tenant-one", user: "mallory" });
const two = scopeHeaders({ app: "app2", space: "tenant-two", user: "alice" });

/** Waits for a condition that the service makes true by itself (a file, a record), not a sleep. */
async function until(what: string, test: () => boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!test()) {
    if (Date.now() > deadline) throw new Error(`still not true after ${ms} ms: ${what}`);
    await new Promise((r) => setImmediate(r));
  }
}

/** The working directory (as its process sees it) of the one task that wrote `file` there. */
function taskDirWith(file: string): string | undefined {
  for (const pid of fs.readdirSync("/proc").filter((n) => /^\d+$/.test(n))) {
    try {
      if (fs.existsSync(`/proc/${pid}/cwd/${file}`)) return `/proc/${pid}/cwd`;
    } catch {
      // ended while we looked
    }
  }
  return undefined;
}

/**
 * The SysV shared memory segments with `key` in the IPC namespace of `pid` (with SCRIPT_SANDBOX=none
 * the host's, where other software may keep segments of its own).
 */
function segmentsOf(pid: number, key: number): string[] {
  const r = spawnSync("nsenter", [`--ipc=/proc/${pid}/ns/ipc`, "cat", "/proc/sysvipc/shm"], {
    encoding: "utf8",
  });
  assert.equal(r.status, 0, r.stderr);
  // After the header line, one segment per line; its first column is the key, in decimal.
  return r.stdout
    .trim()
    .split("\n")
    .slice(1)
    .filter((line) => Number(line.trim().split(/\s+/)[0]) === key);
}

async function run(
  server: TestServer,
  headers: Record<string, string>,
  name: string,
  body: unknown,
  // biome-ignore lint/suspicious/noExplicitAny: a script's JSON value.
): Promise<any> {
  const r = await server.call("POST", `/script/external/${name}/run-sync?path=/s`, {
    headers,
    body,
  });
  assert.equal(r.headers.get("x-task-status"), "SUCCESS", r.text);
  return r.body;
}

async function seed(server: TestServer): Promise<void> {
  for (const [h, files] of [
    [
      one,
      [
        ["writer.py", SHM_WRITER],
        ["reader.py", SHM_READER],
        ["listener.py", LISTENER],
        ["userns.py", USERNS],
        ["ns.py", NAMESPACES],
        ["processes.py", PROCESSES],
      ],
    ],
    [
      two,
      [
        ["reader.py", SHM_READER],
        ["connector.py", CONNECTOR],
        ["ns.py", NAMESPACES],
      ],
    ],
  ] as const) {
    const r = await upload(
      server,
      files.map(([name, content]) => ({ name, content })),
      { path: "/s" },
      h,
    );
    assert.ok(
      r.body.data.every((i: { status: number }) => i.status === 0),
      r.text,
    );
  }
}

const zygoteOf = (server: TestServer): number => {
  const pid = (server.services.runner as PythonRunner).zygotePid();
  assert.ok(pid);
  return pid;
};

// bubblewrap (the default) and SCRIPT_SANDBOX=none as root (uid + rlimits, no bubblewrap): the
// per-task namespaces and the seccomp filter are the zygote's, so both get them.
for (const sandbox of ["auto", "none"] as const) {
  describe(`tenants cannot meet through the kernel (SCRIPT_SANDBOX=${sandbox})`, {
    skip: process.getuid?.() !== 0 && "per-task uids and namespaces need root",
  }, () => {
    let server: TestServer;
    before(async () => {
      server = await startServer({ SCRIPT_SANDBOX: sandbox });
      assert.equal(server.services.runner.sandbox, sandbox === "auto" ? "bwrap" : "uid");
      await seed(server);
    });
    after(() => server.close());

    it("item 3: a SysV segment left by one tenant is neither readable by another nor kept after its task", async (t) => {
      const key = 0x5100000 + Math.floor(Math.random() * 0xffff);
      const secret = `secret-${randomBytes(8).toString("hex")}`;
      // Without the defence the segment outlives the test (in the host's namespace with
      // SCRIPT_SANDBOX=none): remove it whatever the outcome.
      t.after(() => {
        spawnSync("nsenter", [
          `--ipc=/proc/${zygoteOf(server)}/ns/ipc`,
          "ipcrm",
          "-M",
          String(key),
        ]);
      });
      const w = await run(server, one, "writer", { key, secret });
      assert.ok(w.shmid >= 0, JSON.stringify(w));

      const theft = await run(server, two, "reader", { key });
      assert.deepEqual(theft, { read: null, error: "ENOENT" }, "the other tenant reads nothing");
      const later = await run(server, one, "reader", { key });
      assert.deepEqual(later, { read: null, error: "ENOENT" }, "nothing kept for a later task");

      // The segment lived in the writer's own IPC namespace, which only the writer's task could
      // be in (its child unshared it; setns is denied): once none of the task's processes is
      // left, the kernel frees the namespace and its segments. (Its number, not a process list,
      // cannot tell: the kernel reuses a freed namespace's number at once.) Nothing is left in
      // the zygote's namespace either.
      const zygote = zygoteOf(server);
      assert.notEqual(w.ipc, fs.readlinkSync(`/proc/${zygote}/ns/ipc`), "its own IPC namespace");
      // (Its pid is 1 in its own pid namespace: its uid, private to it, finds its processes.)
      await until(`nothing of the writer's task left (uid ${w.uid})`, () => {
        return processesOf(w.uid).length === 0;
      });
      assert.deepEqual(segmentsOf(zygote, key), []);
    });

    it("item 5: a task of another tenant cannot connect to a task's loopback or abstract-socket listener", async () => {
      const port = 20_000 + Math.floor(Math.random() * 20_000);
      const name = `sluice-attack-${randomBytes(6).toString("hex")}`;
      const started = await server.call("POST", "/script/external/listener/run?path=/s", {
        headers: one,
        body: { port, name },
      });
      assert.equal(started.body.status, true, started.text);
      const taskId = started.body.data as string;
      // Its working directory is a tmpfs of its own, seen only in its mount namespace: reach it
      // through the working directory of its process, the one where it said it listens.
      let dir = "";
      await until("the listener listens", () => {
        dir = taskDirWith("listening") ?? "";
        return dir !== "";
      });

      const attempt = await run(server, two, "connector", { port, name });

      fs.writeFileSync(path.join(dir, "stop"), "");
      const listened = await server.call("GET", `/script/script/result/${taskId}?timeout=30`, {
        headers: one,
      });
      assert.equal(listened.body.status, true, listened.text);
      assert.deepEqual(listened.body.data.accepted, [], "the listener accepted nothing");
      const refused = {
        tcp: "ConnectionRefusedError",
        unix: "ConnectionRefusedError",
        sockets: [],
      };
      assert.deepEqual({ ...attempt, net: undefined }, { ...refused, net: undefined });

      // Network namespaces are reused once the task that had one is confirmed gone
      // (docs/security.md): the task that gets the listener's finds nothing of it there, not
      // even its closed connection in TIME_WAIT.
      const net = listened.body.data.net as string;
      let later: { net: string; tcp: string; unix: string; sockets: string[][] } | undefined;
      // Each connector is a real task: the namespace comes back once the listener's child is
      // reaped, and reaches a task after the children forked before it (a loaded CI machine
      // once took more than 50 tasks; 300 is a bound, not a wait).
      for (let i = 0; i < 300 && later?.net !== net; i++)
        later = await run(server, two, "connector", { port, name });
      assert.equal(later?.net, net, "a later task got the listener's network namespace");
      assert.deepEqual({ ...later, net: undefined }, { ...refused, net: undefined });
    });

    it("item 8: a task sees only its own processes, not the host's nor the service's", async () => {
      const r = await run(server, one, "processes", {});
      assert.deepEqual(
        Object.keys(r.seen).sort(),
        [String(r.self), String(r.child)].sort(),
        JSON.stringify(r.seen).slice(0, 2000),
      );
      assert.equal(r.seen[String(r.child)], "sleep 30");
      assert.equal(r.self, 1, "the first process of a pid namespace of its own");
    });

    it("item 8: a task cannot create a user namespace (clone3, clone, unshare), and holds no capability", async () => {
      const r = await run(server, one, "userns", {});
      assert.notEqual(r.uid, 0);
      assert.equal(r.clone3, "ENOSYS", "clone3 answers ENOSYS, so libc falls back to clone");
      assert.equal(r.clone, "EPERM");
      assert.notEqual(r["unshare(1)"], 0, "util-linux unshare --user fails");
      assert.equal(r.unshare, "EPERM");
      assert.equal(r.fork, 7, "fork still works");
      assert.equal(r.true, 0, "subprocess still works");
      assert.deepEqual(r.status, {
        CapEff: "0000000000000000",
        CapPrm: "0000000000000000",
        CapInh: "0000000000000000",
        CapAmb: "0000000000000000",
        NoNewPrivs: "1",
      });
    });

    // Only against the zygote's: the kernel reuses a freed namespace's number at once, so two
    // tasks one after the other may show the same number for different IPC namespaces.
    it("no task is in the zygote's IPC or network namespace", async () => {
      const zygote = zygoteOf(server);
      const a = await run(server, one, "ns", {});
      const b = await run(server, two, "ns", {});
      for (const kind of ["ipc", "net"] as const) {
        const z = fs.readlinkSync(`/proc/${zygote}/ns/${kind}`);
        assert.notEqual(a[kind], z, kind);
        assert.notEqual(b[kind], z, kind);
      }
    });
  });
}

describe("with SCRIPT_NETWORK=true tasks keep the shared network, and still get their own IPC", {
  skip: process.getuid?.() !== 0 && "per-task uids and namespaces need root",
}, () => {
  let server: TestServer;
  before(async () => {
    server = await startServer({ SCRIPT_NETWORK: "true" });
    await seed(server);
  });
  after(() => server.close());

  it("own IPC namespace, the zygote's network namespace", async () => {
    const zygote = zygoteOf(server);
    const a = await run(server, one, "ns", {});
    const b = await run(server, two, "ns", {});
    assert.notEqual(a.ipc, fs.readlinkSync(`/proc/${zygote}/ns/ipc`));
    assert.notEqual(b.ipc, fs.readlinkSync(`/proc/${zygote}/ns/ipc`));
    assert.equal(a.net, fs.readlinkSync(`/proc/${zygote}/ns/net`));
    assert.equal(b.net, a.net);
  });
});
