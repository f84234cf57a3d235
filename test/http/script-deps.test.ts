import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { DF, deployAndActivate } from "../helpers/flows.ts";
import { gatedScript } from "../helpers/gate-file.ts";
import {
  modeEnv,
  scopeHeaders,
  startServer,
  TEST_MODE,
  type TestServer,
  upload,
} from "../helpers/server.ts";
import { writeWheel } from "../helpers/wheels.ts";
import { makeZip } from "../helpers/zip.ts";

/** Two wheels in a local folder: no index is ever contacted (PIP_NO_INDEX). */
function wheelFolder(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), "sluice-wheels-"));
  writeWheel(dir, {
    name: "sluice-slow",
    version: "1.0",
    files: {
      "sluice_slow/__init__.py":
        "import os, time\ntime.sleep(0.1)\nLOADED_BY = os.getpid()\nfrom sluice_helper import help\n",
    },
    requires: ["sluice-helper>=2"],
    topLevel: ["sluice_slow"],
  });
  // No top_level.txt: its module name is read from RECORD.
  writeWheel(dir, {
    name: "sluice-helper",
    version: "2.1",
    files: { "sluice_helper.py": "def help():\n    return 'helped'\n" },
  });
  return dir;
}

const MODULE = `# /// script
# requires-python = ">=3.8"
# dependencies = [
#   "sluice-slow",  # the slow one
# ]
# ///
import sluice_slow

def main():
    return {"help": sluice_slow.help(), "warm": sluice_slow.LOADED_BY != 1}
`;

const envDirs = (server: TestServer) => {
  const root = path.join(server.dataDir, "envs");
  return existsSync(root) ? readdirSync(root).sort() : [];
};

async function runSync(server: TestServer, name: string) {
  const r = await server.call("POST", `/script/external/${name}/run-sync`, {
    headers: scopeHeaders(),
    body: {},
  });
  return { status: r.headers.get("x-task-status"), body: r.body };
}

async function versionOf(server: TestServer, name: string) {
  const r = await server.call("POST", "/script/script/element/version", {
    headers: scopeHeaders(),
    body: { elementName: name },
  });
  assert.equal(r.body.status, true, r.text);
  return r.body.data;
}

/** A server installing from a fresh wheel folder, for the suite that calls it. */
function serveWheels(): { server: TestServer; wheels: string } {
  const suite = { wheels: "" } as { server: TestServer; wheels: string };
  before(async () => {
    suite.wheels = wheelFolder();
    suite.server = await startServer({ PIP_NO_INDEX: "1", PIP_FIND_LINKS: suite.wheels });
  });
  after(async () => {
    await suite.server.close();
    rmSync(suite.wheels, { recursive: true, force: true });
  });
  return suite;
}

