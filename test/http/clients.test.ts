import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { startServer, type TestServer } from "../helpers/server.ts";

/**
 * Three real clients of the kind business systems use, written as their teams write them
 * (docs/errors.md, "Clients as business systems write them"): Java with Jackson's default
 * ObjectMapper over java.net.http, Python with requests and dataclasses, and Go with net/http's
 * default Client and encoding/json (omitempty). Each runs the same scenario against a real server
 * in signature mode and checks every answer itself; this test compiles the Java and Go clients
 * once, runs all three as child processes, and checks their exits, their steps, and the runs they
 * started in the store. `npm test` runs this file in both modes.
 */

const CLIENTS = path.resolve(import.meta.dirname, "../clients");
const FIXTURES = path.join(CLIENTS, "fixtures");
// Debian's libjackson2-databind-java (bin/system-deps.sh installs it for the tests).
const JACKSON = ["jackson-databind", "jackson-core", "jackson-annotations"].map(
  (jar) => `/usr/share/java/${jar}.jar`,
);
const JAVAC = "/usr/bin/javac";
const JAVA = "/usr/bin/java";
const PYTHON = "/usr/bin/python3";
// Debian's golang-go (bin/system-deps.sh installs it for the tests).
const GO = "/usr/bin/go";

const SECRETS = { app: "clients-app-secret", internal: "clients-internal-secret" };
const ENV = {
  AUTH_MODE: "signature",
  AUTH_APP_SECRETS: `app1=${SECRETS.app}`,
  AUTH_INTERNAL_SECRET: SECRETS.internal,
};

/** The steps both clients print, in order: the same scenario in both languages. */
const STEPS = [
  "upload",
  "deploy-orders",
  "deploy-scored",
  "activate-orders",
  "activate-scored",
  "run-async",
  "run-result",
  "run-sync",
  "run-bad-parameter",
  "list-runs-async",
  "list-runs-sync",
  "script-external-run-sync",
  "script-result",
  "script-run-sync",
  "script-run",
  "script-lifespan",
  "list-tasks",
];

/**
 * The two graphs as the flow editor would write them, without a null: the clients build them from
 * classes that send every unset field as null, and the deploy stores exactly these.
 */
const INPUT = {
  id: "in",
  type: "input",
  config: { schema: { type: "object", required: ["orders"] } },
};
const CLEAN = {
  id: "clean",
  type: "transform",
  config: {
    operators: [
      { id: "f1", type: "expr", expr: "orders" },
      { id: "f2", type: "filter", expr: "amount > 0" },
      { id: "m1", type: "map", fields: { total: "amount * qty" } },
    ],
  },
};
const SCORE = {
  id: "score",
  type: "script",
  config: { element: { elementName: "score", path: "/clients/scripts" } },
};
const OUT = { id: "out", type: "output" };
const GRAPHS: Record<string, unknown> = {
  orders: {
    vertexes: [INPUT, CLEAN, OUT],
    edges: [
      { source: "in", target: "clean" },
      { source: "clean", target: "out" },
    ],
  },
  scored: {
    vertexes: [INPUT, CLEAN, SCORE, OUT],
    edges: [
      { source: "in", target: "clean" },
      { source: "clean", target: "score" },
      { source: "score", target: "out" },
    ],
  },
};
/** The orders' parameter as the Java and Python clients send it: each unset note as null. */
const NULL_NOTES_PARAM = {
  orders: [
    { amount: 2, qty: 3, note: null },
    { amount: 0, qty: 9, note: null },
    { amount: 5, qty: 1, note: null },
  ],
  tag: "async",
};
/**
 * The Go client's: no note (omitempty), its int64 IDs as strings (`json:",string"`: past 2^53 a
 * number would be refused, docs/errors.md), its time.Time values as RFC 3339 with nanoseconds.
 */
