import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import type { Store } from "../../src/store/types.ts";
import { DF, deployAndActivate } from "../helpers/flows.ts";
import { scopeHeaders, startServer, type TestServer, upload } from "../helpers/server.ts";
import { pollUntil } from "../helpers/wait.ts";

/**
 * The store failing under a run (its database gone) must fail that run's answer or be logged; it
 * must never be an unhandled rejection, which ends the process.
 */
describe("a store that fails under running work does not end the process", () => {
  let server: TestServer;
  let slow: http.Server;
  /** Answers held by the receiver until the test lets them go (`?hold=1`). */
  const held: http.ServerResponse[] = [];
  const release = () => {
    for (const res of held.splice(0)) res.end('{"ok":true}');
  };
  const h = scopeHeaders();
  const restore: (() => void)[] = [];
  // Either would end the service's process (an event listener's rejected promise is rethrown as
  // an uncaught exception); here each test names what it caused.
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);

  /** Breaks one store method (for the run IDs `which` picks); resolves once the service has called it and seen it fail. */
  function breakStore(
    method: "insertRun" | "endRun" | "getRun",
    which = (_id: string) => true,
  ): Promise<void> {
    const store = server.services.store as unknown as Record<string, unknown>;
    const original = store[method] as (...args: unknown[]) => Promise<unknown>;
    let failed!: () => void;
    const called = new Promise<void>((resolve) => {
      failed = resolve;
    });
    store[method] = (...args: unknown[]) => {
      const arg = args[method === "getRun" ? 1 : 0];
      const id = typeof arg === "string" ? arg : (arg as { id: string }).id;
      if (!which(id)) return original.apply(server.services.store, args);
      const rejected = Promise.reject(new Error(`store down (${method})`));
      // After the caller's reactions to the rejection: an unhandled one is reported by then.
      rejected.catch(() => setImmediate(failed));
      return rejected;
    };
    restore.push(() => {
      store[method] = original;
    });
    return called;
  }

  const healthy = async () => {
    for (const f of restore.splice(0)) f();
    assert.deepEqual(unhandled.splice(0).map(String), [], "unhandled rejections and exceptions");
    assert.equal((await server.call("GET", "/health")).status, 200);
  };

  before(async () => {
    process.on("unhandledRejection", onUnhandled);
    process.on("uncaughtException", onUnhandled);
    // `?hold=1` answers only when the test releases it: a flow that outlasts the run-sync
    // write-behind grace for as long as the test needs, whatever the machine's speed.
    slow = http.createServer((req, res) => {
      if (new URL(req.url ?? "/", "http://x").searchParams.get("hold")) held.push(res);
      else res.end('{"ok":true}');
    });
    await new Promise<void>((r) => slow.listen(0, "127.0.0.1", r));
    const slowUrl = `http://127.0.0.1:${(slow.address() as AddressInfo).port}`;
    server = await startServer();
    const httpFlow = (hold: boolean) => ({
      vertexes: [
        { id: "in", type: "input" },
        { id: "call", type: "http", config: { url: `${slowUrl}/?hold=${hold ? 1 : ""}` } },
      ],
      edges: [{ source: "in", target: "call" }],
    });
    await deployAndActivate(server, "quick", httpFlow(false));
    await deployAndActivate(server, "slow", httpFlow(true));
    await deployAndActivate(server, "child", httpFlow(true));
    await deployAndActivate(server, "parent", {
      vertexes: [
        { id: "in", type: "input" },
        {
          id: "sub",
          type: "subflow",
          config: { element: { elementName: "child", path: "/flows" } },
        },
      ],
      edges: [{ source: "in", target: "sub" }],
    });
    const up = await upload(
      server,
      [
        {
          name: "nap.py",
          content: "import time\ndef main(p):\n    time.sleep(0.3)\n    return 1\n",
        },
      ],
      { path: "/" },
    );
    assert.equal(up.body.data[0].status, 0);
  });
  after(async () => {
    process.off("unhandledRejection", onUnhandled);
    process.off("uncaughtException", onUnhandled);
    for (const f of restore.splice(0)) f();
    release();
    await server?.close();
    slow?.close();
  });

  it("an in-process run whose end cannot be recorded", async () => {
    const failed = breakStore("endRun");
    const r = await server.call("POST", `${DF}/run`, {
      headers: h,
      body: { elementName: "quick", inProcess: true },
    });
    assert.equal(r.body.status, true, r.text);
    await failed; // the run ended and could not be recorded
    await healthy();
  });

  it("a flow run-sync whose STARTED insert fails after the grace answers an error", async () => {
    const failed = breakStore("insertRun");
    const answer = server.call("POST", `${DF}/run-sync`, {
      headers: h,
      body: { elementName: "slow" },
    });
    await failed; // the grace passed while the http node waited, and the STARTED insert failed
    release();
    const r = await answer;
    assert.deepEqual([r.status, r.body.status, r.body.code], [200, false, 999999]);
    await healthy();
  });

  it("a script run-sync whose STARTED insert fails after the grace answers an error", async () => {
    breakStore("insertRun");
    const r = await server.call("POST", "/script/external/nap/run-sync", { headers: h, body: {} });
    assert.deepEqual([r.status, r.body.status, r.body.code], [200, false, 999999]);
    await healthy();
  });

  it("terminating a parent whose sub-flow run cannot be read", async () => {
    const started = await server.call("POST", `${DF}/run`, {
      headers: h,
      body: { elementName: "parent" },
    });
    const parentId = started.body.data as string;
    const store = server.services.store as Store;
    // The parent must be waiting on its sub-flow's end before the store breaks: a parent whose
    // own read of the child fails first ends by itself, and the terminate then rightly answers
    // false. Nothing announces a new waiter, hence the poll of the waiter count.
    const { events } = server.services;
    const childId = await pollUntil(
      async () => (events.waiting() > 0 ? (await store.childRuns(parentId))[0]?.id : undefined),
      (id) => id !== undefined,
      "the parent waits on its started sub-flow run",
    );
    const failed = breakStore("getRun", (id) => id === childId);
    const t = await server.call("POST", `${DF}/run/terminate`, {
      headers: h,
      body: { runIds: [parentId] },
    });
    assert.deepEqual(t.body.data, { [parentId]: true });
    await failed; // the abort listener's read of the sub-flow run failed
    await healthy();
  });
});
