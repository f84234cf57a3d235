import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { DF } from "../helpers/flows.ts";
import { pythonDescendants } from "../helpers/process-tree.ts";
import { scopeHeaders, startServer, type TestServer, upload } from "../helpers/server.ts";

/**
 * Attack: exhaust the host's memory with an upload. The syntax check used to compile every
 * uploaded .py as root, outside the sandbox, with no memory, time or concurrency limit (10 MB of
 * `a=1` lines took it to 4.1 GB for 9.4 s), and judged text decoded with replacement characters
 * while the task compiles the raw bytes (docs/script-service.md, "Upload").
 */

const MiB = 1024 * 1024;
const isRoot = process.getuid?.() === 0;

/** `a=1` lines: about 400 bytes of compiler memory per source byte. */
const assignments = (bytes: number): string => "a=1\n".repeat(Math.floor(bytes / 4));
const comparisonChain = (bytes: number): string =>
  `x=${Array(Math.floor(bytes / 2))
    .fill("a")
    .join("<")}\n`;
const VALID = "def main(p):\n    return p\n";

interface Item {
  filePath: string;
  status: number;
  message: string;
}

/** Zip of raw bytes (makeZip takes text, which cannot hold bytes that are not UTF-8). */
function zipOfBytes(entries: { name: string; bytes: Buffer }[]): Buffer {
  const script = `
import base64, io, json, sys, zipfile
buf = io.BytesIO()
with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
    for e in json.load(sys.stdin):
        z.writestr(e["name"], base64.b64decode(e["b64"]))
sys.stdout.buffer.write(buf.getvalue())
`;
  const input = JSON.stringify(
    entries.map((e) => ({ name: e.name, b64: e.bytes.toString("base64") })),
  );
  return execFileSync("/usr/bin/python3", ["-c", script], { input });
}

interface CheckerSample {
  pid: number;
  uid: number;
  /** Network namespace differs from this process's: the check runs in the sandbox. */
  ownNetwork: boolean;
}

/**
 * Live syntax-check interpreters under this test process (the Python, not its bwrap parent),
 * read from /proc: what is really running, not what the service says it runs.
 */
function liveCheckers(): CheckerSample[] {
  const parent = new Map<number, number>();
  for (const e of readdirSync("/proc")) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const stat = readFileSync(`/proc/${e}/stat`, "utf8");
      parent.set(Number(e), Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]));
    } catch {
      // ended while we looked
    }
  }
  const myNet = readlinkSync("/proc/self/ns/net");
  const out: CheckerSample[] = [];
  for (const pid of parent.keys()) {
    let p = parent.get(pid);
    while (p !== undefined && p > 1 && p !== process.pid) p = parent.get(p);
    if (p !== process.pid) continue;
    try {
      const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
      if (!/python/.test(argv[0] ?? "") || !argv.some((a) => a.endsWith("syntax_check.py")))
        continue;
      const status = readFileSync(`/proc/${pid}/status`, "utf8");
      const uid = Number(/^Uid:\s+(\d+)/m.exec(status)?.[1]);
      out.push({ pid, uid, ownNetwork: readlinkSync(`/proc/${pid}/ns/net`) !== myNet });
    } catch {
      // ended while we looked
    }
  }
  return out;
}

