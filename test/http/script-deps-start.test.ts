import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { Writable } from "node:stream";
import { after, before, describe, it } from "node:test";
import pino from "pino";
import { OTHER_SCOPE, scopeHeaders, type TestServer, upload } from "../helpers/server.ts";
import { pollUntil, within } from "../helpers/wait.ts";
import { startWithWheels } from "../helpers/wheels.ts";

/**
 * Packages whose import keeps their preloading zygote from ever serving (docs/script-dependencies.md,
 * "Warm start"; docs/security.md, "Preloading"): an import that never ends, one that leaves half a
 * line on the zygote's report pipe (its `ready` then never reads as one), one that says `ready`
 * itself, and one that leaves its zygote no process to fork. Each was a tenant's way to hang its
 * environment's tasks for good, and with `SCRIPT_ENV_ZYGOTES` of them, to turn preloading off for
 * every other tenant.
 */

const script = (project: string, module: string) => `# /// script
# dependencies = ["${project}"]
# ///
import os
import ${module}

def main():
    return {"preloaded": getattr(${module}, "PID", os.getpid()) != os.getpid()}
`;

function logSink(): { logger: pino.Logger; text: () => string } {
  let logs = "";
  const sink = new Writable({
    write(chunk, _enc, done) {
      logs += String(chunk);
      done();
    },
  });
  return { logger: pino({ level: "warn" }, sink), text: () => logs };
}

async function runSync(server: TestServer, name: string, scope = scopeHeaders()) {
  const r = await server.call("POST", `/script/external/${name}/run-sync`, {
    headers: scope,
    body: {},
  });
  return { status: r.headers.get("x-task-status"), body: r.body };
}

async function uploadOk(
  server: TestServer,
  files: { name: string; content: string }[],
  scope = scopeHeaders(),
) {
  const r = await upload(server, files, { path: "/h", overwrite: "true" }, scope);
  assert.deepEqual(
    r.body.data.map((d: { status: number }) => d.status),
    files.map(() => 0),
    r.text,
  );
}

describe("preloaded packages that keep their zygote from ever saying ready", () => {
  let server: TestServer;
  let close: () => Promise<void>;
  const logs = logSink();
  before(async () => {
    ({ server, close } = await startWithWheels(
      [
        {
          name: "sluice-hangs",
          version: "1.0",
          topLevel: ["sluice_hangs"],
          files: { "sluice_hangs/__init__.py": "import time\ntime.sleep(10**6)\n" },
        },
        {
          name: "sluice-partial",
          version: "1.0",
          topLevel: ["sluice_partial"],
          files: {
            "sluice_partial/__init__.py": 'import os\nos.write(1, b"x")\nPID = os.getpid()\n',
          },
        },
        {
          name: "sluice-warm",
          version: "1.0",
          topLevel: ["sluice_warm"],
          files: { "sluice_warm/__init__.py": "import os\nPID = os.getpid()\n" },
        },
      ],
      // One slice: a zygote that kept it would turn preloading off for every other environment.
      {
        SCRIPT_ENV_ZYGOTES: "1",
        SCRIPT_ENV_START_TIMEOUT_MS: "2000",
      },
      { logger: logs.logger },
    ));
  });
  after(() => close());

  for (const [project, module] of [
    ["sluice-hangs", "sluice_hangs"],
    ["sluice-partial", "sluice_partial"],
  ] as const) {
    it(`${project}: its tasks run on a plain zygote once the start deadline passed`, async () => {
      // On a plain zygote the task imports the module itself: the hanging one would hang it too,
      // so its script declares it and does not import it.
      const body =
        project === "sluice-hangs"
          ? `# /// script\n# dependencies = ["${project}"]\n# ///\ndef main():\n    return {"preloaded": False}\n`
          : script(project, module);
      await uploadOk(server, [{ name: `${module}.py`, content: body }]);
      const seen = logs.text().length;
      const run = await within(runSync(server, module), 30_000, "the task ended");
      assert.equal(run.status, "SUCCESS", JSON.stringify(run.body));
      assert.deepEqual(run.body, { preloaded: false });
      const logged = logs.text().slice(seen);
      assert.match(logged, /not ready within 2000 ms/);
      assert.match(logged, /failed to start preloading/);
      // Another tenant's environment still gets the one slice, and preloads.
      await uploadOk(
        server,
        [{ name: "warm.py", content: script("sluice-warm", "sluice_warm") }],
        scopeHeaders(OTHER_SCOPE),
      );
      const warm = await within(runSync(server, "warm", scopeHeaders(OTHER_SCOPE)), 30_000, "warm");
      assert.deepEqual(warm, { status: "SUCCESS", body: { preloaded: true } });
    });
  }
});

describe("a task whose environment's zygote does not start within the task's own time", () => {
  let server: TestServer;
  let close: () => Promise<void>;
  before(async () => {
    ({ server, close } = await startWithWheels(
      [
        {
          name: "sluice-hangs",
          version: "1.0",
          topLevel: ["sluice_hangs"],
          files: { "sluice_hangs/__init__.py": "import time\ntime.sleep(10**6)\n" },
        },
      ],
      { MAX_RUN_S: "2" },
    ));
  });
  after(() => close());

  it("ends with its timeout: the wait for its zygote counts against it", async () => {
    await uploadOk(server, [{ name: "late.py", content: script("sluice-hangs", "sluice_hangs") }]);
    const run = await within(runSync(server, "late"), 20_000, "the task ended");
    assert.equal(run.status, "FAILURE", JSON.stringify(run.body));
    assert.match(JSON.stringify(run.body), /timed out/);
  });
});

