import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import pino from "pino";
import { normalizeConfigure } from "../../src/flows/graph.ts";
import { createErrorHandlers } from "../../src/runs/error-handlers/index.ts";
import { errorHandlerConfig } from "../../src/service-subscribers.ts";
import type { ScopeFilter } from "../../src/store/types.ts";
import { DF, deployAndActivate } from "../helpers/flows.ts";
import { scopeHeaders, startServer, type TestServer } from "../helpers/server.ts";
import { gate } from "../helpers/wait.ts";

/**
 * Two senders of one notification at once (docs/error-handlers.md, "Durable"), as a node that
 * took a mark over while its holder still sent it would be; here both on one node, over one run
 * lifecycle, in both modes. A custom handler's run ID is derived from the failed run, the event
 * and the attempt, so only one of them creates the handler's run; the other's start is refused
 * as a taken ID and it waits for that run; also when that run waits for its turn (a flow with a
 * run limit: committed QUEUED with its job). (Another node's row of the same ID refused by the
 * store: test/store/store-contract.test.ts, both dialects; a taken ID failing only its own
 * submit of a group commit: test/queue/queue-contract.test.ts, both queues.)
 */

const FAILING = {
  vertexes: [
    { id: "in", type: "input" },
    {
      id: "py",
      type: "script",
      config: { code: "def main(p):\n    raise RuntimeError('boom')\n" },
    },
  ],
  edges: [{ source: "in", target: "py" }],
};

const HANDLER = {
  vertexes: [
    { id: "in", type: "input" },
    { id: "out", type: "output" },
  ],
  edges: [{ source: "in", target: "out" }],
};

describe("a custom handler sent twice at once starts one run", () => {
  let server: TestServer;
  before(async () => {
    // A wait short enough that a handler's run never created fails the case instead of hanging it.
    server = await startServer({ ERROR_HANDLER_BACKOFF_MS: "5", CUSTOM_HANDLER_WAIT_S: "20" });
    await deployAndActivate(server, "race-handler", HANDLER);
    // With a run limit, the handler's run waits for its turn: committed QUEUED with its job, in a
    // cluster through the node's group commit (docs/cluster.md, "Group commit").
    await deployAndActivate(server, "race-limited", HANDLER, { maxConcurrentRuns: 1 });
    // Deployed without handlers: nothing is sent at its end; the test sends it, twice.
    await deployAndActivate(server, "race-failing", FAILING);
  });
  after(() => server.close());

  for (const handler of ["race-handler", "race-limited"])
    it(`both senders record the same handler run, and only one exists (${handler})`, async () => {
      await raceOnce(handler);
    });

  async function raceOnce(handler: string) {
    const r = await server.call("POST", `${DF}/run-sync`, {
      headers: scopeHeaders(),
      body: { elementName: "race-failing", parameter: {} },
    });
    const runId = r.headers.get("x-run-id") ?? "";
    const run = await server.services.store.getRun(null, runId);
    assert.equal(run?.status, "FAILURE");
    if (!run) return;
    const { services } = server;
    // Two senders over the same store and run lifecycle (what a node that took the mark over
    // is), whose reads of the handler's run are held until both have asked: both find none,
    // and both start it.
    const bothAsked = gate();
    let asked = 0;
    const store = new Proxy(services.store, {
      get(target, key, receiver) {
        if (key !== "getRun") return Reflect.get(target, key, receiver);
        return async (scope: ScopeFilter, id: string) => {
          const found = await target.getRun(scope, id);
          if (++asked === 2) bothAsked.open();
          await bothAsked.promise;
          return found;
        };
      },
    });
    const sender = () =>
      createErrorHandlers({
        store,
        flows: services.flows,
        tasks: services.tasks,
        events: services.events,
        clock: services.clock,
        logger: pino({ level: "silent" }),
        config: errorHandlerConfig(services.config),
      });
    const configure = normalizeConfigure({
      errorHandlers: { custom: { element: { elementName: handler, path: "/flows" } } },
    });
    const [a, b] = await Promise.all([
      sender().notify(run, configure, "run.failure"),
      sender().notify(run, configure, "run.failure"),
    ]);
    const children = await services.store.childRuns(runId);
    assert.equal(children.length, 1, "one handler run");
    const only = children[0]?.id;
    assert.deepEqual(
      [a, b].map((rs) => rs.map((x) => [x.kind, x.ok, x.runId])),
      [[["custom", true, only]], [["custom", true, only]]],
    );
    assert.equal(children[0]?.status, "SUCCESS");
  }
});