describe("upload syntax check: bounded, sandboxed, and judging the bytes that will run", () => {
  let server: TestServer;
  before(async () => {
    // A small memory limit keeps the memory attack quick; LIMIT_PY_FILE_BYTES keeps its default.
    server = await startServer({
      SCRIPT_MEMORY_BYTES: String(64 * MiB),
      SCRIPT_CHECK_CONCURRENCY: "2",
    });
  });
  after(() => server.close());

  it("a 10 MB .py (the attack) is that item's status 3, unread; the rest of the request imports", async () => {
    const started = Date.now();
    const r = await upload(
      server,
      [
        { name: "huge.py", content: assignments(10 * 1000 * 1000) },
        { name: "fine.py", content: VALID },
      ],
      { path: "/big" },
    );
    const items = r.body.data as Item[];
    assert.deepEqual(
      items.map((i) => [i.filePath, i.status]),
      [
        ["/big/huge", 3],
        ["/big/fine", 0],
      ],
      r.text,
    );
    assert.match(items[0]?.message ?? "", /over the limit of 1048576 bytes.*LIMIT_PY_FILE_BYTES/);
    assert.ok(Date.now() - started < 10_000, "never compiled");
    assert.equal((await server.call("GET", "/health")).body.status, "ok");
  });

  it("a .py under the size limit that needs more memory to compile than a task may use: status 3 naming memory", async () => {
    const r = await upload(
      server,
      [
        // 900 KB of `a=1` needs ~350 MB to compile, over this server's 64 MiB.
        { name: "hungry.py", content: assignments(900 * 1000) },
        // CPython's parser overflowing its own stack also raises MemoryError: not a memory kill.
        { name: "nested.py", content: `x = ${"-".repeat(100_000)}1\n` },
        { name: "fine.py", content: VALID },
      ],
      { path: "/mem" },
    );
    const items = r.body.data as Item[];
    assert.deepEqual(
      items.map((i) => i.status),
      [3, 2, 0],
      r.text,
    );
    assert.match(
      items[0]?.message ?? "",
      /^hungry\.py: out of memory: compiling it needs more than 67108864 bytes.*SCRIPT_MEMORY_BYTES/,
    );
    assert.match(items[1]?.message ?? "", /nested too deeply/);
    assert.equal((await server.call("GET", "/health")).body.status, "ok");
  });

  it("many uploads at once: never more check processes than SCRIPT_CHECK_CONCURRENCY, each in the sandbox", async () => {
    const samples: CheckerSample[][] = [];
    const sampler = setInterval(() => samples.push(liveCheckers()), 3);
    let items: Item[];
    try {
      // 12 requests of a .py that takes ~0.1 s to compile within 64 MiB.
      const replies = await Promise.all(
        Array.from({ length: 12 }, (_, i) =>
          upload(server, [{ name: `m${i}.py`, content: assignments(60 * 1000) }], {
            path: "/many",
          }),
        ),
      );
      items = replies.flatMap((r) => r.body.data as Item[]);
    } finally {
      clearInterval(sampler);
    }
    assert.deepEqual(
      items.map((i) => i.status),
      Array(12).fill(0),
      JSON.stringify(items),
    );
    const most = Math.max(...samples.map((s) => s.length));
    assert.equal(most, 2, `at most 2 at once, and both slots used (saw ${most})`);
    const seen = samples.flat();
    assert.ok(
      seen.every((s) => s.ownNetwork),
      "every check runs without the host's network",
    );
    if (isRoot) {
      const { uidBase, uidCount } = server.config.python;
      const dropped = seen.filter((s) => s.uid !== 0);
      assert.ok(dropped.length > 0, "seen running as a sandbox uid");
      assert.ok(
        dropped.every((s) => s.uid >= uidBase && s.uid < uidBase + uidCount),
        JSON.stringify(dropped),
      );
    }
  });
});

describe("the upload check compiles exactly the bytes a task runs", () => {
  let server: TestServer;
  before(async () => {
    server = await startServer({ SCRIPT_CHECK_TIMEOUT_MS: "500" });
  });
  after(() => server.close());

  it("a check that outlives SCRIPT_CHECK_TIMEOUT_MS is killed: status 3 naming the time limit", async () => {
    // A 1 MB comparison chain takes ~2 s to compile here (and ~600 MB, within the default
    // 1 GiB): four times the limit, where 1 MB of `a=1` (under 1 s) left too thin a margin.
    const r = await upload(
      server,
      [
        { name: "slow.py", content: comparisonChain(1000 * 1000) },
        { name: "fine.py", content: VALID },
      ],
      { path: "/slow" },
    );
    const items = r.body.data as Item[];
    assert.deepEqual(
      items.map((i) => i.status),
      [3, 0],
      r.text,
    );
    assert.equal(
      items[0]?.message,
      "slow.py: checking it took longer than 500 ms (SCRIPT_CHECK_TIMEOUT_MS)",
    );
    assert.deepEqual(liveCheckers(), [], "the killed check left no process");
  });

  /** What running these bytes as a task gives, bypassing the upload check. */
  const runBytes = (kind: "module" | "package", content: Buffer) =>
    server.services.runner.run({
      taskId: `t-${Math.random()}`,
      source: { name: "probe", kind, content },
      parameter: {},
    });

  it("invalid UTF-8 in a module: status 2 with the SyntaxError a task would raise", async () => {
    const bytes = Buffer.concat([
      Buffer.from("def main():\n    return '"),
      Buffer.from([0xff]),
      Buffer.from("'\n"),
    ]);
    const ran = await runBytes("module", bytes);
    assert.equal(ran.status, "FAILURE");
    assert.equal(ran.error?.type, "SyntaxError");
    // "(unicode error) 'utf-8' codec can't decode byte 0xff ... (probe.py, line 2)"
    const why = /^(.*) \(probe\.py, line 2\)$/.exec(ran.error?.message ?? "")?.[1];
    assert.ok(why, ran.error?.message);

    const r = await upload(server, [{ name: "bad.py", content: bytes }], { path: "/u8" });
    assert.equal(r.body.data[0].status, 2, r.text);
    assert.equal(r.body.data[0].message, `Python syntax error in bad.py line 2: ${why}`);
  });

  it("a coding cookie is honoured as the task honours it: imports, and runs", async () => {
    const bytes = Buffer.concat([
      Buffer.from("# -*- coding: latin-1 -*-\ndef main():\n    return '"),
      Buffer.from([0xe9]),
      Buffer.from("'\n"),
    ]);
    const r = await upload(server, [{ name: "latin.py", content: bytes }], { path: "/u8" });
    assert.equal(r.body.data[0].status, 0, r.text);
    const run = await server.call("POST", "/script/external/latin/run-sync?path=/u8", {
      headers: scopeHeaders(),
      body: {},
    });
    assert.equal(run.body, "é", run.text);
  });

  it("a package's main.py is read as strict UTF-8 (as zipimport gives it): the same bytes are refused there", async () => {
    const main = Buffer.concat([
      Buffer.from("# -*- coding: latin-1 -*-\ndef main():\n    return '"),
      Buffer.from([0xe9]),
      Buffer.from("'\n"),
    ]);
    const zip = zipOfBytes([{ name: "main.py", bytes: main }]);
    const ran = await runBytes("package", zip);
    assert.equal(ran.status, "FAILURE");
    assert.equal(ran.error?.type, "UnicodeDecodeError", JSON.stringify(ran.error));

    const r = await upload(server, [{ name: "pkg.zip", content: zip }], { path: "/u8" });
    assert.equal(r.body.data[0].status, 2, r.text);
    assert.equal(
      r.body.data[0].message,
      `Python cannot compile main.py: UnicodeDecodeError: ${ran.error?.message}`,
    );
  });
});