describe("a preloaded package that says ready for its zygote", () => {
  let server: TestServer;
  let close: () => Promise<void>;
  const logs = logSink();
  before(async () => {
    ({ server, close } = await startWithWheels(
      [
        {
          name: "sluice-ready",
          version: "1.0",
          topLevel: ["sluice_ready"],
          // Its own pid, the held one: Node takes it for the zygote's, before the import is over.
          files: {
            "sluice_ready/__init__.py":
              'import os\nos.write(1, f"ready {os.getpid()}\\n".encode())\nPID = os.getpid()\n',
          },
        },
      ],
      {},
      { logger: logs.logger },
    ));
  });
  after(() => close());

  it("gets its zygote restarted preloading nothing, not restarted for ever", async () => {
    await uploadOk(server, [{ name: "ready.py", content: script("sluice-ready", "sluice_ready") }]);
    for (let i = 0; i < 2; i++) {
      const run = await within(runSync(server, "ready"), 30_000, "the task ended");
      assert.deepEqual(run, { status: "SUCCESS", body: { preloaded: false } });
    }
    assert.equal(logs.text().split("report out of turn: stopped").length - 1, 1, logs.text());
    assert.match(logs.text(), /restarted preloading nothing/);
  });
});

describe("a preloaded package that ends its zygote soon after every ready", () => {
  let server: TestServer;
  let close: () => Promise<void>;
  const logs = logSink();
  before(async () => {
    ({ server, close } = await startWithWheels(
      [
        {
          name: "sluice-crash",
          version: "1.0",
          topLevel: ["sluice_crash"],
          // A thread of the zygote (forked children have none) ends it a moment after its ready.
          files: {
            "sluice_crash/__init__.py":
              "import os, threading, time\nPID = os.getpid()\n" +
              "threading.Thread(target=lambda: (time.sleep(0.3), os._exit(3)), daemon=True).start()\n",
          },
        },
      ],
      {},
      { logger: logs.logger },
    ));
  });
  after(() => close());

  it("gets it restarted preloading nothing, not restarted preloading for ever", async () => {
    await uploadOk(server, [{ name: "crash.py", content: script("sluice-crash", "sluice_crash") }]);
    // Before, every restart preloaded again and died again (its tasks with it), for good.
    await pollUntil(
      () => runSync(server, "crash"),
      (run) => run.status === "SUCCESS" && run.body?.preloaded === false,
      "a task on a zygote that preloads nothing",
      { ms: 30_000, everyMs: 100 },
    );
    assert.match(logs.text(), /died soon after it was ready: it is restarted preloading nothing/);
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

describe("a preloaded package that leaves its zygote no process to fork", () => {
  const mark = `sluice-holder-${process.pid}-${Date.now()}`;
  let server: TestServer;
  let close: () => Promise<void>;
  const logs = logSink();
  before(async () => {
    ({ server, close } = await startWithWheels(
      [
        {
          name: "sluice-fills",
          version: "1.0",
          topLevel: ["sluice_fills"],
          // Processes until the zygote's cgroup (SCRIPT_PROCESSES of them) has room for no more.
          files: {
            "sluice_fills/__init__.py": [
              "import os",
              "PID = os.getpid()",
              "while True:",
              "    try:",
              "        pid = os.fork()",
              "    except OSError:",
              "        break",
              "    if pid == 0:",
              `        os.execv("/usr/bin/sleep", ["${mark}", "100000"])`,
              "",
            ].join("\n"),
          },
        },
      ],
      { SCRIPT_PROCESSES: "8" },
      { logger: logs.logger },
    ));
  });
  after(async () => {
    await close();
    for (const pid of processesMarked(mark)) process.kill(pid, "SIGKILL");
  });

  it("fails the task that gets no process, and the zygote serves the next", async () => {
    await uploadOk(server, [{ name: "fills.py", content: script("sluice-fills", "sluice_fills") }]);
    const run = await within(runSync(server, "fills"), 30_000, "the task ended");
    assert.equal(run.status, "FAILURE", JSON.stringify(run.body));
    assert.match(
      JSON.stringify(run.body),
      /could not start the task: resource temporarily unavailable/,
    );
    // Room again: the same zygote forks the next task's process.
    const holders = processesMarked(mark);
    assert.ok(holders.length > 0);
    for (const pid of holders) process.kill(pid, "SIGKILL");
    // Reaped by the zygote (until then each still counts in its cgroup).
    await pollUntil(
      () => holders.filter((pid) => existsSync(`/proc/${pid}`)),
      (p) => p.length === 0,
      "the holders reaped",
    );
    const next = await within(runSync(server, "fills"), 30_000, "the next task ended");
    assert.deepEqual(next, { status: "SUCCESS", body: { preloaded: true } });
    assert.doesNotMatch(logs.text(), /python zygote died/);
  });
});
