import assert from "node:assert/strict";
import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { DF } from "../helpers/flows.ts";
import { killHard, startProcess } from "../helpers/process.ts";
import { modeEnv, scopeHeaders, startServer, TEST_MODE } from "../helpers/server.ts";
import { pollUntil } from "../helpers/wait.ts";

/**
 * Runs executing at once hold their values: the parameter and every node's output stay in the
 * service's memory until the run ends, and a node may run as long as the flow says. Nothing bounded
 * them over the runs of a node (FLOW_CONCURRENCY, 1024): eleven async runs of an 8 MiB parameter
 * waiting at an http node exhausted a 256 MiB heap, and so did runs of a tiny parameter whose
 * http node fetched 12 MiB before the next one waited (docs/run-limits.md, "Values in memory").
 */
const MiB = 2 ** 20;
const ATTACKER = { app: "greedy", space: "s", user: "mallory" };
const VICTIM = { app: "victim", space: "s", user: "alice" };

interface Answer {
  status: boolean;
  code: number;
  message?: string;
  data?: unknown;
}

/** A server whose `/hang` never answers, and whose `/big` answers a 12 MiB JSON array. */
function hostileServer() {
  const held: http.ServerResponse[] = [];
  const big = JSON.stringify(Array.from({ length: 200_000 }, (_, i) => ({ i, n: "x".repeat(48) })));
  const srv = http.createServer((req, res) => {
    if (req.url === "/big") {
      res.setHeader("content-type", "application/json");
      res.end(big);
      return;
    }
    held.push(res);
  });
  return {
    held,
    url: async () => {
      await new Promise<void>((r) => srv.listen(0, "127.0.0.1", () => r()));
      return `http://127.0.0.1:${(srv.address() as AddressInfo).port}`;
    },
    close: () => {
      for (const r of held) r.destroy();
      srv.close();
    },
  };
}

