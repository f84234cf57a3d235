import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { type Readable, Writable } from "node:stream";
import { after, before, describe, it } from "node:test";
import pino from "pino";
import { scopeHeaders, startServer, type TestServer, upload } from "../helpers/server.ts";
import { line, pollUntil } from "../helpers/wait.ts";
import { writeWheel } from "../helpers/wheels.ts";

/**
 * Wheels a hostile index could serve (docs/security.md, "What runs as root"): installing them
 * runs none of their code, and neither may starting the zygote of their environment, which is root
 * inside the sandbox (or on the host with SCRIPT_SANDBOX=none) whether or not it preloads.
 */
function hostileWheels(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), "sluice-hostile-"));
  writeWheel(dir, {
    name: "sluice-startup",
    version: "1.0",
    topLevel: ["sluice_startup"],
    files: {
      "sluice_startup/__init__.py": "VALUE = 1\n",
      // site executes an `import` line of a .pth file when the interpreter starts.
      "sluice_startup.pth": "import sys; sys.sluice_pth_ran = True\n",
      "sitecustomize.py": "import sys\nsys.sluice_sitecustomize_ran = True\n",
      "usercustomize.py": "import sys\nsys.sluice_usercustomize_ran = True\n",
      // The zygote imports seccomp to deny user namespaces to every task: a fake one denies none.
      "seccomp.py": [
        "import sys",
        "sys.sluice_fake_seccomp = True",
        "ALLOW = MASKED_EQ = NE = 0",
        "def ERRNO(e): return 0",
        "def Arg(*a): return 0",
        "class SyscallFilter:",
        "    def __init__(self, *a): pass",
        "    def add_rule(self, *a): pass",
        "    def load(self): pass",
        "",
      ].join("\n"),
    },
  });
  // A wheel's scripts land in the environment's bin/: this one replaces its `python`.
  writeWheel(dir, {
    name: "sluice-interp",
    version: "1.0",
    topLevel: ["sluice_interp"],
    files: {
      "sluice_interp/__init__.py": "VALUE = 2\n",
      "sluice_interp-1.0.data/scripts/python":
        '#!/bin/sh\nexec /usr/bin/python3 -X sluice_owned "$@"\n',
    },
    executable: ["sluice_interp-1.0.data/scripts/python"],
  });
  return dir;
}

const probe = (project: string, module: string) => `# /// script
# dependencies = ["${project}"]
# ///
import ctypes, sys
import ${module}

def main():
    libc = ctypes.CDLL(None, use_errno=True)
    userns = "allowed" if libc.unshare(0x10000000) == 0 else "denied"
    return {
        "value": ${module}.VALUE,
        "pth": getattr(sys, "sluice_pth_ran", False),
        "sitecustomize": getattr(sys, "sluice_sitecustomize_ran", False),
        "usercustomize": getattr(sys, "sluice_usercustomize_ran", False),
        "fakeSeccomp": getattr(sys, "sluice_fake_seccomp", False),
        "xoptions": sorted(sys._xoptions),
        "userns": userns,
    }
`;

const clean = {
  pth: false,
  sitecustomize: false,
  usercustomize: false,
  fakeSeccomp: false,
  xoptions: [],
  userns: "denied",
};

async function runSync(server: TestServer, name: string) {
  const r = await server.call("POST", `/script/external/${name}/run-sync`, {
    headers: scopeHeaders(),
    body: {},
  });
  return { status: r.headers.get("x-task-status"), body: r.body };
}

for (const preload of ["false", "true"]) {
  describe(`a hostile wheel's environment (SCRIPT_ENV_PRELOAD=${preload})`, () => {
    let server: TestServer;
    let wheels: string;
    before(async () => {
      wheels = hostileWheels();
      server = await startServer({
        PIP_NO_INDEX: "1",
        PIP_FIND_LINKS: wheels,
        SCRIPT_ENV_PRELOAD: preload,
      });
    });
    after(async () => {
      await server.close();
      rmSync(wheels, { recursive: true, force: true });
    });

    it("runs no .pth, sitecustomize or fake seccomp of it in the zygote", async () => {
      const src = probe("sluice-startup", "sluice_startup");
      const r = await upload(server, [{ name: "startup.py", content: src }], { path: "/h" });
      assert.equal(r.body.data[0].status, 0, r.text);
      const run = await runSync(server, "startup");
      assert.equal(run.status, "SUCCESS", JSON.stringify(run.body));
      assert.deepEqual(run.body, { value: 1, ...clean });
    });

    it("starts the zygote with the service's interpreter, not one a wheel put in bin/", async () => {
      const src = probe("sluice-interp", "sluice_interp");
      const r = await upload(server, [{ name: "interp.py", content: src }], { path: "/h" });
      assert.equal(r.body.data[0].status, 0, r.text);
      const run = await runSync(server, "interp");
      assert.equal(run.status, "SUCCESS", JSON.stringify(run.body));
      assert.deepEqual(run.body, { value: 2, ...clean });
    });
  });
}

