import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import fs from "node:fs";
import path from "node:path";
import type { Readable } from "node:stream";
import { after, describe, it } from "node:test";
import { chooseCgroups } from "../../src/scripts/cgroup-choice.ts";
import { CgroupFs, findCgroupFs } from "../../src/scripts/cgroup-fs.ts";
import { createTaskCgroups, type TaskCgroups } from "../../src/scripts/task-cgroups.ts";
import { line, pollUntil, within } from "../helpers/wait.ts";

/**
 * The per-task cgroups on their own (docs/security.md, "One cgroup per task"): real cgroups of
 * this host, real processes. Each describe uses a block name of its own under `sluice/`.
 */
const MiB = 1024 * 1024;
const quiet = { info() {}, warn() {}, error() {}, debug() {} };
const root = process.getuid?.() === 0;
const limits = { memoryBytes: 64 * MiB, processes: 16 };
let blocks = 0;
const block = () => `test-${process.pid}-${++blocks}`;

/** Block `name`'s directories that still exist, in every hierarchy in use (v1 or v2). */
function leftDirs(name: string): string[] {
  const found = findCgroupFs("/sys/fs/cgroup", `sluice/${name}`);
  assert.ok("fs" in found, "problem" in found ? found.problem : "");
  return found.fs.dirs("").filter((d) => fs.existsSync(d));
}

/** A Python process that runs `code` once it reads a line: after the test put it in a cgroup. */
function python(code: string): {
  proc: ChildProcess;
  go(): void;
  /** Its stdout so far. */
  text(): string;
  /** Its stdout once it exited. */
  out: Promise<string>;
} {
  const proc = spawn(
    "/usr/bin/python3",
    ["-I", "-c", `import sys\nsys.stdin.readline()\n${code}`],
    {
      stdio: ["pipe", "pipe", "inherit"],
    },
  );
  let out = "";
  proc.stdout?.setEncoding("utf8").on("data", (d: string) => {
    out += d;
  });
  return {
    proc,
    go: () => proc.stdin?.write("go\n"),
    text: () => out,
    out: new Promise((r) => proc.once("exit", () => r(out))),
  };
}

/** Forks, and the parent exits, without end: a new pid all the time (fork fails at pids.max). */
const RUNAWAY =
  "import os\nwhile True:\n    try:\n        if os.fork():\n            os._exit(0)\n" +
  "    except OSError:\n        pass\n";

/** The cgroup `pid` is in (its path in the memory hierarchy, or the v2 one). */
function cgroupOf(pid: number): string {
  const lines = fs.readFileSync(`/proc/${pid}/cgroup`, "utf8").split("\n");
  const line = lines.find((l) => /^\d+:memory:/.test(l)) ?? lines.find((l) => l.startsWith("0::"));
  return line?.slice(line.indexOf(":/") + 1) ?? "";
}

const alive = (pid: number): boolean => {
  try {
    return !fs.readFileSync(`/proc/${pid}/stat`, "utf8").includes(") Z ");
  } catch {
    return false;
  }
};
/**
 * State the kernel keeps (cgroup counters, a directory the runner removes in the background) that
 * nothing announces: read by the shared poll with a deadline.
 */
const until = (what: string, test: () => boolean, ms = 5000) =>
  pollUntil(test, (ok) => ok, what, { ms, everyMs: 10 });
/** Resolves when this test's own child exits (the kernel has reaped it: it is gone). */
const exited = (proc: ChildProcess) =>
  proc.exitCode !== null || proc.signalCode !== null
    ? Promise.resolve()
    : within(once(proc, "exit"), 5000, `process ${proc.pid} exits`);