async function attack(opts: { fetchBig: boolean; parameter: unknown; runs: number }) {
  const hostile = hostileServer();
  const base = await hostile.url();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-run-memory-"));
  const server = await startProcess({
    DATA_DIR: dataDir,
    NODE_OPTIONS: "--max-old-space-size=256",
    // Both budgets sized to the heap, as docs/errors.md and docs/run-limits.md ask.
    LIMIT_BODY_BYTES_IN_FLIGHT: String(48 * MiB),
    LIMIT_RUN_BYTES_IN_FLIGHT: String(48 * MiB),
    ...(await modeEnv()),
  });
  const call = async (scope: Record<string, string>, p: string, body?: unknown) => {
    const r = await fetch(server.url + p, {
      method: body === undefined ? "GET" : "POST",
      headers: { "content-type": "application/json", ...scope },
      ...(body === undefined
        ? {}
        : { body: typeof body === "string" ? body : JSON.stringify(body) }),
    });
    return (await r.json()) as Answer;
  };
  const deploy = async (scope: Record<string, string>, name: string, flow: unknown) => {
    const d = await call(scope, `${DF}/flow/deploy`, {
      elementName: name,
      revisionName: "r",
      path: "/",
      flow,
      configure: { logContent: "CONCISE" },
    });
    assert.equal(d.status, true, JSON.stringify(d));
    const a = await call(scope, `${DF}/flow/activate`, { elementName: name });
    assert.equal(a.data, "APPROVED", JSON.stringify(a));
  };
  try {
    const vertexes: unknown[] = [{ id: "in", type: "input" }];
    const edges = [];
    if (opts.fetchBig) {
      vertexes.push({ id: "big", type: "http", config: { url: `${base}/big` } });
      edges.push({ source: "in", target: "big" });
    }
    vertexes.push({ id: "wait", type: "http", config: { url: `${base}/hang` } });
    edges.push({ source: opts.fetchBig ? "big" : "in", target: "wait" });
    await deploy(ATTACKER, "hold", { vertexes, edges });
    await deploy(VICTIM, "echo", {
      vertexes: [
        { id: "in", type: "input" },
        { id: "out", type: "output" },
      ],
      edges: [{ source: "in", target: "out" }],
    });

    const accepted: string[] = [];
    const refused: string[] = [];
    const body = JSON.stringify({ elementName: "hold", parameter: opts.parameter });
    for (let i = 0; i < opts.runs; i++) {
      const r = await call(ATTACKER, `${DF}/run`, body);
      if (r.status) accepted.push(r.data as string);
      else {
        assert.equal(r.code, 429, JSON.stringify(r).slice(0, 300));
        refused.push(r.message ?? "");
      }
    }
    // Each accepted run is either held at the hanging server, or ended (refused its memory).
    const ended = async () => {
      const out: string[] = [];
      for (const id of accepted) {
        const r = await call(ATTACKER, `${DF}/run/${id}/result`);
        if (r.code !== 28020003) out.push(r.message ?? String(r.code));
      }
      return out;
    };
    const failures = await pollUntil(
      ended,
      (e) => e.length + hostile.held.length >= accepted.length,
      "every accepted run held or ended",
      { ms: 60_000, everyMs: 200 },
    );
    assert.equal(server.child.exitCode, null, server.output().slice(-1500));
    assert.equal(server.child.signalCode, null, server.output().slice(-1500));
    const named = [...refused, ...failures].filter((m) => m.includes("LIMIT_RUN_BYTES_IN_FLIGHT"));
    assert.ok(named.length > 0, `refusals name the setting: ${[...refused, ...failures]}`);

    // Another app is answered while the attacker's runs hold what they were allowed.
    const t = Date.now();
    const v = await call(VICTIM, `${DF}/run-sync`, { elementName: "echo", parameter: { ok: 1 } });
    assert.deepEqual(v.data, { ok: 1 }, JSON.stringify(v));
    assert.ok(Date.now() - t < 5000, `the victim waited ${Date.now() - t} ms`);
    assert.equal((await fetch(`${server.url}/health`)).status, 200);
  } catch (err) {
    throw new Error(`${String(err)}; the service said:\n${server.output().slice(-1500)}`);
  } finally {
    await killHard(server.child);
    hostile.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

describe("values of runs executing at once (LIMIT_RUN_BYTES_IN_FLIGHT)", () => {
  let orders: unknown;
  before(() => {
    orders = Array.from({ length: 90_000 }, (_, i) => ({ amount: i, note: "x".repeat(64) }));
  });
  after(() => {
    orders = undefined;
  });

  it("sixteen runs holding an 8 MiB parameter at a node that waits: the process lives, another app is answered", async () => {
    await attack({ fetchBig: false, parameter: { orders }, runs: 16 });
  });

  it("sixteen runs whose http node fetches 12 MiB before the next waits: the process lives", async () => {
    await attack({ fetchBig: true, parameter: {}, runs: 16 });
  });
});

describe("what a run holds comes back when it ends", () => {
  it("an app past its share is refused, another app is not, and the app runs again once its run ended", async () => {
    const hostile = hostileServer();
    const base = await hostile.url();
    const server = await startServer({
      LIMIT_BODY_BYTES: String(64 * 1024),
      LIMIT_RESULT_BYTES: String(64 * 1024),
      LIMIT_RUN_BYTES_IN_FLIGHT: String(128 * 1024),
      ...(await modeEnv()),
    });
    const start = async (scope: typeof ATTACKER, parameter: unknown) => {
      const r = await server.call("POST", `${DF}/run`, {
        headers: scopeHeaders(scope),
        body: { elementName: "hold", parameter },
      });
      return r.body as Answer;
    };
    const ended = (scope: typeof ATTACKER, id: string) =>
      pollUntil(
        async () =>
          (await server.call("GET", `${DF}/run/${id}/result`, { headers: scopeHeaders(scope) }))
            .body as Answer,
        (r) => r.code !== 28020003,
        `the end of run ${id}`,
      );
    try {
      const flow = {
        vertexes: [
          { id: "in", type: "input" },
          { id: "wait", type: "http", config: { url: `${base}/hang` } },
        ],
        edges: [{ source: "in", target: "wait" }],
      };
      for (const scope of [ATTACKER, VICTIM]) {
        const h = scopeHeaders(scope);
        const body = { elementName: "hold", revisionName: "r", path: "/", flow, configure: {} };
        const d = await server.call("POST", `${DF}/flow/deploy`, { headers: h, body });
        assert.equal(d.body.status, true, d.text);
        await server.call("POST", `${DF}/flow/activate`, {
          headers: h,
          body: { elementName: "hold" },
        });
      }
      const parameter = { note: "x".repeat(40_000) };
      const first = await start(ATTACKER, parameter);
      assert.equal(first.status, true, JSON.stringify(first));
      await pollUntil(
        () => hostile.held.length,
        (n) => n === 1,
        "the first run waits",
      );
      // Its app's share (64 KiB) holds one such parameter: the next is refused, before anything
      // is stored where the run would start here (embedded), or ends at its start (cluster).
      const second = await start(ATTACKER, parameter);
      const refusal =
        TEST_MODE === "cluster"
          ? (await ended(ATTACKER, second.data as string)).message
          : second.message;
      if (TEST_MODE !== "cluster") assert.equal(second.code, 429, JSON.stringify(second));
      assert.match(refusal ?? "", /LIMIT_RUN_BYTES_IN_FLIGHT_PER_APP \(65536\)/);
      // Another app has its own share.
      const other = await start(VICTIM, parameter);
      assert.equal(other.status, true, JSON.stringify(other));
      await pollUntil(
        () => hostile.held.length,
        (n) => n === 2,
        "the other app's run waits",
      );
      // The first run ends (its http node fails): what it held is given back.
      hostile.held[0]?.destroy();
      await ended(ATTACKER, first.data as string);
      const third = await start(ATTACKER, parameter);
      assert.equal(third.status, true, JSON.stringify(third));
      await pollUntil(
        () => hostile.held.length,
        (n) => n === 3,
        "the app's next run waits",
      );
    } finally {
      hostile.close();
      await server.close();
    }
  });
});