/**
 * What a package's import-time code tries when a zygote preloads it (docs/security.md, "What runs
 * as root"): each probe is an escape from the sandbox for code that is root in it. Probes that
 * would change the zygote itself run in a throwaway child.
 */
const PRELOAD_PROBE = `import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
R = {"pid": os.getpid()}

def in_child(fn):
    pid = os.fork()
    if pid == 0:
        try:
            os._exit(0 if fn() else 1)
        except BaseException:
            os._exit(1)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0

# Make the read-only /usr writable (MS_REMOUNT | MS_BIND): the host's files would follow.
R["remountUsr"] = in_child(lambda: libc.mount(None, b"/usr", None, 32 | 4096, None) == 0)

def write_tasks():
    path = "/tasks/.sluice-preload-probe"
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    os.unlink(path)
    return True

# The folder of every task's working directory, the host root's.
R["writeTasks"] = in_child(write_tasks)

def signal_init():
    os.kill(1, 0)
    return True

# The host's first process.
R["signalHostInit"] = in_child(signal_init)

def other_uid():
    os.setresuid(65534, 65534, 65534)
    return True

# A uid no task of this zygote has (nobody).
R["otherUid"] = in_child(other_uid)
R["hostPids"] = sorted(p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid())
R["userns"] = in_child(lambda: libc.unshare(0x10000000) == 0)

def host_mounts():
    fd = os.open("/proc/1/ns/mnt", os.O_RDONLY)
    return libc.setns(fd, 0) == 0

# Join the host's mount namespace.
R["hostMountNs"] = in_child(host_mounts)

# The cgroups its import runs in (memory and pids on v1, else the one of v2): what it starts is
# in them.
lines = [line.strip().split(":", 2) for line in open("/proc/self/cgroup")]
v1 = [path for _, ctl, path in lines if ctl in ("memory", "pids")]
R["cgroups"] = sorted(set(v1 or [path for _, ctl, path in lines if ctl == ""]))
`;

describe("a package's import-time code in a preloading zygote (the default)", () => {
  let server: TestServer;
  let wheels: string;
  before(async () => {
    wheels = mkdtempSync(path.join(os.tmpdir(), "sluice-preload-"));
    writeWheel(wheels, {
      name: "sluice-preload-probe",
      version: "1.0",
      topLevel: ["sluice_preload_probe"],
      files: { "sluice_preload_probe/__init__.py": PRELOAD_PROBE },
    });
    server = await startServer({ PIP_NO_INDEX: "1", PIP_FIND_LINKS: wheels });
  });
  after(async () => {
    await server.close();
    rmSync(wheels, { recursive: true, force: true });
  });

  it("runs in the zygote but can leave neither it nor its user namespace", async () => {
    const src = `# /// script
# dependencies = ["sluice-preload-probe"]
# ///
import os
import sluice_preload_probe as p

def main():
    r = dict(p.R)
    return {"preloaded": r.pop("pid") != os.getpid(), **r}
`;
    const r = await upload(server, [{ name: "preload_probe.py", content: src }], { path: "/h" });
    assert.equal(r.body.data[0].status, 0, r.text);
    const run = await runSync(server, "preload_probe");
    assert.equal(run.status, "SUCCESS", JSON.stringify(run.body));
    const { cgroups, ...rest } = run.body;
    // A cgroup of the runner's own, with a task's limits, not the service's (docs/security.md).
    assert.ok(cgroups.length > 0, JSON.stringify(cgroups));
    for (const cg of cgroups) assert.match(cg, /^\/sluice\/[^/]+\/t\d+$/);
    assert.deepEqual(rest, {
      preloaded: true,
      remountUsr: false,
      writeTasks: false,
      signalHostInit: false,
      otherUid: false,
      hostPids: [],
      userns: false,
      hostMountNs: false,
    });
  });
});