const GO_PARAM = {
  orders: [
    {
      id: "1789012345678901234",
      amount: 2,
      qty: 3,
      placedAt: "2024-03-01T09:30:00.123456789+01:00",
    },
    {
      id: "1789012345678901235",
      amount: 0,
      qty: 9,
      placedAt: "2024-03-01T09:30:01.623456789+01:00",
    },
    {
      id: "1789012345678901237",
      amount: 5,
      qty: 1,
      placedAt: "2024-03-01T09:31:00.123456796+01:00",
    },
  ],
  tag: "async",
};
/** Every client's configure, its defaults written out, as stored without its nulls. */
const CONFIGURE = {
  triggers: [{ type: "manual" }],
  errorHandlers: {},
  runNameTemplate: "${elementName}-${param.tag}",
  runTimeout: { type: "system" },
  logContent: "DETAILED",
  fileCleanup: { type: "default" },
};

/**
 * `go build` of the Go client without the network (it uses the standard library only): the local
 * toolchain, no module proxy, no cgo (no C compiler needed), no go env file. The build cache is
 * the user's cache directory, so only the first build compiles the standard library; GOPATH (the
 * module cache, never filled without dependencies) is the build's temporary directory.
 */
function goEnv(tmp: string): Record<string, string> {
  const cache = process.env.XDG_CACHE_HOME || path.join(os.homedir(), ".cache");
  return {
    PATH: "/usr/bin:/bin",
    HOME: os.homedir(),
    GOCACHE: path.join(cache, "sluice-tests", "go-build"),
    GOPATH: path.join(tmp, "gopath"),
    GOTOOLCHAIN: "local",
    GOPROXY: "off",
    GOFLAGS: "",
    GOENV: "off",
    CGO_ENABLED: "0",
  };
}

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Runs a program to its end; resolves on its exit, never on a timer. */
function runProgram(
  command: string,
  args: string[],
  env: Record<string, string>,
  cwd?: string,
): Promise<Exit> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env, cwd, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (c: string) => (stdout += c));
    child.stderr.setEncoding("utf8").on("data", (c: string) => (stderr += c));
    child.on("error", reject);
    child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}

/** "ok STEP [ID]" lines in order, and the final "done N steps". */
function parseSteps(stdout: string): { steps: string[]; ids: Map<string, string> } {
  const lines = stdout.trim().split("\n");
  const last = lines.pop();
  assert.equal(last, `done ${STEPS.length} steps`, stdout);
  const steps: string[] = [];
  const ids = new Map<string, string>();
  for (const line of lines) {
    const m = /^ok (\S+)(?: (.+))?$/.exec(line);
    assert.ok(m?.[1], `unexpected output line: ${line}`);
    steps.push(m[1]);
    if (m[2] !== undefined) ids.set(m[1], m[2]);
  }
  return { steps, ids };
}

