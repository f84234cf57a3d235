import assert from "node:assert/strict";
import { Writable } from "node:stream";
import { after, before, describe, it } from "node:test";
import pino from "pino";
import { startServer, type TestServer } from "../helpers/server.ts";

/**
 * The request log at info leaves out the probes (/health, /ready, /metrics), which balancers and
 * Prometheus call every few seconds; every other request is logged, and at debug the probes too
 * (docs/operations.md, "Request IDs and the request log").
 */
type Line = { msg: string; req?: { url: string }; reqId?: string };

function capture(level: string) {
  const lines: Line[] = [];
  let waiter: { pred: (l: Line) => boolean; resolve: () => void } | undefined;
  const stream = new Writable({
    write(chunk, _enc, done) {
      for (const l of String(chunk).split("\n").filter(Boolean)) {
        const line = JSON.parse(l) as Line;
        lines.push(line);
        if (waiter?.pred(line)) waiter.resolve();
      }
      done();
    },
  });
  /** Resolves at the first line (logged from now on) that `pred` accepts. */
  const logged = (pred: (l: Line) => boolean) =>
    new Promise<void>((resolve) => (waiter = { pred, resolve }));
  return { lines, logged, logger: pino({ level }, stream) };
}

for (const level of ["info", "debug"])
  describe(`the request log at ${level}`, () => {
    const { lines, logged, logger } = capture(level);
    let server: TestServer;
    before(async () => {
      server = await startServer({}, { logger });
    });
    after(() => server.close());

    it(`${level === "info" ? "leaves out" : "keeps"} the probes, keeps every other request`, async () => {
      for (const p of ["/health", "/ready", "/metrics", "/health?x=1"])
        assert.equal((await fetch(`${server.url}${p}`)).status, 200, p);
      // The other request's completion is logged after its answer is sent.
      const completed = logged((l) => l.reqId === "r-1" && l.msg === "request completed");
      const other = await fetch(`${server.url}/openapi.json`, {
        headers: { "x-request-id": "r-1" },
      });
      await other.arrayBuffer();
      await completed;
      const urls = lines.filter((l) => l.msg === "incoming request").map((l) => l.req?.url);
      assert.ok(urls.includes("/openapi.json"), urls.join(" "));
      const probes = urls.filter((u) => /^\/(health|ready|metrics)/.test(u ?? ""));
      assert.equal(probes.length, level === "info" ? 0 : 4, urls.join(" "));
    });
  });