/** Pids of the live processes whose command line holds `mark`. */
function processesMarked(mark: string): number[] {
  return readdirSync("/proc")
    .filter((n) => /^\d+$/.test(n))
    .filter((n) => {
      try {
        return readFileSync(`/proc/${n}/cmdline`, "latin1").includes(mark);
      } catch {
        return false;
      }
    })
    .map(Number);
}

describe("what a preloaded package leaves running when its zygote stops", () => {
  const mark = `sluice-leftover-${process.pid}-${Date.now()}`;
  let server: TestServer;
  let wheels: string;
  before(async () => {
    wheels = mkdtempSync(path.join(os.tmpdir(), "sluice-linger-"));
    writeWheel(wheels, {
      name: "sluice-lingers",
      version: "1.0",
      topLevel: ["sluice_lingers"],
      // A daemon in a session of its own, without the parent-death signal, as the zygote's root.
      files: {
        "sluice_lingers/__init__.py": [
          "import os",
          "if os.fork() == 0:",
          "    os.setsid()",
          "    if os.fork() == 0:",
          `        os.execv("/usr/bin/python3", ["python3", "-c", "import time\\nwhile True: time.sleep(60)", "${mark}"])`,
          "    os._exit(0)",
          "os.wait()",
          "",
        ].join("\n"),
      },
    });
    writeWheel(wheels, {
      name: "sluice-other",
      version: "1.0",
      topLevel: ["sluice_other"],
      files: { "sluice_other/__init__.py": "VALUE = 3\n" },
    });
    // One zygote of an environment at a time: the second environment's takes the first's slice.
    server = await startServer({
      PIP_NO_INDEX: "1",
      PIP_FIND_LINKS: wheels,
      SCRIPT_ENV_ZYGOTES: "1",
    });
  });
  after(async () => {
    await server.close();
    rmSync(wheels, { recursive: true, force: true });
    for (const pid of processesMarked(mark)) process.kill(pid, "SIGKILL");
  });

  it("is killed before its uid slice serves another environment's zygote", async () => {
    const script = (project: string) =>
      `# /// script\n# dependencies = ["${project}"]\n# ///\ndef main():\n    return 1\n`;
    const files = [
      { name: "lingers.py", content: script("sluice-lingers") },
      { name: "other.py", content: script("sluice-other") },
    ];
    const r = await upload(server, files, { path: "/h" });
    assert.deepEqual(
      r.body.data.map((d: { status: number }) => d.status),
      [0, 0],
      r.text,
    );
    assert.equal((await runSync(server, "lingers")).status, "SUCCESS");
    await pollUntil(
      () => processesMarked(mark),
      (p) => p.length > 0,
      "the daemon started",
    );
    assert.equal((await runSync(server, "other")).status, "SUCCESS");
    await pollUntil(
      () => processesMarked(mark),
      (p) => p.length === 0,
      "the daemon killed",
    );
  });
});

