import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { RunEvent } from "../../src/runs/run-events.ts";
import { DF, deployAndActivate, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import { scopeHeaders, startServer, type TestServer, upload } from "../helpers/server.ts";
import { within } from "../helpers/wait.ts";
import { startReceiver } from "./error-handlers-helpers.ts";

/**
 * docs/cluster.md, "Runs STARTED here that nothing executes", both modes: a flow run left STARTED
 * by this node with nothing executing it (a run whose insert committed but whose answer was lost)
 * ends FAILURE on the node's next sweeps, its error handler is called like any failure's; a task
 * executing on the node meanwhile is untouched.
 */
describe("a run STARTED by this node that nothing executes", () => {
  let server: TestServer;
  let hook: Awaited<ReturnType<typeof startReceiver>>;
  const h = scopeHeaders();
  const scope = { app: h.app, space: h.space };

  /** Every event published since the server started, and the waits for those yet to come. */
  const seen: RunEvent[] = [];
  const waits = new Set<(e: RunEvent) => void>();
  /** Resolves with the first event, published so far or from now on, that `match` accepts. */
  const event = <E extends RunEvent>(match: (e: RunEvent) => e is E, what: string) =>
    within(
      new Promise<E>((resolve) => {
        const past = seen.find(match);
        if (past) return resolve(past);
        const wait = (e: RunEvent) => {
          if (!match(e)) return;
          waits.delete(wait);
          resolve(e);
        };
        waits.add(wait);
      }),
      15_000,
      what,
    );

  before(async () => {
    hook = await startReceiver();
    server = await startServer({ ORPHAN_SWEEP_MS: "200" });
    server.services.events.subscribe((e) => {
      seen.push(e);
      for (const w of [...waits]) w(e);
    });
    const r = await upload(
      server,
      [{ name: "nap.py", content: "import time\ndef main(p):\n    time.sleep(p['s'])\n" }],
      { path: "/s" },
    );
    assert.equal(r.body.data[0]?.status, 0, JSON.stringify(r.body));
    await deployAndActivate(server, "orphaned", NO_SCRIPT_FLOW, {
      errorHandlers: { bot: { webhookUrl: `${hook.url}/orphaned` } },
    });
  });
  let taskId = "";
  after(async () => {
    // The task, should the test have failed before it stopped it.
    const task = await server.services.store.getRun(null, taskId);
    if (task) await server.services.tasks.terminate(task);
    await server.close();
    hook.close();
  });

  it("ends FAILURE with a message, its handler called; the task executing here goes on", async () => {
    const { services } = server;
    // A long task executing on this node: STARTED at once (embedded) or by the worker (cluster).
    const submit = await server.call("POST", "/script/external/nap/run?path=/s", {
      headers: h,
      body: { s: 30 },
    });
    taskId = submit.headers.get("x-task-id") ?? (submit.body.data as string);
    assert.ok(taskId, JSON.stringify(submit.body));
    await event(
      (e): e is RunEvent =>
        (e.type === "created" && e.run.id === taskId && e.run.startTime != null) ||
        (e.type === "started" && e.runId === taskId),
      "the task started",
    );

    // The record a flow run's lost commit leaves: STARTED by this node, executed by nobody.
    const done = await server.call("POST", `${DF}/run`, {
      headers: h,
      body: { elementName: "orphaned", parameter: { orders: [] } },
    });
    const template = done.body.data as string;
    const finished = await server.call("GET", `${DF}/run/${template}/result?timeout=5`, {
      headers: h,
    });
    assert.equal(finished.body.status, true, JSON.stringify(finished.body));
    const run = await services.store.getRun(scope, template);
    assert.ok(run);
    const lost = `${template}-lost`;
    const ended = event(
      (e): e is Extract<RunEvent, { type: "ended" }> => e.type === "ended" && e.runId === lost,
      "the orphan's end is published",
    );
    await services.store.insertRun({
      ...run,
      id: lost,
      status: "STARTED",
      createTime: Date.now(),
      startTime: Date.now(),
      nodeId: services.nodeId,
    });
    assert.equal((await ended).end.status, "FAILURE");

    const stored = await services.store.getRun(scope, lost);
    assert.equal(stored?.status, "FAILURE");
    const message = new RegExp(`node ${services.nodeId} is not executing this run`);
    assert.match(stored?.error ?? "", message);
    const result = await server.call("GET", `${DF}/run/${lost}/result`, { headers: h });
    assert.equal(result.body.code, 28020004, JSON.stringify(result.body));
    assert.match(result.body.message, message);
    await services.errorHandlers.idle();
    const hit = hook.hits.find((x) => x.path === "/orphaned");
    assert.ok(hit, "the bot handler was called");
    assert.equal(hit.body.runId, lost);
    assert.equal(hit.body.event, "run.failure");

    // The task executing here through the sweep that failed the orphan: still STARTED.
    const task = await services.store.getRun(scope, taskId);
    assert.equal(task?.status, "STARTED");
    assert.equal(await services.tasks.terminate(task), true);
    assert.equal((await services.store.getRun(scope, taskId))?.status, "CANCELED");
  });
});
