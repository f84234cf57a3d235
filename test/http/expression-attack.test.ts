import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, it } from "node:test";
import { DF, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import { killHard, startProcess } from "../helpers/process.ts";
import { childrenOf } from "../helpers/process-tree.ts";
import { modeEnv, OTHER_SCOPE, scopeHeaders } from "../helpers/server.ts";
import { pollUntil, within } from "../helpers/wait.ts";

/**
 * A tenant's flow expressions are code the service runs (docs/security.md, "Flow expressions").
 * Written as the attacker would deploy them: each of these held the service's event loop (no
 * request of any tenant answered) or aborted its process, before expressions left it.
 */
const ATTACKS = {
  // A tail call never grows the stack: JSONata loops here for good.
  loop: "( $loop := function($i){ $i < 1e12 ? $loop($i+1) : $i }; $loop(0) )",
  // One native step: no check inside JSONata runs while it sorts.
  sort: "$sort([1..1000000])",
  // Catastrophic backtracking inside the regular-expression engine.
  regex: '$match("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!", /(a+)+$/)',
  // Memory without end, faster than any time limit.
  memory: "[1..5000000].{'a': $, 'b': [$, $, $]}",
  // A product of the run's parameter with itself three times over.
  cross: "$count(xs.($$.xs.($$.xs.{'a': $})))",
  // Every step bounded, so first tried on the service's own thread, but long over a large input.
  long: "$count(xs[$ % 7 = 3 or $ % 11 = 5 or $ % 13 = 1])",
};
const PARAMETER = { xs: Array.from({ length: 300_000 }, (_, i) => i) };

/** A flow of one transform whose one operator is `expr`. */
const oneExpression = (expr: string) => ({
  vertexes: [
    { id: "in", type: "input" },
    { id: "t", type: "transform", config: { operators: [{ type: "expr", expr }] } },
    { id: "out", type: "output" },
  ],
  edges: [
    { source: "in", target: "t" },
    { source: "t", target: "out" },
  ],
});

const victim = { ...scopeHeaders(), "content-type": "application/json" };
const attacker = { ...scopeHeaders(OTHER_SCOPE), "content-type": "application/json" };

/** Pids of `pid`'s children whose command line mentions `what`. */
const alive = (pid: number) => {
  try {
    return !/^State:\s+Z/m.test(fs.readFileSync(`/proc/${pid}/status`, "latin1"));
  } catch {
    return false;
  }
};

describe("a tenant's flow expressions against the service", () => {
  it("runaway, native, backtracking, memory-hungry, quadratic and long expressions fail their runs while every tenant is answered", async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-expr-attack-"));
    const server = await startProcess({
      DATA_DIR: dataDir,
      FLOW_EXPR_TIMEOUT_MS: "300",
      FLOW_EXPR_MEMORY_MB: "64",
      ...(await modeEnv()),
    });
    const call = async (headers: Record<string, string>, p: string, body?: unknown) => {
      const r = await fetch(server.url + p, {
        method: body === undefined ? "GET" : "POST",
        headers,
        // A service whose event loop is held answers nothing: every call has a deadline.
        signal: AbortSignal.timeout(70_000),
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      return (await r.json()) as { status: boolean; code: number; message: string; data: unknown };
    };
    const deploy = async (headers: Record<string, string>, name: string, flow: unknown) => {
      await call(headers, `${DF}/flow/deploy`, {
        elementName: name,
        revisionName: "r",
        path: "/",
        flow,
        configure: {},
      });
      assert.equal(
        (await call(headers, `${DF}/flow/activate`, { elementName: name })).data,
        "APPROVED",
      );
    };
    const victimRun = async () => {
      const r = await call(victim, `${DF}/run-sync`, {
        elementName: "plain",
        parameter: { orders: [{ amount: 2, qty: 3 }] },
      });
      assert.deepEqual(r.data, [{ amount: 2, qty: 3, total: 6 }], JSON.stringify(r));
    };
    try {
      await deploy(victim, "plain", NO_SCRIPT_FLOW);
      // The other tenant's expression that must run in the processes too (a constructor).
      await deploy(victim, "pooled", oneExpression("{'n': n + 1}"));
      for (const [name, expr] of Object.entries(ATTACKS)) {
        await deploy(attacker, name, oneExpression(expr));
      }
      const runs: [string, string][] = [];
      for (const name of Object.keys(ATTACKS))
        for (let i = 0; i < 2; i++) {
          const r = await within(
            call(attacker, `${DF}/run`, { elementName: name, parameter: PARAMETER }),
            5000,
            "POST /run",
          );
          runs.push([name, r.data as string]);
        }
      // Meanwhile the other tenant is served as ever.
      for (let i = 0; i < 3; i++) {
        await within(call(victim, "/health"), 2000, "GET /health during the attack");
        await within(victimRun(), 5000, "a run-sync of another tenant during the attack");
      }
      for (const [name, id] of runs) {
        const r = await call(attacker, `${DF}/run/${id}/result?timeout=60`);
        assert.equal(r.code, 28020004, `${name}: ${JSON.stringify(r)}`);
        assert.match(
          r.message,
          /FLOW_EXPR_TIMEOUT_MS|FLOW_EXPR_MEMORY_MB|Evaluation timeout/,
          `${name}: ${r.message}`,
        );
      }
      await victimRun();

      // The processes take turns between tenants: the other tenant's job goes next, not after
      // the attacker's queue (most of the queued loops are still going when it is answered).
      const loops: string[] = [];
      for (let i = 0; i < 16; i++)
        loops.push(
          (await call(attacker, `${DF}/run`, { elementName: "loop", parameter: {} }))
            .data as string,
        );
      const pooled = await within(
        call(victim, `${DF}/run-sync`, { elementName: "pooled", parameter: { n: 1 } }),
        20_000,
        "another tenant's run whose expression runs in the processes",
      );
      const going = await Promise.all(
        loops.map(async (id) => (await call(attacker, `${DF}/run/${id}/result`)).code),
      );
      assert.deepEqual(pooled.data, { n: 2 }, JSON.stringify(pooled));
      assert.ok(
        going.filter((code) => code === 28020003).length >= 4,
        `queued loops still going when the other tenant was answered: ${going}`,
      );
      for (const id of loops) await call(attacker, `${DF}/run/${id}/result?timeout=60`);

      // The processes serve again: a harmless expression that must run there (a constructor).
      await deploy(attacker, "harmless", oneExpression("{'n': n + 1}"));
      const harmless = await call(attacker, `${DF}/run-sync`, {
        elementName: "harmless",
        parameter: { n: 1 },
      });
      assert.deepEqual(harmless.data, { n: 2 }, JSON.stringify(harmless));
      assert.equal(server.child.exitCode, null, "the service is still running");

      // The expression processes end with the service, even when it is killed.
      const children = childrenOf(server.child.pid as number, "expr-worker");
      assert.ok(children.length > 0, "the service runs its expressions in child processes");
      await killHard(server.child);
      await pollUntil(
        () => children.filter(alive),
        (left) => left.length === 0,
        "the expression processes of a killed service to exit",
      );
    } finally {
      await killHard(server.child);
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
