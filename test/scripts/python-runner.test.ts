import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { loadConfig } from "../../src/config.ts";
import { createPythonRunner, type PythonRunner } from "../../src/scripts/python-runner.ts";
import type { TaskStep } from "../../src/scripts/python-runner-run.ts";
import type { TaskOutcome, TaskSpec } from "../../src/scripts/runner-types.ts";
import { pollUntil } from "../helpers/wait.ts";

const FIXTURES = path.join(import.meta.dirname, "../fixtures/python");
const OUTPUT_CAP = 1000;
const RESULT_CAP = 64 * 1024;
const MiB = 1024 * 1024;
const FILE_CAP = 16 * MiB;
const quiet = { info() {}, warn() {}, error() {}, debug() {} };

let runner: PythonRunner;
let dataDir: string;
let seq = 0;

function fixture(name: string): Uint8Array {
  return readFileSync(path.join(FIXTURES, `${name}.py`));
}

function zipOf(dir: string): Uint8Array {
  const py =
    "import io,shutil,sys,os;b=shutil.make_archive(sys.argv[2],'zip',sys.argv[1]);print(b)";
  const base = path.join(dataDir, `zip-${++seq}`);
  const out = execFileSync("/usr/bin/python3", ["-I", "-c", py, path.join(FIXTURES, dir), base]);
  return readFileSync(out.toString().trim());
}

function run(name: string, parameter: unknown = null, extra: Partial<TaskSpec> = {}) {
  return runner.run({
    taskId: `t${++seq}`,
    source: { name, kind: "module", content: fixture(name) },
    parameter,
    ...extra,
  });
}

function assertSuccess(o: TaskOutcome, value: unknown): void {
  assert.equal(o.status, "SUCCESS", JSON.stringify(o.error));
  assert.deepEqual(o.value, value);
}

/** Live host processes running `sleep <mark>`: a task's process, found by its command line. */
const sleeping = (mark: string): string[] =>
  readdirSync("/proc").filter((n) => {
    try {
      return readFileSync(`/proc/${n}/cmdline`, "utf8") === `sleep\0${mark}\0` && alive(Number(n));
    } catch {
      return false;
    }
  });

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return !readFileSync(`/proc/${pid}/stat`, "utf8").includes(") Z ");
  } catch {
    return false;
  }
};
/**
 * Resolves once `cond` holds (a state of the runner, or of processes and files it keeps, which it
 * announces to nobody), instead of guessing a delay: the shared poll; fails after `ms`.
 */
const until = (cond: () => boolean, what: string, ms = 10_000) =>
  pollUntil(cond, (ok) => ok, what, { ms, everyMs: 10 });
/** Work dirs are removed in the background once the outcome is out. */
const gone = (p: string): Promise<boolean> =>
  until(() => !existsSync(p), `${p} removed`, 1000).then(
    () => true,
    () => false,
  );

before(async () => {
  dataDir = await mkdtemp(path.join(os.tmpdir(), "sluice-pyrunner-"));
  // SCRIPT_SANDBOX=none runs the same suite in the uid-only fallback.
  const cfg = loadConfig({ SCRIPT_SANDBOX: process.env.SCRIPT_SANDBOX });
  runner = await createPythonRunner({
    config: {
      python: {
        ...cfg.python,
        prefork: 2,
        concurrency: 4,
        memoryBytes: 512 * MiB,
        fileSizeBytes: FILE_CAP,
      },
      limits: { outputBytes: OUTPUT_CAP, resultBytes: RESULT_CAP, maxRunS: 60 },
      dataDir,
    },
    logger: quiet,
  });
});

after(async () => {
  await runner?.close();
  await rm(dataDir, { recursive: true, force: true });
});