describe("a preloaded package that reports another process as a child of its zygote", () => {
  let server: TestServer;
  let wheels: string;
  let victim: ChildProcess;
  before(async () => {
    // A host process outside every sandbox, holding pipes (fds 3-8): a stand-in for another
    // tenant's task or Node itself. The first holds a line shaped like a task's result.
    const hold = [
      "import os, sys, time",
      "a, b, c = os.pipe(), os.pipe(), os.pipe()",
      `os.write(a[1], b'${JSON.stringify({ ok: true, value: "stolen" })}\\n')`,
      "print(a, b, c, flush=True)",
      "time.sleep(3600)",
    ].join("\n");
    victim = spawn("/usr/bin/python3", ["-c", hold], { stdio: ["ignore", "pipe", "inherit"] });
    assert.equal(await line(victim.stdout as Readable, /\(/), "(3, 4) (5, 6) (7, 8)");
    wheels = mkdtempSync(path.join(os.tmpdir(), "sluice-forge-"));
    writeWheel(wheels, {
      name: "sluice-forge",
      version: "1.0",
      topLevel: ["sluice_forge"],
      // fd 1 of the zygote is its report pipe to Node: a forged `c` names the victim's pipes.
      files: {
        "sluice_forge/__init__.py": `import os\nos.write(1, b"c ${victim.pid} 6 3 7 7\\n")\n`,
      },
    });
    server = await startServer({ PIP_NO_INDEX: "1", PIP_FIND_LINKS: wheels });
  });
  after(async () => {
    await server.close();
    victim.kill("SIGKILL");
    rmSync(wheels, { recursive: true, force: true });
  });

  it("is not believed: its task runs in a child of the zygote, and the process is untouched", async () => {
    const src = `# /// script
# dependencies = ["sluice-forge"]
# ///
import sluice_forge

def main():
    return "genuine"
`;
    const r = await upload(server, [{ name: "forge.py", content: src }], { path: "/h" });
    assert.equal(r.body.data[0].status, 0, r.text);
    for (let i = 0; i < 2; i++) {
      const run = await runSync(server, "forge");
      assert.equal(run.status, "SUCCESS", JSON.stringify(run.body));
      assert.equal(run.body, "genuine");
    }
    assert.equal(victim.exitCode, null);
    assert.equal(victim.signalCode, null);
  });
});

/** The cgroup paths of process `pid` (memory and pids on v1, else the v2 one). */
function cgroupsOf(pid: number): string[] {
  const lines = readFileSync(`/proc/${pid}/cgroup`, "utf8").trim().split("\n");
  const parts = lines.map((l) => l.split(":"));
  const v1 = parts.filter(([, ctl]) => ctl === "memory" || ctl === "pids").map((p) => p[2]);
  return (v1.length > 0 ? v1 : parts.filter(([, ctl]) => ctl === "").map((p) => p[2])) as string[];
}

describe("a preloaded package that asks Node to hold another process in its cgroup", () => {
  let server: TestServer;
  let wheels: string;
  let victim: ChildProcess;
  before(async () => {
    // A host process outside every sandbox: a stand-in for Node, the database or another task.
    victim = spawn("sleep", ["3600"]);
    wheels = mkdtempSync(path.join(os.tmpdir(), "sluice-hold-"));
    writeWheel(wheels, {
      name: "sluice-hold",
      version: "1.0",
      topLevel: ["sluice_hold"],
      // The zygote's `hold PID` makes Node put PID in a cgroup of its own, later emptied by a kill.
      files: {
        "sluice_hold/__init__.py": `import os\nos.write(1, b"hold ${victim.pid}\\n")\n`,
      },
    });
    server = await startServer({ PIP_NO_INDEX: "1", PIP_FIND_LINKS: wheels });
  });
  after(async () => {
    await server.close();
    victim.kill("SIGKILL");
    rmSync(wheels, { recursive: true, force: true });
  });

  it("is not believed: the process stays in its own cgroup and alive", async () => {
    const before = cgroupsOf(victim.pid as number);
    const src = `# /// script
# dependencies = ["sluice-hold"]
# ///
import sluice_hold

def main():
    return "ran"
`;
    const r = await upload(server, [{ name: "hold.py", content: src }], { path: "/h" });
    assert.equal(r.body.data[0].status, 0, r.text);
    const run = await runSync(server, "hold");
    assert.deepEqual(run, { status: "SUCCESS", body: "ran" });
    assert.deepEqual(cgroupsOf(victim.pid as number), before);
    await server.close(); // every zygote stopped, every cgroup of the runner released
    assert.equal(victim.exitCode, null);
    assert.equal(victim.signalCode, null);
    server = await startServer({ PIP_NO_INDEX: "1", PIP_FIND_LINKS: wheels });
  });
});

describe("a preloaded package that ends its zygote as it is imported", () => {
  let server: TestServer;
  let wheels: string;
  before(async () => {
    wheels = mkdtempSync(path.join(os.tmpdir(), "sluice-crash-"));
    writeWheel(wheels, {
      name: "sluice-crash",
      version: "1.0",
      topLevel: ["sluice_crash"],
      files: { "sluice_crash/__init__.py": "import os\nos._exit(3)\n" },
    });
    writeWheel(wheels, {
      name: "sluice-warm",
      version: "1.0",
      topLevel: ["sluice_warm"],
      files: { "sluice_warm/__init__.py": "import os\nPID = os.getpid()\n" },
    });
    server = await startServer({ PIP_NO_INDEX: "1", PIP_FIND_LINKS: wheels });
  });
  after(async () => {
    await server.close();
    rmSync(wheels, { recursive: true, force: true });
  });

  it("runs its tasks on a plain zygote, and turns preloading off for no other environment", async () => {
    const crash = `# /// script
# dependencies = ["sluice-crash"]
# ///
def main():
    return "plain"
`;
    const warm = `# /// script
# dependencies = ["sluice-warm"]
# ///
import os
import sluice_warm

def main():
    return {"preloaded": sluice_warm.PID != os.getpid()}
`;
    const files = [
      { name: "crash.py", content: crash },
      { name: "warm.py", content: warm },
    ];
    const r = await upload(server, files, { path: "/h" });
    assert.deepEqual(
      r.body.data.map((d: { status: number }) => d.status),
      [0, 0],
      r.text,
    );
    const plain = await runSync(server, "crash");
    assert.equal(plain.status, "SUCCESS", JSON.stringify(plain.body));
    assert.equal(plain.body, "plain");
    const run = await runSync(server, "warm");
    assert.equal(run.status, "SUCCESS", JSON.stringify(run.body));
    assert.deepEqual(run.body, { preloaded: true });
  });
});

/** Its zygote reports every sweep of its tasks' uids as failed, and never a task's exit. */
const POISON = `import os
_write = os.write

def _forge(fd, data):
    if fd != 1:
        return _write(fd, data)
    lines = bytes(data).split(b"\\n")
    lines = [l[:-1] + b"1" if l.startswith(b"w ") else l for l in lines if not l.startswith(b"x ")]
    _write(fd, b"\\n".join(lines))
    return len(data)

os.write = _forge
`;

describe("a preloaded package whose zygote reports every sweep as failed", () => {
  let server: TestServer;
  let wheels: string;
  let logs = "";
  before(async () => {
    wheels = mkdtempSync(path.join(os.tmpdir(), "sluice-poison-"));
    writeWheel(wheels, {
      name: "sluice-poison",
      version: "1.0",
      topLevel: ["sluice_poison"],
      files: { "sluice_poison/__init__.py": POISON },
    });
    writeWheel(wheels, {
      name: "sluice-next",
      version: "1.0",
      topLevel: ["sluice_next"],
      files: { "sluice_next/__init__.py": "VALUE = 4\n" },
    });
    const sink = new Writable({
      write(chunk, _enc, done) {
        logs += String(chunk);
        done();
      },
    });
    // One task at a time, one environment's zygote: a slice of two task uids, which the next
    // environment's zygote gets once this one stops.
    server = await startServer(
      {
        PIP_NO_INDEX: "1",
        PIP_FIND_LINKS: wheels,
        SCRIPT_CONCURRENCY: "1",
        SCRIPT_ENV_ZYGOTES: "1",
      },
      { logger: pino({ level: "error" }, sink) },
    );
  });
  after(async () => {
    await server.close();
    rmSync(wheels, { recursive: true, force: true });
  });

  it("leaves no uid of its slice unusable for the next environment's zygote", async () => {
    const script = (project: string, module: string) =>
      `# /// script\n# dependencies = ["${project}"]\n# ///\nimport ${module}\n\ndef main():\n    return "${module}"\n`;
    const files = [
      { name: "poison.py", content: script("sluice-poison", "sluice_poison") },
      { name: "next.py", content: script("sluice-next", "sluice_next") },
    ];
    const r = await upload(server, files, { path: "/h" });
    assert.deepEqual(
      r.body.data.map((d: { status: number }) => d.status),
      [0, 0],
      r.text,
    );
    const retired = () => logs.split("task leftovers not confirmed dead").length - 1;
    for (let i = 1; i <= 2; i++) {
      assert.equal((await runSync(server, "poison")).body, "sluice_poison");
      await pollUntil(retired, (n) => n >= i, "the forged sweep failure");
    }
    const run = await runSync(server, "next");
    assert.equal(run.status, "SUCCESS", JSON.stringify(run.body));
    assert.equal(run.body, "sluice_next");
  });
});