describe("the upload check without bubblewrap follows the tasks' rule", () => {
  const FIX = /apt-get install bubblewrap.*SCRIPT_SANDBOX=none/s;

  it("SCRIPT_SANDBOX=auto: uploads and inline flow code are refused, naming the cause; nothing is compiled", async () => {
    const server = await startServer({ SCRIPT_BWRAP: "/nonexistent/bwrap" });
    try {
      const r = await upload(server, [{ name: "echo.py", content: VALID }], { path: "/s" });
      assert.equal(r.body.data[0].status, 2, r.text);
      assert.match(
        r.body.data[0].message,
        /^echo\.py could not be checked: script tasks are refused/,
      );
      assert.match(r.body.data[0].message, FIX);

      const d = await server.call("POST", `${DF}/flow/deploy`, {
        headers: scopeHeaders(),
        body: {
          elementName: "inline",
          revisionName: "r1",
          path: "/flows",
          flow: {
            vertexes: [
              { id: "in", type: "input" },
              { id: "py", type: "script", config: { code: VALID } },
              { id: "out", type: "output" },
            ],
            edges: [
              { source: "in", target: "py" },
              { source: "py", target: "out" },
            ],
          },
          configure: {},
        },
      });
      const found = (d.body.data ?? []) as { errorCode: number; errorMessage: string }[];
      assert.deepEqual(
        found.map((f) => f.errorCode),
        [28050009],
        d.text,
      );
      assert.match(
        found[0]?.errorMessage ?? "",
        /^Python code could not be checked: script tasks are refused/,
      );
      assert.deepEqual(pythonDescendants(), []);
    } finally {
      await server.close();
    }
  });

  it("SCRIPT_SANDBOX=none: the check still has a task's rlimits (and uid, as root)", async () => {
    const server = await startServer({
      SCRIPT_BWRAP: "/nonexistent/bwrap",
      SCRIPT_SANDBOX: "none",
      SCRIPT_MEMORY_BYTES: String(64 * MiB),
    });
    const samples: CheckerSample[][] = [];
    const sampler = setInterval(() => samples.push(liveCheckers()), 3);
    try {
      const r = await upload(
        server,
        [
          { name: "hungry.py", content: assignments(900 * 1000) },
          { name: "slowish.py", content: assignments(60 * 1000) },
        ],
        { path: "/none" },
      );
      assert.deepEqual(
        (r.body.data as Item[]).map((i) => i.status),
        [3, 0],
        r.text,
      );
      assert.match(r.body.data[0].message, /out of memory.*SCRIPT_MEMORY_BYTES/);
    } finally {
      clearInterval(sampler);
      await server.close();
    }
    if (isRoot) {
      const seen = samples.flat();
      assert.ok(
        seen.some((s) => s.uid >= server.config.python.uidBase),
        JSON.stringify(seen),
      );
    }
  });
});