describe("task cgroups", { skip: !root && "cgroups need root" }, () => {
  let cg: TaskCgroups;
  after(() => cg?.close());

  it("a task's daemon in a session of its own is killed with it; the cgroup is then reused", async () => {
    cg = await createTaskCgroups({
      mountRoot: "/sys/fs/cgroup",
      block: block(),
      limits,
      logger: quiet,
    });
    const daemon = python(
      "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n" +
        "        print(os.getpid(), flush=True)\n        time.sleep(60)\n    os._exit(0)\n" +
        "time.sleep(60)\n",
    );
    const pid = daemon.proc.pid as number;
    cg.bind(pid);
    const task = cg.take(pid);
    assert.equal(await task.ready, true);
    const where = cgroupOf(pid);
    assert.match(where, /\/sluice\/test-\d+-\d+\/t\d+$/);
    const started = line(daemon.proc.stdout as Readable, /^\d+$/);
    daemon.go();
    await started;
    const grandchild = Number(daemon.text().trim());
    assert.equal(cgroupOf(grandchild), where, "what the task starts is in its cgroup");
    assert.equal(await task.release(), true, "confirmed empty");
    assert.equal(alive(pid), false);
    assert.equal(alive(grandchild), false, "the daemon went with its task");

    // Back in the pool once its killed processes are reaped (they count until then).
    await cg.settled();
    const count = path.join("/sys/fs/cgroup/pids", where, "pids.current");
    assert.equal(fs.readFileSync(count, "utf8"), "0\n", "its killed processes were reaped");
    const next = python("");
    cg.bind(next.proc.pid as number);
    assert.equal(await cg.take(next.proc.pid as number).ready, true);
    assert.equal(cgroupOf(next.proc.pid as number), where, "an emptied cgroup is reused");
    next.go();
    await next.out;
  });

  it("a process that keeps forking new pids is stopped and killed", async () => {
    const runaway = python(RUNAWAY);
    const pid = runaway.proc.pid as number;
    cg.bind(pid);
    const task = cg.take(pid);
    assert.equal(await task.ready, true);
    const where = cgroupOf(pid);
    runaway.go();
    await exited(runaway.proc); // forked on to new pids
    assert.equal(await task.release(), true);
    const procs = fs.readFileSync(
      path.join("/sys/fs/cgroup/freezer", where, "cgroup.procs"),
      "utf8",
    );
    assert.equal(procs, "");
  });

  it("memory binds all the processes together, and a kill for memory is told apart", async () => {
    const hog = python(
      "import os, time\nfor _ in range(3):\n    if os.fork() == 0:\n" +
        "        b = b'x' * (40 << 20)\n        time.sleep(60)\ntime.sleep(60)\n",
    );
    const pid = hog.proc.pid as number;
    cg.bind(pid);
    const task = cg.take(pid);
    assert.equal(await task.ready, true);
    assert.equal(task.oomKilled(), false);
    hog.go();
    await until("a process of the task is killed for memory", () => task.oomKilled());
    assert.equal(await task.release(), true);
  });

  it("a process count binds the task", async () => {
    const forks = python(
      "import os, time\nn = 0\ntry:\n    for _ in range(40):\n        if os.fork() == 0:\n" +
        "            time.sleep(60)\n        n += 1\nexcept OSError as e:\n    print(n, e.errno, flush=True)\n",
    );
    const pid = forks.proc.pid as number;
    cg.bind(pid);
    const task = cg.take(pid);
    assert.equal(await task.ready, true);
    forks.go();
    const [n, errno] = (await forks.out).trim().split(" ").map(Number);
    assert.equal(errno, 11, "EAGAIN");
    assert.equal(n, limits.processes - 1, "the process itself counts");
    assert.equal(await task.release(), true);
  });

  it("a cgroup still charged with shared memory a task left is never given to another", async () => {
    const file = `/dev/shm/sluice-test-${process.pid}`;
    const leaver = python(`open(${JSON.stringify(file)}, "wb").write(b"x" * (8 << 20))\n`);
    const pid = leaver.proc.pid as number;
    cg.bind(pid);
    const task = cg.take(pid);
    assert.equal(await task.ready, true);
    const dir = path.join("/sys/fs/cgroup/memory", cgroupOf(pid));
    leaver.go();
    await leaver.out;
    try {
      assert.equal(await task.release(), true, "the process is gone");
      await until("the charged cgroup is retired", () => !fs.existsSync(dir));
    } finally {
      fs.rmSync(file, { force: true });
    }
  });
});

