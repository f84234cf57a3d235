import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { DF, deployAndActivate, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import {
  OTHER_SCOPE,
  SCOPE,
  scopeHeaders,
  startServer,
  TEST_MODE,
  type TestServer,
  upload,
} from "../helpers/server.ts";
import { type Condition, condition, onRunEvents } from "../helpers/wait.ts";

/** An HTTP target that holds every request until the test releases it, one at a time. */
interface Holder {
  url: string;
  held: http.ServerResponse[];
  maxHeld: number;
  arrived: number;
  changes: Condition;
  releaseOne(): void;
  close(): Promise<void>;
}

async function startHolder(): Promise<Holder> {
  const changes = condition();
  const h: Holder = {
    url: "",
    held: [],
    maxHeld: 0,
    arrived: 0,
    changes,
    releaseOne: () => h.held.shift()?.end("{}"),
    close: () =>
      new Promise<void>((resolve) => {
        for (const res of h.held.splice(0)) res.end("{}");
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  const server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      res.setHeader("content-type", "application/json");
      h.held.push(res);
      h.arrived++;
      h.maxHeld = Math.max(h.maxHeld, h.held.length);
      changes.changed();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  h.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return h;
}

const held = (url: string) => ({
  vertexes: [
    { id: "in", type: "input" },
    { id: "wait", type: "http", config: { url: `${url}/hold` } },
  ],
  edges: [{ source: "in", target: "wait" }],
});

/** Runs STARTED at once, as the services of every node tell it: started adds, ended removes. */
function watchStarted(servers: TestServer[]) {
  const started = new Set<string>();
  const order: string[] = [];
  const w = { max: 0, order, started };
  for (const s of servers) {
    s.services.events.subscribe((e) => {
      if (e.type === "started") {
        started.add(e.runId);
        order.push(e.runId);
        w.max = Math.max(w.max, started.size);
      } else if (e.type === "ended") started.delete(e.runId);
    });
  }
  return w;
}

const start = async (s: TestServer, elementName: string, headers = scopeHeaders()) => {
  const r = await s.call("POST", `${DF}/run`, { headers, body: { elementName, parameter: {} } });
  assert.equal(r.body.status, true, r.text);
  return r.body.data as string;
};

/** 10 runs of a flow limited to 2, started through every server given: never 3 at once. */
async function limitedToTwo(servers: TestServer[], holder: Holder, name: string) {
  const first = servers[0] as TestServer;
  await deployAndActivate(first, name, held(holder.url), { maxConcurrentRuns: 2 });
  const watch = watchStarted(servers);
  const ids = await Promise.all(
    Array.from({ length: 10 }, (_, i) => start(servers[i % servers.length] as TestServer, name)),
  );
  for (let released = 0; released < 10; released++) {
    // The limit fills (2 held while at least 2 are left), and never overflows.
    const want = Math.min(2, 10 - released);
    await holder.changes.until(() => holder.held.length >= want, `${want} held`, 20_000);
    assert.ok(holder.held.length <= 2, `${holder.held.length} runs executing at once`);
    holder.releaseOne();
  }
  for (const id of ids) {
    const r = await first.call("GET", `${DF}/run/${id}/result?timeout=30`, {
      headers: scopeHeaders(),
    });
    assert.equal(r.body.status, true, r.text);
  }
  assert.equal(holder.arrived, 10);
  assert.equal(holder.maxHeld, 2);
  assert.ok(watch.max <= 2, `${watch.max} runs STARTED at once`);
  return ids;
}

describe("concurrency limits", () => {
  let server: TestServer;
  let holder: Holder;
  before(async () => {
    server = await startServer();
    holder = await startHolder();
  });
  after(async () => {
    await server.close();
    await holder.close();
  });

  it("a flow limited to 2 never has 3 STARTED, and all 10 runs end", async () => {
    await limitedToTwo([server], holder, "limited");
  });

  it("a run-sync of a limited flow waits for a slot within its timeout", async () => {
    await deployAndActivate(server, "limited1", held(holder.url), { maxConcurrentRuns: 1 });
    holder.arrived = 0;
    const events = onRunEvents(server.services.events);
    const first = await start(server, "limited1");
    await holder.changes.until(() => holder.held.length === 1, "the first run holds the slot");
    const sync = server.call("POST", `${DF}/run-sync`, {
      headers: scopeHeaders(),
      body: { elementName: "limited1", parameter: {}, timeout: 30 },
    });
    await events.readUntil(
      () => server.services.store.unfinishedRuns(["QUEUED"]),
      (q) => q.length === 1,
      "the run-sync waits QUEUED",
    );
    assert.equal(holder.arrived, 1);
    holder.releaseOne();
    await holder.changes.until(() => holder.arrived === 2, "the run-sync starts after the first");
    holder.releaseOne();
    const answer = await sync;
    assert.equal(answer.body.status, true, answer.text);
    const r = await server.call("GET", `${DF}/run/${first}/result?timeout=30`, {
      headers: scopeHeaders(),
    });
    assert.equal(r.body.status, true, r.text);
  });

  it("maxConcurrentRuns is at most 2147483647 (the column holding it); that limit runs", async () => {
    const deploy = (elementName: string, maxConcurrentRuns: number) =>
      server.call("POST", `${DF}/flow/deploy`, {
        headers: scopeHeaders(),
        body: {
          elementName,
          revisionName: "r1",
          path: "/flows",
          flow: NO_SCRIPT_FLOW,
          configure: { maxConcurrentRuns },
        },
      });
    const d = await deploy("too-many", 2 ** 31);
    const found = (d.body.data ?? []) as { errorMessage: string }[];
    assert.ok(
      found.some((r) => /maxConcurrentRuns must be a positive integer/.test(r.errorMessage)),
      d.text,
    );
    await deployAndActivate(server, "many", NO_SCRIPT_FLOW, { maxConcurrentRuns: 2 ** 31 - 1 });
    const run = await server.call("POST", `${DF}/run`, {
      headers: scopeHeaders(),
      body: { elementName: "many", parameter: { orders: [] } },
    });
    assert.equal(run.body.status, true, run.text);
    const r = await server.call("GET", `${DF}/run/${run.body.data}/result?timeout=30`, {
      headers: scopeHeaders(),
    });
    assert.equal(r.body.status, true, r.text);
  });

  it("maxConcurrentRuns must be a positive integer", async () => {
    const d = await server.call("POST", `${DF}/flow/deploy`, {
      headers: scopeHeaders(),
      body: {
        elementName: "bad",
        revisionName: "r1",
        path: "/flows",
        flow: NO_SCRIPT_FLOW,
        configure: { maxConcurrentRuns: 0 },
      },
    });
    const found = (d.body.data ?? []) as { path?: unknown[]; errorMessage: string }[];
    assert.ok(
      found.some((r) => /maxConcurrentRuns must be a positive integer/.test(r.errorMessage)),
      d.text,
    );
  });
});

describe("a Python element's limit (# sluice-max-concurrent-runs)", () => {
  let server: TestServer;
  let holder: Holder;
  before(async () => {
    // Tasks reach the holder on loopback: the host's network, for this test only.
    server = await startServer({ SCRIPT_NETWORK: "true" });
    holder = await startHolder();
  });
  after(async () => {
    await server.close();
    await holder.close();
  });

  const held = [
    "# sluice-max-concurrent-runs: 2",
    "import urllib.request",
    "def main(p):",
    "    return urllib.request.urlopen(p['url'], data=b'{}', timeout=60).read().decode()",
    "",
  ].join("\n");

  it("a bad declaration refuses the upload, naming it", async () => {
    const r = await upload(
      server,
      [
        {
          name: "badlimit.py",
          content: "# sluice-max-concurrent-runs: two\ndef main(p): return 1\n",
        },
      ],
      { path: "/s" },
    );
    const item = (r.body.data as { status: number; message: string }[])[0];
    assert.equal(item?.status, 2, r.text);
    assert.match(item?.message ?? "", /sluice-max-concurrent-runs must be a whole number/);
  });

  it("8 tasks of an element limited to 2: never 3 executing, all 8 end", async () => {
    const up = await upload(server, [{ name: "held.py", content: held }], { path: "/s" });
    assert.equal((up.body.data as { status: number }[])[0]?.status, 0, up.text);
    const watch = watchStarted([server]);
    const ids = await Promise.all(
      Array.from({ length: 8 }, async () => {
        const r = await server.call("POST", "/script/script/run", {
          headers: scopeHeaders(),
          body: { elementName: "held", parameter: { url: `${holder.url}/hold` } },
        });
        assert.equal(r.body.status, true, r.text);
        return r.body.data as string;
      }),
    );
    // Starting a task takes a process and an import: the state is checked once it settled, with
    // exactly 2 executing and the rest waiting QUEUED (without the limit they would all start).
    server.services.events.subscribe(() => holder.changes.changed());
    const state = async () => {
      const queued = await server.services.store.unfinishedRuns(["QUEUED"]);
      return { held: holder.held.length, queued: queued.filter((r) => ids.includes(r.id)).length };
    };
    for (let released = 0; released < 8; released++) {
      const held = Math.min(2, 8 - released);
      const queued = 8 - released - held;
      await holder.changes.readUntil(
        state,
        (v) => v.held === held && v.queued === queued,
        `${held} executing, ${queued} waiting`,
        30_000,
      );
      holder.releaseOne();
    }
    for (const id of ids) {
      const r = await server.call("GET", `/script/script/result/${id}?timeout=30`, {
        headers: scopeHeaders(),
      });
      assert.equal(r.body.status, true, r.text);
    }
    assert.equal(holder.arrived, 8);
    assert.equal(holder.maxHeld, 2);
    assert.ok(watch.max <= 2, `${watch.max} tasks STARTED at once`);
  });
});

describe("fair turns across spaces", () => {
  let server: TestServer;
  let holder: Holder;
  before(async () => {
    // One flow slot: every start is a turn of that slot. Both spaces are one app's, which may
    // hold every queued place here.
    server = await startServer({ FLOW_CONCURRENCY: "1", LIMIT_QUEUED_RUNS_PER_APP: "10000" });
    holder = await startHolder();
  });
  after(async () => {
    await holder.close();
    await server.close();
  });

  it("a space's single run starts within one turn while another space has 5,000 queued", async () => {
    await deployAndActivate(server, "blocker", held(holder.url));
    await deployAndActivate(server, "quick", NO_SCRIPT_FLOW);
    await deployAndActivate(server, "quick", NO_SCRIPT_FLOW, {}, scopeHeaders(OTHER_SCOPE));
    const watch = watchStarted([server]);
    await start(server, "blocker");
    await holder.changes.until(() => holder.held.length === 1, "the blocker holds the slot");
    const { flows } = server.services;
    const req = {
      scope: { app: SCOPE.app, space: SCOPE.space },
      user: SCOPE.user,
      locator: { elementName: "quick" },
      parameter: { orders: [] },
      inProcess: false,
      trigger: "API" as const,
    };
    for (let i = 0; i < 10; i++)
      await Promise.all(Array.from({ length: 500 }, () => flows.start(req)));
    const queued = await server.services.store.unfinishedRuns(["QUEUED"]);
    assert.equal(queued.length, 5000);
    const other = await server.call("POST", `${DF}/run`, {
      headers: scopeHeaders(OTHER_SCOPE),
      body: { elementName: "quick", parameter: { orders: [] } },
    });
    const otherId = other.body.data as string;
    const seen = watch.order.length;
    const events = onRunEvents(server.services.events);
    holder.releaseOne();
    await events.until(() => watch.order.includes(otherId), "the other space's run starts", 30_000);
    // Starts after the blocker's slot freed: at most one of the 5,000 before it.
    const position = watch.order.indexOf(otherId) - seen;
    assert.ok(
      position <= 1,
      `the other space's run was start ${position + 1} after the slot freed`,
    );
  });
});

// Two nodes on one database exist only in cluster mode; embedded mode has one process.
if (TEST_MODE === "cluster")
  describe("concurrency limits across two nodes", () => {
    let nodes: TestServer[] = [];
    let holder: Holder;
    before(async () => {
      // One flow slot each: the two runs the limit lets execute at once are on both nodes (with
      // more slots, which node fetches a job is chance, and one node may take them all).
      const first = await startServer({ FLOW_CONCURRENCY: "1" });
      const second = await startServer({
        DATABASE_URL: first.config.databaseUrl ?? "",
        FLOW_CONCURRENCY: "1",
      });
      nodes = [first, second];
      holder = await startHolder();
    });
    after(async () => {
      for (const n of nodes) await n.close();
      await holder.close();
    });

    it("the limit holds across nodes: never 3 STARTED, runs executed on both", async () => {
      const ids = await limitedToTwo(nodes, holder, "shared");
      const runs = await Promise.all(ids.map((id) => nodes[0]?.services.store.getRun(SCOPE, id)));
      const executedOn = new Set(runs.map((r) => r?.nodeId));
      assert.equal(executedOn.size, 2, `runs executed on ${[...executedOn].join(", ")}`);
    });
  });
