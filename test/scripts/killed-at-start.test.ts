import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Readable, Writable } from "node:stream";
import { after, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { BIN, freePort } from "../helpers/process.ts";
import { Descendants, type Proc } from "../helpers/process-tree.ts";
import { modeEnv, TEST_MODE } from "../helpers/server.ts";
import { line, pollUntil } from "../helpers/wait.ts";

/**
 * docs/security.md, "The end of a task": no process of a dead service may be left behind. A
 * service killed with SIGKILL while it starts its script sandbox (the probe, bubblewrap, the
 * zygote, the zygote forking its idle children) leaves nothing running: each link of the chain
 * dies with its parent, whenever that parent dies. Before, a zygote's child forked as the zygote
 * died (the service's death reached it through bubblewrap's parent-death signal) was left for
 * good, waiting for a task, with ppid 1: it set its own parent-death signal after the fork, and
 * nothing checked that its parent was still there by then.
 *
 * In cluster mode the process killed is a worker (`sluice worker`), which starts its own sandbox.
 */
const root = process.getuid?.() === 0;
const role = TEST_MODE === "cluster" ? "worker" : "serve";

interface Started {
  child: ChildProcess;
  tree: Descendants;
  output: () => string;
}

function startService(env: Record<string, string>, port: number): Started {
  let output = "";
  const child = spawn(process.execPath, [BIN, role], {
    env: { ...process.env, LOG_LEVEL: "info", ...env, PORT: String(port), HOST: "127.0.0.1" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout?.on("data", (c) => (output += c));
  child.stderr?.on("data", (c) => (output += c));
  return { child, tree: new Descendants(child.pid as number), output: () => output };
}

const isZygote = (p: Proc) => p.cmd.includes("zygote.py") && !p.cmd.includes("--probe");
const isBwrap = (p: Proc) => /^\S*bwrap /.test(p.cmd);

/** The zygote (its python, below bubblewrap) and its children, among `procs`. */
function zygoteOf(procs: Proc[]): { zygote: Proc | undefined; children: Proc[] } {
  const bwraps = new Set(procs.filter((p) => isBwrap(p) && isZygote(p)).map((p) => p.pid));
  const zygote = procs.find((p) => !isBwrap(p) && isZygote(p) && bwraps.has(p.ppid));
  const children = zygote ? procs.filter((p) => p.ppid === zygote.pid && isZygote(p)) : [];
  return { zygote, children };
}

/**
 * Kills `child` (SIGKILL) and awaits the end of everything it started, a parent-death signal
 * taking a moment; returns what is still alive 3 s later (killed here, so the next start is clean).
 */
async function killed(
  child: ChildProcess,
  exited: Promise<unknown>,
  tree: Descendants,
  when: string,
): Promise<string[]> {
  child.kill("SIGKILL");
  await exited;
  const survivors = await pollUntil(
    () => tree.alive(),
    (ps) => ps.length === 0,
    `nothing left of the process killed ${when}`,
    { ms: 3000, everyMs: 20 },
  ).catch(() => tree.alive());
  for (const p of survivors) {
    try {
      process.kill(p.pid, "SIGKILL");
    } catch {
      // gone meanwhile
    }
  }
  return survivors.map((p) => `${when}: ${p.pid} (ppid ${p.ppid}) ${p.cmd.slice(0, 120)}`);
}

/** When the service is killed: at once, or once what it started shows this. */
type Moment = { name: string; reached?: (procs: Proc[], output: string) => boolean };

const moments: Moment[] = [
  { name: "right after the spawn" },
  { name: "while bubblewrap probes", reached: (ps) => ps.some((p) => p.cmd.includes("--probe")) },
  { name: "at its first line of output", reached: (_, out) => out.includes("\n") },
  { name: "once the zygote runs", reached: (ps) => zygoteOf(ps).zygote !== undefined },
  {
    name: "as the zygote forks its children",
    reached: (ps) => zygoteOf(ps).children.length > 0,
  },
];

describe("a service killed while its sandbox starts leaves no process behind", {
  skip: !root && "the sandbox needs root",
}, () => {
  const dirs: string[] = [];
  after(() => {
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });

  it(`SIGKILL of \`sluice ${role}\` at ${moments.length} moments of its start`, async () => {
    const base = {
      SCRIPT_SANDBOX: "bwrap",
      // Many children forked at once: most are still waiting for a CPU when the zygote dies.
      SCRIPT_PREFORK: "128",
      ...(await modeEnv()),
    };
    const port = await freePort();
    const left: string[] = [];
    for (const m of moments) {
      const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-killed-start-"));
      dirs.push(dataDir);
      const s = startService({ ...base, DATA_DIR: dataDir }, port);
      const exited = once(s.child, "exit");
      if (m.reached) {
        const reached = m.reached;
        // Another process tree's state, which nothing announces: read as often as the loop
        // allows, and the kill follows the read that saw the moment at once.
        await pollUntil(
          () => (s.child.exitCode === null ? s.tree.scan() : undefined),
          (ps) => ps === undefined || reached(ps, s.output()),
          `${m.name}`,
          { ms: 15_000, everyMs: 0 },
        );
        assert.equal(s.child.exitCode, null, `the service exited by itself:\n${s.output()}`);
      }
      left.push(...(await killed(s.child, exited, s.tree, m.name)));
    }
    assert.deepEqual(left, [], `processes that outlived the killed service:\n${left.join("\n")}`);
  });

  // The runner's own start of its zygote (startPool, as createPythonRunner calls it), in a
  // process that starts nothing else: many more kills fit in the time of one service start.
  it("SIGKILL of the process that starts the zygote, as the zygote forks its children, 10 times", async () => {
    const tasksDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-killed-start-tasks-"));
    dirs.push(tasksDir);
    const left: string[] = [];
    for (let attempt = 1; attempt <= 10; attempt++) {
      const host = spawn(process.execPath, ["--input-type=module", "-e", HOST, tasksDir], {
        stdio: ["ignore", "ignore", "inherit"],
      });
      const tree = new Descendants(host.pid as number);
      const exited = once(host, "exit");
      await pollUntil(
        () => (host.exitCode === null ? tree.scan() : undefined),
        (ps) => ps === undefined || zygoteOf(ps).children.length > 0,
        `the zygote's first child (attempt ${attempt})`,
        { ms: 15_000, everyMs: 0 },
      );
      assert.equal(host.exitCode, null, "the host exited by itself");
      left.push(...(await killed(host, exited, tree, `attempt ${attempt}`)));
    }
    assert.deepEqual(left, [], `processes that outlived the killed host:\n${left.join("\n")}`);
  });
});

describe("a zygote killed as it forks", { skip: !root && "the namespaces need root" }, () => {
  // The link that broke, alone: a burst of forks leaves children that have not run yet (on two
  // CPUs, most of the last ones) when the zygote dies; each sets its parent-death signal only
  // when it runs. Before, 9 of 20 such kills left children running with ppid 1 (70 in all).
  it("SIGKILL of the zygote as it reports 64 children, 8 times: none of them is left", async () => {
    const left: string[] = [];
    for (let attempt = 1; attempt <= 8; attempt++) {
      const zygote = spawn(
        "/usr/bin/python3",
        ["-I", "-B", ZYGOTE, "--ns=ipc,mnt,pid,uts,cgroup"],
        {
          stdio: ["pipe", "pipe", "inherit"],
        },
      );
      const out = zygote.stdout as Readable;
      const exited = once(zygote, "exit");
      await line(out, /^ready /);
      const forked = line(out, /^c /);
      zygote.stdin?.write("f 64\n");
      await forked; // all 64 forked: the zygote reports them after the burst
      const tree = new Descendants(zygote.pid as number);
      tree.scan();
      left.push(...(await killed(zygote, exited, tree, `attempt ${attempt}`)));
    }
    assert.deepEqual(left, [], `children that outlived their zygote:\n${left.join("\n")}`);
  });
});

describe("a zygote whose Node is gone before it starts", {
  skip: !root && "the namespaces need root",
}, () => {
  // bubblewrap sets its parent-death signal after it forked, unchecked: a Node killed before
  // that leaves it and the zygote running. The zygote, its own signal set, looks at its stdin.
  for (const [how, end] of [
    ["gone (its end closed)", (s: Writable) => s.destroy()],
    ["done (its side shut)", (s: Writable) => s.end()],
  ] as const)
    it(`exits before it says ready or forks anything: Node ${how}`, async () => {
      const zygote = spawn("/usr/bin/python3", ["-I", "-B", ZYGOTE, "--ns="], {
        stdio: ["pipe", "pipe", "inherit"],
      });
      end(zygote.stdin as Writable);
      let out = "";
      zygote.stdout?.setEncoding("utf8").on("data", (d: string) => (out += d));
      const [code] = await once(zygote, "exit");
      assert.equal(code, 0);
      assert.equal(out, "", "it said nothing: no ready, no child");
    });
});

const ZYGOTE = fileURLToPath(new URL("../../src/scripts/python/zygote.py", import.meta.url));
const src = (p: string) =>
  JSON.stringify(fileURLToPath(new URL(`../../src/${p}`, import.meta.url)));
/** Starts the default zygote in bubblewrap as the runner does, 128 idle children asked for. */
const HOST = `
  import { loadConfig } from ${src("config.ts")};
  import { systemClock } from ${src("clock.ts")};
  import { startPool } from ${src("scripts/zygote-start.ts")};
  const { python } = loadConfig({ SCRIPT_PREFORK: "128" });
  const logger = { info() {}, warn() {}, error() {}, debug() {} };
  await startPool(python, "bwrap", process.argv[1], undefined, logger, systemClock);`;