describe("return values and main conventions", () => {
  test("dict, list, tuple→list, datetime and date→ISO, None", async () => {
    assertSuccess(await run("values", "dict"), { a: 1, b: [1, 2] });
    assertSuccess(await run("values", "list"), [1, "x", null]);
    assertSuccess(await run("values", "tuple"), [1, [2, 3]]);
    assertSuccess(await run("values", "datetime"), "2024-05-06T07:08:09");
    assertSuccess(await run("values", "date"), "2024-05-06");
    assertSuccess(await run("values", "none"), null);
    assertSuccess(await run("echo", { nested: ["é", 1.5, true] }), { nested: ["é", 1.5, true] });
  });

  test("main(), main(p), main(**p) and async main", async () => {
    assertSuccess(await run("no_args", { ignored: 1 }), "no-args");
    assertSuccess(await run("echo", 42), 42);
    assertSuccess(await run("kwargs", { a: 4, b: 7 }), 47);
    assertSuccess(await run("kwargs", { a: 4 }), 42);
    assertSuccess(await run("async_main", "x"), { got: "x", loop: true });
    assertSuccess(await run("sync_loop"), "no loop");
  });

  test("sys.argv is the script's own, as `python argv.py` gives it: no zygote flags", async () => {
    assertSuccess(await run("argv"), ["argv.py"]);
  });

  test("main's signature is read through decorators and from callable objects", async () => {
    // functools.wraps: the wrapper takes (*args, **kwargs), the declared signature is (a, b).
    assertSuccess(await run("wrapped_main", { a: 4, b: 2 }), ["wrapped", 42]);
    assertSuccess(await run("callable_main", { a: 1, b: 2 }), { a: 1, b: 2 });
  });

  test("non-serialisable return fails naming the type and where it is", async () => {
    const o = await run("bad_return");
    assert.equal(o.status, "FAILURE");
    assert.equal(o.error?.type, "TypeError");
    assert.equal(o.error?.message, "return value.ok: Object of type set is not JSON serializable");
    const nan = await run("nan_return");
    assert.equal(nan.error?.type, "ValueError");
    assert.equal(
      nan.error?.message,
      "return value.rows.1.score is nan: Out of range float values are not JSON compliant",
    );
    // A value that holds itself: named at once, not searched until the task's time limit.
    const cyclic = await run("cyclic_return", null, { timeoutMs: 10_000 });
    assert.equal(cyclic.error?.type, "ValueError", JSON.stringify(cyclic.error));
    assert.equal(
      cyclic.error?.message,
      "return value.rows.1 holds itself: Circular reference detected",
    );
  });

  test("exception → FAILURE with type, message and a traceback showing the line", async () => {
    const o = await run("raises", 7);
    assert.equal(o.status, "FAILURE");
    assert.equal(o.error?.type, "ValueError");
    assert.equal(o.error?.message, "bad value 7");
    assert.match(o.error?.traceback ?? "", /raises\.py", line 2/);
    assert.match(o.error?.traceback ?? "", /raise ValueError\("bad value "/);
    assert.doesNotMatch(o.error?.traceback ?? "", /zygote\.py/);
  });

  test("sys.exit(0) is SUCCESS null, sys.exit(2) FAILURE", async () => {
    assertSuccess(await run("sys_exit", 0), null);
    const o = await run("sys_exit", 2);
    assert.equal(o.status, "FAILURE");
    assert.match(o.error?.message ?? "", /code 2/);
  });

  test("sys.exit(text): the text is in the message, as Python prints it to stderr", async () => {
    const o = await run("sys_exit", "no orders to score");
    assert.equal(o.status, "FAILURE");
    assert.equal(o.error?.message, "script exited with code 1: no orders to score");
    assert.equal(o.stderr, "no orders to score\n");
  });

  test("an async main's traceback starts at the script: no harness or asyncio frame", async () => {
    const o = await run("async_raises", 7);
    assert.equal(o.status, "FAILURE");
    assert.equal(o.error?.message, "async bad 7");
    const text = o.error?.traceback ?? "";
    assert.match(
      text,
      /^Traceback \(most recent call last\):\n {2}File "async_raises\.py", line 10, in main\n/,
    );
    assert.match(text, /File "async_raises\.py", line 6, in check/);
    assert.doesNotMatch(text, /harness|asyncio/);
  });
});

describe("output", () => {
  test("stdout and stderr apart, including unflushed text without newline", async () => {
    const o = await run("output");
    assertSuccess(o, 1);
    assert.equal(o.stdout, "out line\nraw fd1\nno newline");
    assert.equal(o.stderr, "err line\nerr tail");
  });

  test("each stream is capped with a truncation note", async () => {
    const o = await run("big_output", 5000);
    assertSuccess(o, null);
    for (const [text, ch] of [
      [o.stdout, "x"],
      [o.stderr, "y"],
    ] as const) {
      assert.ok(text.startsWith(ch.repeat(OUTPUT_CAP)));
      assert.ok(!text.includes(ch.repeat(OUTPUT_CAP + 1)));
      assert.match(text, /truncated: 4000 more bytes/);
    }
  });
});

describe("floods: what a task sends is read within bounds (issue 12)", () => {
  const rss = () => process.memoryUsage().rss;
  /** Floods `to` with `mb` MiB; the service must answer fast, kill the task and not grow. */
  async function flood(to: string, mb: number) {
    const before = rss();
    const t0 = Date.now();
    const o = await run("flood", { to, mb });
    return { o, ms: Date.now() - t0, grew: rss() - before };
  }

  test("a result line of 300 MiB without newline: killed, ResultTooLarge, no memory growth", async () => {
    const { o, ms, grew } = await flood("result", 300);
    assert.equal(o.status, "FAILURE", JSON.stringify(o));
    assert.equal(o.error?.type, "ResultTooLarge");
    assert.match(o.error?.message ?? "", /over the 65536 byte limit.*was killed/);
    assert.ok(ms < 10_000, `took ${ms} ms`);
    assert.ok(grew < 64 * MiB, `rss grew by ${grew} bytes`);
    assertSuccess(await run("echo", "still up"), "still up");
  });

  for (const to of ["stdout", "stderr"] as const) {
    test(`${to} flood of 300 MiB: kept output capped, killed past the drain cap, no growth`, async () => {
      const { o, ms, grew } = await flood(to, 300);
      assert.equal(o.status, "FAILURE", JSON.stringify(o.error));
      assert.equal(o.error?.type, "OutputTooLarge");
      assert.match(o.error?.message ?? "", new RegExp(`^${to} passed \\d+ bytes`));
      const text = to === "stdout" ? o.stdout : o.stderr;
      assert.ok(text.startsWith("x".repeat(OUTPUT_CAP)));
      assert.ok(!text.includes("x".repeat(OUTPUT_CAP + 1)));
      assert.match(text, /output truncated/);
      assert.ok(ms < 15_000, `took ${ms} ms`);
      assert.ok(grew < 64 * MiB, `rss grew by ${grew} bytes`);
      assertSuccess(await run("echo", "still up"), "still up");
    });
  }

  test("output past the cap but under the drain cap is still only truncated", async () => {
    const o = await run("flood", { to: "stdout", mb: 2 });
    assertSuccess(o, "the service read it all");
    assert.match(o.stdout, new RegExp(`truncated: ${2 * MiB - OUTPUT_CAP} more bytes`));
  });

  test("a result at the limit works, non-ASCII text included (sent as UTF-8, not \\u escapes)", async () => {
    // JSON text of exactly RESULT_CAP bytes; as \u escapes it would be past the margin.
    const p = { json_bytes: RESULT_CAP, two_byte_chars: 20_000 };
    const o = await run("sized_result", p);
    assert.equal(o.status, "SUCCESS", JSON.stringify(o.error));
    assert.equal(Buffer.byteLength(JSON.stringify(o.value)), RESULT_CAP);
    assert.ok((o.value as string).startsWith("é".repeat(20_000)));
  });

  test("a lone surrogate still comes back (escaped on the wire)", async () => {
    const o = await runner.run({
      taskId: `t${++seq}`,
      source: {
        name: "lone",
        kind: "module",
        content: Buffer.from("def main():\n    return '\\ud800a'\n"),
      },
      parameter: null,
    });
    assertSuccess(o, "\ud800a");
  });

  test("output and a result line sent one byte at a time are put together", async () => {
    const source =
      "import os, stat, time\n" +
      "def main():\n" +
      "    for _ in range(3000):\n" +
      "        os.write(1, b'x')\n" +
      "    fd = next(f for f in range(3, 256) if _fifo(f))\n" +
      '    for c in \'{"ok":true,"value":"bytewise é"}\\n\'.encode():\n' +
      "        os.write(fd, bytes([c]))\n" +
      "        time.sleep(0.0005)\n" +
      "    os._exit(0)\n" +
      "def _fifo(f):\n" +
      "    try:\n" +
      "        return stat.S_ISFIFO(os.fstat(f).st_mode)\n" +
      "    except OSError:\n" +
      "        return False\n";
    const o = await runner.run({
      taskId: `t${++seq}`,
      source: { name: "bytewise", kind: "module", content: Buffer.from(source) },
      parameter: null,
    });
    assertSuccess(o, "bytewise é");
    assert.equal(
      o.stdout,
      `${"x".repeat(OUTPUT_CAP)}\n[output truncated: 2000 more bytes discarded]\n`,
    );
  });

  test("a result line that is not a message, or a truncated one, fails as a protocol error", async () => {
    const forged = (line: string) =>
      runner.run({
        taskId: `t${++seq}`,
        source: {
          name: "forged",
          kind: "module",
          content: Buffer.from(
            "import os, stat\n" +
              "def main(p):\n" +
              "    fd = next(f for f in range(3, 256) if _fifo(f))\n" +
              "    os.write(fd, p.encode())\n" +
              "    os._exit(0)\n" +
              "def _fifo(f):\n" +
              "    try:\n" +
              "        return stat.S_ISFIFO(os.fstat(f).st_mode)\n" +
              "    except OSError:\n" +
              "        return False\n",
          ),
        },
        parameter: line,
      });
    for (const line of ["5\n", "null\n", '{"ok":false,"error":7}\n', "[1]\n", '{"ok":tr\n'])
      assert.equal((await forged(line)).error?.type, "ProtocolError", line);
    assertSuccess(await forged('{"ok":true,"value":"mine"}\n'), "mine");
  });
});

describe("fresh state per run", () => {
  test("module globals and os.environ start fresh every run", async () => {
    for (let i = 0; i < 3; i++) assertSuccess(await run("counter"), { count: 1, leaked: null });
  });

  test("random numbers differ from task to task: each child re-seeds after its fork", async () => {
    const content = Buffer.from(
      "import random\ndef main(p):\n    return [str(random.getrandbits(64)), random.random()]\n",
    );
    const seen = new Set<string>();
    for (let i = 0; i < 4; i++) {
      const o = await runner.run({
        taskId: `t${++seq}`,
        source: { name: "rnd", kind: "module", content },
        parameter: null,
      });
      assert.equal(o.status, "SUCCESS", JSON.stringify(o.error));
      seen.add(JSON.stringify(o.value));
    }
    assert.equal(seen.size, 4, [...seen].join(" "));
  });

  test("module is in sys.modules under its name (pickle finds its functions)", async () => {
    assertSuccess(await run("pickle_fn", 21), { module: "pickle_fn", registered: true, v: 42 });
  });

  test("zip packages: main.py at the root or in a single top folder, siblings importable", async () => {
    for (const dir of ["pkg_root", "pkg_nested"]) {
      const o = await runner.run({
        taskId: `t${++seq}`,
        source: { name: "mypackage", kind: "package", content: zipOf(dir) },
        parameter: 5,
      });
      assertSuccess(o, { doubled: 10, name: "mypackage" });
    }
  });

  test("a package's own harness.py is the one it imports, its frames in its traceback", async () => {
    const task = (parameter: unknown) =>
      runner.run({
        taskId: `t${++seq}`,
        source: { name: "mypackage", kind: "package", content: zipOf("pkg_harness") },
        parameter,
      });
    assertSuccess(await task(null), "the package's own harness");
    const o = await task("raise");
    assert.equal(o.error?.message, "raised in the package's harness.py", JSON.stringify(o.error));
    assert.match(o.error?.traceback ?? "", /main\.py", line 6/);
    assert.match(o.error?.traceback ?? "", /harness\.py", line 5, in fail/);
    assert.deepEqual(
      o.error?.frames?.map((f) => f.file),
      ["main.py", "harness.py"],
    );
  });
});

describe("kills and limits", () => {
  test("timeout kills a busy loop", async () => {
    const t0 = Date.now();
    const o = await run("spin", null, { timeoutMs: 300 });
    assert.equal(o.status, "FAILURE");
    assert.equal(o.error?.type, "Timeout");
    assert.ok(Date.now() - t0 < 3000);
  });

  test("timeout kills a script that ignores SIGTERM", async () => {
    const o = await run("ignore_term", null, { timeoutMs: 300 });
    assert.equal(o.error?.type, "Timeout");
  });

  test("timeout kills the whole process group, forked children included", async () => {
    const o = await run("forker", null, { timeoutMs: 500 });
    assert.equal(o.error?.type, "Timeout");
    const marker = o.stdout.trim();
    assert.match(marker, /^3600\.\d+$/, `the child's command line in stdout: ${o.stdout}`);
    // Live processes whose command line is the child's (its pid is its namespace's, not ours).
    const child = () => sleeping(marker);
    await until(() => child().length === 0, "the forked child is gone", 1000).catch(() => {});
    assert.deepEqual(child(), [], "forked child survived");
  });

  test("processes a task leaves behind are reaped, not left as zombies", async () => {
    const o = await run("daemonizes");
    assert.equal(o.status, "SUCCESS", JSON.stringify(o.error));
    const mark = String(o.value);
    assert.match(mark, /^0\.3\d{6}$/);
    const daemon = () => sleeping(mark);
    const zygote = runner.zygotePid();
    const zombies = () =>
      readdirSync("/proc")
        .filter((d) => /^\d+$/.test(d))
        .filter((d) => {
          try {
            const stat = readFileSync(`/proc/${d}/stat`, "utf8");
            const [state, ppid] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
            return state === "Z" && Number(ppid) === zygote;
          } catch {
            return false; // gone meanwhile
          }
        });
    // The daemon exits 0.3 s after the task, unless its task's end killed it first.
    await until(() => daemon().length === 0, "the daemon has exited", 5000);
    await until(() => zombies().length === 0, "no zombie left", 2500).catch(() => {});
    assert.deepEqual(zombies(), []);
  });

  test("terminate → CANCELED", async () => {
    const taskId = `t${++seq}`;
    const p = runner.run({
      taskId,
      source: { name: "ignore_term", kind: "module", content: fixture("ignore_term") },
      parameter: null,
    });
    await until(() => runner.stats().running === 1, "the task runs");
    assert.equal(runner.kill(taskId, "terminate"), true);
    const o = await p;
    assert.equal(o.status, "CANCELED");
    assert.equal(runner.kill(taskId, "terminate"), false);
  });

  test("os._exit(3) → FAILURE with a clear message, output kept", async () => {
    const o = await run("exit3");
    assert.equal(o.status, "FAILURE");
    assert.match(o.error?.message ?? "", /process died: exited with code 3/);
    assert.equal(o.stdout, "before exit\n");
  });

  test("memory limit → FAILURE, the message names the limit", async () => {
    const o = await run("memory", 1024);
    assert.equal(o.status, "FAILURE");
    assert.equal(o.error?.type, "MemoryError");
    assert.equal(o.error?.message, `out of memory (the task's memory limit: ${512 * MiB} bytes)`);
    assertSuccess(await run("memory", 16), 16 * 1024 * 1024);
  });

  test("file size limit → FAILURE, the message names the limit", async () => {
    const o = await run("big_file", 32);
    assert.equal(o.status, "FAILURE");
    assert.equal(o.error?.type, "OSError");
    assert.equal(
      o.error?.message,
      `[Errno 27] File too large (the task's file size limit: ${FILE_CAP} bytes)`,
    );
    assertSuccess(await run("big_file", 8), 8);
  });

  test("at most `concurrency` tasks run at once, the rest wait", async () => {
    const tasks = Array.from({ length: 6 }, () => run("holder", 0.3));
    await until(() => runner.stats().running + runner.stats().queued === 6, "all six are taken");
    assert.equal(runner.stats().running, 4);
    assert.equal(runner.stats().queued, 2);
    for (const o of await Promise.all(tasks)) assertSuccess(o, "done");
  });
});

describe("sandbox", () => {
  test("bwrap is used unless SCRIPT_SANDBOX=none accepts less", () => {
    if (process.env.SCRIPT_SANDBOX === "none") {
      assert.equal(runner.sandbox, process.getuid?.() === 0 ? "uid" : "none");
    } else assert.equal(runner.sandbox, "bwrap", runner.refusal);
  });

  test("no service files, no other task's dir, non-root, no network, writable cwd", {
    skip: process.getuid?.() !== 0 && "needs root",
  }, async () => {
    await writeFile(path.join(dataDir, "sluice.db"), "secret database");
    const server = net.createServer((s) => s.end());
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const port = (server.address() as net.AddressInfo).port;
    const holderDir = `holder-${++seq}`;
    const holder = run("holder", 1.5, { workDirName: holderDir });
    const secret = path.join(dataDir, "tasks", holderDir, "secret.txt");
    await until(() => existsSync(secret), "the holder wrote its secret", 2000);
    const tasksRoot = runner.sandbox === "bwrap" ? "/tasks" : path.join(dataDir, "tasks");
    try {
      const o = await run("sandbox_probe", {
        port,
        read: {
          db: path.join(dataDir, "sluice.db"),
          other: `${tasksRoot}/${holderDir}/secret.txt`,
          shadow: "/etc/shadow",
        },
      });
      assert.equal(o.status, "SUCCESS", JSON.stringify(o.error));
      const v = o.value as Record<string, unknown>;
      assert.notEqual(v.uid, 0);
      assert.notEqual(v.db, "read");
      assert.equal(v.other, "PermissionError");
      assert.notEqual(v.shadow, "read");
      assert.equal(v.write, "written");
      if (runner.sandbox === "bwrap") assert.notEqual(v.net, "connected");
      // The secret existed on the host while the probe ran, so "other" was a live directory.
      assertSuccess(await holder, "done");
      assert.equal(await gone(secret), true, "work dir removed after the task");
    } finally {
      server.close();
    }
  });

  test("kept work dir survives, is root-owned 0700, and is reused by name", async () => {
    const name = `flow-${++seq}`;
    assertSuccess(await run("holder", 0, { workDirName: name, keepWorkDir: true }), "done");
    const dir = path.join(dataDir, "tasks", name);
    assert.equal(await readFile(path.join(dir, "secret.txt"), "utf8"), "s3cret");
    if (process.getuid?.() === 0) {
      // Handed back to root in the background, so a later task reusing the uid cannot read it.
      // A shared directory is root-owned from the start (group = the tasks' gid): wait for the
      // hand-back itself, which comes after the uid sweep is confirmed.
      const handedBack = () => statSync(dir).uid === 0 && statSync(dir).gid === 0;
      await until(handedBack, "the kept work dir is handed back to root", 5000).catch(() => {});
      assert.equal(statSync(dir).uid, 0);
      assert.equal(statSync(dir).mode & 0o777, 0o700);
    }
    assertSuccess(await run("holder", 0, { workDirName: name }), "done");
    assert.equal(await gone(dir), true);
  });
});

/** The live children of `zygote` (its idle ones and the one a task holds). */
function childrenOf(zygote: number | undefined): number[] {
  return readdirSync("/proc")
    .filter((n) => /^\d+$/.test(n))
    .filter((d) => {
      try {
        const stat = readFileSync(`/proc/${d}/stat`, "utf8");
        return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === zygote;
      } catch {
        return false; // gone meanwhile
      }
    })
    .map(Number);
}

describe("zygote crash", () => {
  // A runner of its own, whose tasks can be held at each step on their way to their child
  // (`pauseAt`), so that the zygote dies exactly there.
  let own: PythonRunner;
  let ownDir: string;
  const gates = new Map<string, { reached: () => void; go: Promise<void> }>();
  /** Holds task `taskId` at `step`: resolves once it is there, with the release. */
  const hold = (taskId: string, step: TaskStep): Promise<() => void> => {
    let release = () => {};
    const go = new Promise<void>((r) => {
      release = r;
    });
    return new Promise((reached) => {
      gates.set(`${taskId}/${step}`, { reached: () => reached(release), go });
    });
  };
  const pauseAt = (taskId: string, step: TaskStep): Promise<void> => {
    const gate = gates.get(`${taskId}/${step}`);
    gates.delete(`${taskId}/${step}`);
    gate?.reached();
    return gate?.go ?? Promise.resolve();
  };
  const task = (name: string, parameter: unknown, extra: Partial<TaskSpec> = {}) => {
    const spec = {
      taskId: `z${++seq}`,
      source: { name, kind: "module" as const, content: fixture(name) },
      parameter,
      timeoutMs: 20_000,
      ...extra,
    };
    return { id: spec.taskId, outcome: () => own.run(spec) };
  };
  /** Kills the zygote; resolves once Node has seen it die (its pid is no longer the runner's). */
  const killZygote = async (): Promise<number> => {
    const pid = own.zygotePid();
    assert.ok(pid);
    process.kill(pid, "SIGKILL");
    await until(() => own.zygotePid() !== pid, "Node saw the zygote die");
    return pid;
  };
  /** Much less than the task's 20 s limit: it did not wait for its time limit. */
  const prompt = async (outcome: Promise<TaskOutcome>): Promise<TaskOutcome> => {
    const t0 = Date.now();
    const o = await outcome;
    assert.ok(Date.now() - t0 < 10_000, `took ${Date.now() - t0} ms: ${JSON.stringify(o.error)}`);
    return o;
  };

  before(async () => {
    ownDir = await mkdtemp(path.join(os.tmpdir(), "sluice-pyrunner-zygote-"));
    const cfg = loadConfig({ SCRIPT_SANDBOX: process.env.SCRIPT_SANDBOX });
    own = await createPythonRunner({
      config: {
        python: { ...cfg.python, prefork: 2, concurrency: 4, memoryBytes: 512 * 1024 * 1024 },
        limits: { outputBytes: OUTPUT_CAP, resultBytes: RESULT_CAP, maxRunS: 60 },
        dataDir: ownDir,
      },
      logger: quiet,
      pauseAt,
    });
  });

  after(async () => {
    await own?.close();
    await rm(ownDir, { recursive: true, force: true });
  });

  test("a running task fails clearly, the zygote is replaced and the next task works", async () => {
    // A work dir of its own name is on disk (not a tmpfs): the file says the script runs.
    const name = `zygote-${++seq}`;
    const t = task("holder", 3600, { workDirName: name });
    const running = t.outcome();
    const secret = path.join(ownDir, "tasks", name, "secret.txt");
    await until(() => existsSync(secret), "the script is running");
    const pid = await killZygote();
    const o = await prompt(running);
    assert.equal(o.status, "FAILURE");
    assert.equal(o.error?.type, "ProcessDied");
    assert.match(o.error?.message ?? "", /zygote died/);
    assertSuccess(await task("echo", "after").outcome(), "after");
    assert.notEqual(own.zygotePid(), pid);
  });

  test("a task whose child died alone before it was told its task fails at once", async () => {
    await until(() => own.stats().idle === 2, "a warm pool");
    const t = task("echo", "never");
    const reached = hold(t.id, "child");
    const outcome = t.outcome();
    const release = await reached;
    // The task's child among them: the zygote lives on, and replaces the idle ones.
    const children = childrenOf(own.zygotePid());
    assert.ok(children.length >= 1);
    for (const pid of children) {
      try {
        process.kill(pid, "SIGKILL");
      } catch (err) {
        // Gone since it was listed (an idle child the zygote retired meanwhile): nothing to kill.
        if ((err as NodeJS.ErrnoException).code !== "ESRCH") throw err;
      }
    }
    await until(() => children.every((pid) => !existsSync(`/proc/${pid}`)), "the children reaped");
    release();
    const o = await prompt(outcome);
    assert.equal(o.status, "FAILURE");
    assert.equal(o.error?.type, "ProcessDied");
    assert.match(o.error?.message ?? "", /signal 9 SIGKILL/);
  });

  // A task whose script was not handed to a child yet when the zygote died runs on a child of
  // the restarted zygote, within its time limit: neither failed nor left to time out.
  for (const [step, where] of [
    ["slot", "with its slot, before its work dir"],
    ["workDir", "with its work dir, before it takes a child (it waits for the new zygote's)"],
    ["child", "holding a child of the dead zygote that was not told its task yet"],
  ] as const) {
    test(`a task ${where} runs on the restarted zygote`, async () => {
      await until(() => own.stats().idle >= 1 && own.zygotePid() !== undefined, "a warm pool");
      const t = task("echo", step);
      const reached = hold(t.id, step);
      const outcome = t.outcome();
      const release = await reached;
      const pid = await killZygote();
      release();
      assertSuccess(await prompt(outcome), step);
      assert.notEqual(own.zygotePid(), pid);
    });
  }
});