describe("business-system clients (Java + Jackson, Python + requests, Go + encoding/json)", () => {
  let server: TestServer;
  let classes = "";
  let goBuild = "";

  before(async () => {
    server = await startServer(ENV);
    classes = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-java-client-"));
    const sources = fs
      .readdirSync(path.join(CLIENTS, "java", "sluiceclient"))
      .filter((f) => f.endsWith(".java"))
      .map((f) => path.join(CLIENTS, "java", "sluiceclient", f));
    const javac = await runProgram(JAVAC, ["-d", classes, "-cp", JACKSON.join(":"), ...sources], {
      PATH: "/usr/bin:/bin",
    });
    assert.equal(javac.code, 0, `javac failed:\n${javac.stdout}${javac.stderr}`);
    goBuild = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-go-client-"));
    const go = await runProgram(
      GO,
      ["build", "-o", path.join(goBuild, "sluiceclient"), "."],
      {
        ...goEnv(goBuild),
      },
      path.join(CLIENTS, "go"),
    );
    assert.equal(go.code, 0, `go build failed:\n${go.stdout}${go.stderr}`);
  });
  after(async () => {
    await server?.close();
    if (classes) fs.rmSync(classes, { recursive: true, force: true });
    if (goBuild) fs.rmSync(goBuild, { recursive: true, force: true });
  });

  /** Environment of a client: only what it reads (no proxy or locale of the test runner). */
  const clientEnv = (space: string, user: string): Record<string, string> => ({
    PATH: "/usr/bin:/bin",
    SLUICE_URL: server.url,
    SLUICE_APP: "app1",
    SLUICE_SPACE: space,
    SLUICE_USER: user,
    SLUICE_APP_SECRET: SECRETS.app,
    SLUICE_INTERNAL_SECRET: SECRETS.internal,
    SLUICE_FIXTURES_DIR: FIXTURES,
    DATAFLOW_PREFIX: server.config.dataflowPrefix,
    SCRIPT_PREFIX: server.config.scriptPrefix,
  });

  /** The client's own checks passed, and what it says it started is in the store as it says. */
  async function assertScenario(
    exit: Exit,
    space: string,
    user: string,
    param: unknown = NULL_NOTES_PARAM,
  ): Promise<void> {
    assert.equal(exit.code, 0, `client failed (${exit.signal ?? exit.code}):\n${exit.stderr}`);
    assert.equal(exit.stderr, "");
    const { steps, ids } = parseSteps(exit.stdout);
    assert.deepEqual(steps, STEPS);
    assert.equal(ids.get("run-result"), ids.get("run-async"));
    assert.equal(ids.get("list-runs-async"), ids.get("run-async"));
    assert.equal(ids.get("list-runs-sync"), ids.get("run-sync"));
    assert.equal(ids.get("script-result"), ids.get("script-external-run-sync"));
    assert.equal(ids.get("list-tasks"), ids.get("script-external-run-sync"));
    assert.equal(ids.get("script-lifespan"), ids.get("script-run"));

    const scope = { app: "app1", space };
    const expected: [string, string, string, string][] = [
      ["run-async", "orders", "DPL", "ASYNC"],
      ["run-sync", "scored", "DPL", "SYNC"],
      ["script-external-run-sync", "greet", "PY", "SYNC"],
      ["script-run-sync", "score", "PY", "SYNC"],
      ["script-run", "score", "PY", "ASYNC"],
    ];
    for (const [step, elementName, elementType, trigger] of expected) {
      const run = await server.services.store.getRun(scope, ids.get(step) ?? "");
      assert.deepEqual(
        [run?.elementName, run?.elementType, run?.triggerType, run?.status, run?.initiator],
        [elementName, elementType, trigger, "SUCCESS", { userId: user }],
        step,
      );
    }
    // Each graph and configure, sent with every unset field null, is stored as written by hand.
    for (const name of ["orders", "scored"]) {
      const [el] = await server.services.store.findElements(scope, { type: "DPL", name });
      const rev = await server.services.store.flowRevision(el?.id ?? "", 1);
      assert.deepEqual([rev?.flow, rev?.configure], [GRAPHS[name], CONFIGURE], name);
    }
    // The parameter is free-form: the orders are stored as the client sent them (null notes too).
    const asyncRun = await server.services.store.getRun(scope, ids.get("run-async") ?? "");
    assert.deepEqual(JSON.parse(asyncRun?.runParam ?? "null"), param);
  }

  it("the Java client (Jackson default ObjectMapper, java.net.http) runs the whole scenario", async () => {
    const exit = await runProgram(
      JAVA,
      ["-cp", [classes, ...JACKSON].join(":"), "sluiceclient.Main"],
      clientEnv("java", "java-team"),
    );
    await assertScenario(exit, "java", "java-team");
  });

  it("the Go client (net/http default Client, encoding/json with omitempty) runs the whole scenario", async () => {
    const exit = await runProgram(
      path.join(goBuild, "sluiceclient"),
      [],
      clientEnv("go", "go-team"),
    );
    await assertScenario(exit, "go", "go-team", GO_PARAM);
  });

  it("the Python client (requests, dataclasses with None fields) runs the whole scenario", async () => {
    const exit = await runProgram(
      PYTHON,
      [path.join(CLIENTS, "python", "sluice_client.py")],
      clientEnv("python", "py-team"),
    );
    await assertScenario(exit, "python", "py-team");
  });
});