describe("script dependencies", () => {
  // Preloading is on by default (docs/security.md, "Preloading"): the warm start is tested.
  const suite = serveWheels();

  it("installs a module's PEP 723 dependencies at upload and runs it with them, warm", async () => {
    const r = await upload(suite.server, [{ name: "deps_py.py", content: MODULE }], {
      path: "/deps",
    });
    assert.equal(r.body.data[0].status, 0, r.text);
    const v = await versionOf(suite.server, "deps_py");
    assert.deepEqual(v.env.packages, ["sluice-helper==2.1", "sluice-slow==1.0"]);
    assert.deepEqual(v.env.declared, ["sluice-slow"]);
    assert.deepEqual(envDirs(suite.server), [v.env.hash]);
    const run = await runSync(suite.server, "deps_py");
    assert.equal(run.status, "SUCCESS", JSON.stringify(run.body));
    // Imported in the zygote, before the fork: the task (pid 1 of its namespace) did not load it.
    assert.deepEqual(run.body, { help: "helped", warm: true });
  });

  it("runs a flow's script node warm, sharing the run's directory with the other nodes", async () => {
    // The directory's group comes from the preloading zygote's uid slice while the node runs, and
    // from the runner's own range while a node of the default zygote does (docs/security.md).
    const reader = `# /// script
# dependencies = ["sluice-slow"]
# ///
import sluice_slow

def main(p):
    with open("note.txt") as f:
        note = f.read()
    with open("note.txt", "a") as f:
        f.write("b")
    return {"note": note + "b", "warm": sluice_slow.LOADED_BY != 1}
`;
    const up = await upload(suite.server, [{ name: "deps_reader.py", content: reader }], {
      path: "/deps",
    });
    assert.equal(up.body.data[0].status, 0, up.text);
    const code = (body: string) => ({ code: `def main(p):\n${body}` });
    await deployAndActivate(suite.server, "deps_flow", {
      vertexes: [
        { id: "in", type: "input" },
        {
          id: "w",
          type: "script",
          config: code("    open('note.txt', 'w').write('a')\n    return p\n"),
        },
        {
          id: "r",
          type: "script",
          config: { element: { elementName: "deps_reader", path: "/deps" } },
        },
        {
          id: "f",
          type: "script",
          config: code("    return {**p, 'final': open('note.txt').read()}\n"),
        },
        { id: "out", type: "output" },
      ],
      edges: [
        { source: "in", target: "w" },
        { source: "w", target: "r" },
        { source: "r", target: "f" },
        { source: "f", target: "out" },
      ],
    });
    const r = await suite.server.call("POST", `${DF}/run-sync`, {
      headers: scopeHeaders(),
      body: { elementName: "deps_flow", parameter: {} },
    });
    assert.deepEqual(r.body.data, { note: "ab", warm: true, final: "ab" }, r.text);
  });

  it("runs a node on a plain zygote while a parallel branch holds the run's directory with another group", async () => {
    const go = `# /// script
# dependencies = ["sluice-slow"]
# ///
import sluice_slow

def main(p):
    open("go", "w").close()  # lets the gated branch end
    return {"warm": sluice_slow.LOADED_BY != 1}
`;
    const up = await upload(suite.server, [{ name: "deps_go.py", content: go }], { path: "/deps" });
    assert.equal(up.body.data[0].status, 0, up.text);
    await deployAndActivate(suite.server, "deps_branches", {
      vertexes: [
        { id: "in", type: "input" },
        // Opens the directory first (a group of the runner's range) and holds it until `go`.
        {
          id: "g",
          type: "script",
          config: { code: gatedScript(["open('g-started', 'w').close()"], []) },
        },
        {
          id: "s",
          type: "script",
          config: { code: gatedScript([], []).replaceAll("'go'", "'g-started'") },
        },
        { id: "r", type: "script", config: { element: { elementName: "deps_go", path: "/deps" } } },
      ],
      edges: [
        { source: "in", target: "g" },
        { source: "in", target: "s" },
        { source: "s", target: "r" },
      ],
    });
    const r = await suite.server.call("POST", `${DF}/run-sync`, {
      headers: scopeHeaders(),
      body: { elementName: "deps_branches", parameter: {} },
    });
    assert.deepEqual(r.body.data, { g: {}, r: { warm: false } }, r.text);
  });

  it("with SCRIPT_ENV_PRELOAD=false the task imports its packages itself", async () => {
    const plain = await startServer({
      PIP_NO_INDEX: "1",
      PIP_FIND_LINKS: suite.wheels,
      SCRIPT_ENV_PRELOAD: "false",
    });
    try {
      const r = await upload(plain, [{ name: "deps_py.py", content: MODULE }], { path: "/deps" });
      assert.equal(r.body.data[0].status, 0, r.text);
      const run = await runSync(plain, "deps_py");
      assert.equal(run.status, "SUCCESS", JSON.stringify(run.body));
      assert.deepEqual(run.body, { help: "helped", warm: false });
    } finally {
      await plain.close();
    }
  });

  it("shares one environment between a zip with requirements.txt and the module with the same set", async () => {
    const zip = makeZip([
      {
        name: "pkg/main.py",
        content: "import sluice_helper\ndef main():\n    return sluice_helper.help()\n",
      },
      {
        name: "pkg/requirements.txt",
        content: "# same set as deps_py\nsluice-slow  # pulls the helper\n",
      },
    ]);
    const r = await upload(suite.server, [{ name: "deps_zip.zip", content: zip }], {
      path: "/deps",
    });
    assert.equal(r.body.data[0].status, 0, r.text);
    const [a, b] = [
      await versionOf(suite.server, "deps_py"),
      await versionOf(suite.server, "deps_zip"),
    ];
    assert.equal(a.env.hash, b.env.hash);
    assert.deepEqual(envDirs(suite.server), [a.env.hash]);
    const run = await runSync(suite.server, "deps_zip");
    assert.deepEqual([run.status, run.body], ["SUCCESS", "helped"]);
  });

  it("refuses an upload whose package cannot be found, leaving nothing behind", async () => {
    const before = envDirs(suite.server);
    const src =
      '# /// script\n# dependencies = ["sluice-missing==9"]\n# ///\ndef main():\n    return 1\n';
    const r = await upload(suite.server, [{ name: "missing.py", content: src }], { path: "/deps" });
    assert.equal(r.body.data[0].status, 2);
    assert.match(r.body.data[0].message, /could not be installed: .*sluice-missing/s);
    assert.deepEqual(envDirs(suite.server), before);
    assert.deepEqual(
      readdirSync(path.join(suite.server.dataDir, "envs")).filter((n) => n.startsWith(".")),
      [],
      "no temporary build directory is left",
    );
    const found = await suite.server.call("POST", "/script/external/missing/run-sync", {
      headers: scopeHeaders(),
      body: {},
    });
    assert.equal(found.body.status, false, "the element was not stored");
  });

  it("refuses malformed declarations with a message naming the line", async () => {
    const cases: [string, string | Uint8Array, RegExp][] = [
      ["open.py", "# /// script\n# dependencies = []\ndef main(): pass\n", /line 3: .*not closed/],
      [
        "url.py",
        '# /// script\n# dependencies = ["x @ https://e.x/x.whl"]\n# ///\n',
        /not a requirement/,
      ],
      ["key.py", '# /// script\n# deps = ["x"]\n# ///\n', /unknown key "deps"/],
      [
        "opt.zip",
        makeZip([
          { name: "main.py", content: "def main(): pass\n" },
          { name: "requirements.txt", content: "--index-url https://evil.example/\nx\n" },
        ]),
        /requirements.txt line 1: pip options/,
      ],
    ];
    for (const [name, content, message] of cases) {
      const r = await upload(suite.server, [{ name, content }], { path: "/bad" });
      assert.equal(r.body.data[0].status, 2, name);
      assert.match(r.body.data[0].message, message, name);
    }
  });

  it("removes an environment no element uses any more", async () => {
    const src =
      '# /// script\n# dependencies = ["sluice-helper"]\n# ///\ndef main():\n    return 2\n';
    const r = await upload(suite.server, [{ name: "helper_only.py", content: src }], {
      path: "/gc",
    });
    assert.equal(r.body.data[0].status, 0, r.text);
    const own = (await versionOf(suite.server, "helper_only")).env.hash as string;
    const shared = (await versionOf(suite.server, "deps_py")).env.hash as string;
    assert.deepEqual(envDirs(suite.server), [own, shared].sort());
    const plain = await upload(
      suite.server,
      [{ name: "helper_only.py", content: "def main():\n    return 3\n" }],
      {
        path: "/gc",
        overwrite: "true",
      },
    );
    assert.equal(plain.body.data[0].status, 0);
    assert.equal((await versionOf(suite.server, "helper_only")).env, null);
    assert.deepEqual(envDirs(suite.server), [shared]);
    assert.deepEqual(await runSync(suite.server, "helper_only"), { status: "SUCCESS", body: 3 });
  });
});