describe("task cgroups across lives of a block", { skip: !root && "cgroups need root" }, () => {
  it("start-up kills what an earlier life left in the block's cgroups", async () => {
    const name = block();
    const first = await createTaskCgroups({
      mountRoot: "/sys/fs/cgroup",
      block: name,
      limits,
      logger: quiet,
    });
    const left = python("import time\ntime.sleep(60)\n");
    const pid = left.proc.pid as number;
    first.bind(pid);
    assert.equal(await first.take(pid).ready, true);
    // `first` is never closed: its service died.
    const second = await createTaskCgroups({
      mountRoot: "/sys/fs/cgroup",
      block: name,
      limits,
      logger: quiet,
    });
    await left.out;
    assert.equal(alive(pid), false);
    await second.close();
    assert.deepEqual(leftDirs(name), [], "removed at close");
  });
});

describe("a zygote held in its block's cgroup", { skip: !root && "cgroups need root" }, () => {
  it("start-up kills a zygote an earlier life left, and what it forked after it was held", async () => {
    const name = block();
    const first = await createTaskCgroups({
      mountRoot: "/sys/fs/cgroup",
      block: name,
      limits,
      logger: quiet,
    });
    // As a zygote orphaned by a killed service: it forks once it joined, and is never closed.
    const zygote = python(
      "import os, time\nif os.fork() == 0:\n    print(os.getpid(), flush=True)\ntime.sleep(60)\n",
    );
    const procs = first.zygoteProcs();
    assert.ok(procs);
    fs.writeFileSync(procs, String(zygote.proc.pid)); // as its shell joins it before it starts
    zygote.go();
    const forked = Number(await line(zygote.proc.stdout as Readable, /^\d+$/));
    assert.equal(alive(forked), true);
    const second = await createTaskCgroups({
      mountRoot: "/sys/fs/cgroup",
      block: name,
      limits,
      logger: quiet,
    });
    await zygote.out;
    await pollUntil(
      () => alive(forked),
      (a) => !a,
      "the zygote's child killed",
    );
    // This life's own zygotes cgroup, and something in it at its close: killed and removed too.
    const again = python("import time\ntime.sleep(60)\n");
    fs.writeFileSync(second.zygoteProcs() as string, String(again.proc.pid));
    await second.close();
    await within(again.out, 5000, "the process in the zygotes cgroup killed at close");
    assert.deepEqual(leftDirs(name), [], "removed at close");
  });
});

/** cgroup v2's kill (cgroup.kill), on this host's v2 hierarchy even without controllers in it. */
function v2Mount(): string | undefined {
  const table = fs.readFileSync("/proc/self/mountinfo", "utf8").split("\n");
  return table.map((l) => l.split(" ")).find((f) => f[f.indexOf("-") + 1] === "cgroup2")?.[4];
}

describe("cgroup v2 kill", {
  skip: (!root || !v2Mount()) && "needs root and a cgroup2 mount",
}, () => {
  it("cgroup.kill empties the cgroup, forks and all", async () => {
    const mount = v2Mount() as string;
    const parent = `sluice-test-${process.pid}`;
    const v2 = new CgroupFs("v2", [["", mount]], parent);
    fs.mkdirSync(v2.dirs("t0")[0] as string, { recursive: true });
    const runaway = python(RUNAWAY);
    fs.writeFileSync(v2.joinFiles("t0")[0] as string, String(runaway.proc.pid));
    runaway.go();
    await exited(runaway.proc); // forked on to new pids
    try {
      assert.equal(await v2.killAll("t0"), true);
      assert.deepEqual(v2.pids("t0"), []);
    } finally {
      v2.remove("t0");
      v2.remove("");
    }
  });
});

describe("where no cgroup can be created", () => {
  const python = { cgroupRoot: "/nonexistent", memoryBytes: 64 * MiB, processes: 16 };

  it("auto refuses tasks, naming the cause and the fix", () => {
    const c = chooseCgroups({ ...python, cgroup: "auto" }, quiet);
    assert.equal(c.kind, "refused");
    assert.match(c.refusal ?? "", /no cgroup v2 .* is mounted under \/nonexistent/);
    assert.match(c.refusal ?? "", /SCRIPT_CGROUP=off/);
  });

  it("required does not start; off is the operator's acceptance", () => {
    assert.throws(
      () => chooseCgroups({ ...python, cgroup: "required" }, quiet),
      /SCRIPT_CGROUP=required/,
    );
    assert.equal(chooseCgroups({ ...python, cgroup: "off" }, quiet).kind, "off");
  });
});