describe("a node that lacks an environment", () => {
  it("builds it from the version's stored set before running the task", async () => {
    const wheels = wheelFolder();
    const pip = { PIP_NO_INDEX: "1", PIP_FIND_LINKS: wheels };
    const firstDir = mkdtempSync(path.join(os.tmpdir(), "sluice-deps-a-"));
    // A data directory of its own (kept for the embedded restart), on this mode's database.
    const first = await startServer(
      { ...(await modeEnv()), ...pip },
      { dataDir: firstDir, keepData: true },
    );
    const closing: TestServer[] = [first];
    try {
      const r = await upload(first, [{ name: "deps_py.py", content: MODULE }], { path: "/n" });
      assert.equal(r.body.data[0].status, 0, r.text);
      const hash = (await versionOf(first, "deps_py")).env.hash as string;
      let second: TestServer;
      if (TEST_MODE === "cluster") {
        // Another node of the cluster: the same database, a data directory of its own.
        const dataDir = mkdtempSync(path.join(os.tmpdir(), "sluice-deps-b-"));
        second = await startServer(
          { ...pip, DATABASE_URL: first.config.databaseUrl ?? "" },
          { dataDir },
        );
      } else {
        // Embedded: the same node after its environments were lost.
        await first.close();
        closing.pop();
        rmSync(path.join(firstDir, "envs"), { recursive: true, force: true });
        second = await startServer(pip, { dataDir: firstDir, keepData: true });
      }
      closing.push(second);
      assert.deepEqual(envDirs(second), []);
      const run = await runSync(second, "deps_py");
      // Built, then preloaded by the environment's zygote.
      assert.deepEqual(run, { status: "SUCCESS", body: { help: "helped", warm: true } });
      assert.deepEqual(envDirs(second), [hash]);
    } finally {
      for (const s of closing) await s.close();
      rmSync(firstDir, { recursive: true, force: true });
      rmSync(wheels, { recursive: true, force: true });
    }
  });
});

describe("preloading zygotes' uids", () => {
  const suite = serveWheels();

  it("gives each environment's preloading zygote uids no other zygote's task has", async () => {
    const uidOf = (pkgs: string) => `# /// script
# dependencies = [${pkgs}]
# ///
import os
def main():
    return os.getuid()
`;
    const files = [
      { name: "uid_a.py", content: uidOf('"sluice-slow"') },
      { name: "uid_b.py", content: uidOf('"sluice-helper"') },
      { name: "uid_plain.py", content: uidOf("") },
    ];
    const r = await upload(suite.server, files, { path: "/uids" });
    assert.deepEqual(
      r.body.data.map((d: { status: number }) => d.status),
      [0, 0, 0],
      r.text,
    );
    const uid = async (name: string) => (await runSync(suite.server, name)).body as number;
    const [a, b, plain] = [await uid("uid_a"), await uid("uid_b"), await uid("uid_plain")];
    // The block: the default zygote's 256 uids, then one slice of 1 + 2 × 64 per preloading
    // zygote (its first is the namespace's root), then the syntax checks'.
    const slice = (u: number) => Math.floor((u - plain) / 129);
    assert.ok(plain < a && plain < b, `${plain} ${a} ${b}`);
    assert.notEqual(slice(a), slice(b), `two environments, one slice: ${a} ${b}`);
    assert.ok(a - plain > 1 && b - plain > 1);
  });
});
