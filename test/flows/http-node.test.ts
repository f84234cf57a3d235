import assert from "node:assert/strict";
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { Agent } from "undici";
import { executeFlow } from "../../src/flows/executor.ts";
import { inlineExpressions } from "../../src/flows/expr-jobs.ts";
import { type Graph, normalizeConfigure } from "../../src/flows/graph.ts";

const seen: { method?: string; url?: string; headers: IncomingMessage["headers"]; body: string }[] =
  [];
const server = createServer((req, res) => {
  let body = "";
  req.on("data", (c) => {
    body += c;
  });
  req.on("end", () => {
    seen.push({ method: req.method, url: req.url, headers: req.headers, body });
    if (req.url?.startsWith("/fail")) {
      res.writeHead(503, { "content-type": "application/json" }).end('{"error":"down"}');
    } else if (req.url?.startsWith("/endless")) {
      // Streams until the client goes away: the node must stop reading at its limit.
      res.writeHead(200, { "content-type": "text/plain" });
      const chunk = Buffer.alloc(16 * 1024, 0x61);
      const pump = () => {
        while (!res.destroyed && res.write(chunk));
        if (!res.destroyed) res.once("drain", pump);
      };
      res.on("close", () => res.destroy());
      pump();
    } else if (req.url?.startsWith("/int64")) {
      // An API answering a 64-bit ID as a plain number, as Go's and Java's encoders do.
      res
        .writeHead(200, { "content-type": "application/json" })
        .end(decodeURIComponent(req.url.slice(7)));
    } else if (req.url?.startsWith("/deep")) {
      const depth = Number(req.url.slice(6));
      res
        .writeHead(200, { "content-type": "application/json" })
        .end("[".repeat(depth) + "]".repeat(depth));
    } else if (req.url?.startsWith("/text")) {
      res.writeHead(200, { "content-type": "text/plain" }).end("plain words");
    } else {
      res
        .writeHead(200, { "content-type": "application/json" })
        .end(JSON.stringify({ echoed: JSON.parse(body || "null") }));
    }
  });
});
let base = "";
before(async () => {
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => server.close());

const deps = {
  runScript: async () => ({ ok: false as const, error: "unused", stdout: "", stderr: "" }),
  runSubflow: async () => ({ ok: false as const, error: "unused" }),
  fetch,
  expressions: inlineExpressions(),
  valueBytes: 64 * 1024,
  logValueBytes: 64 * 1024,
  now: Date.now,
};
const run = (config: object, parameter: unknown, fetchFn: typeof fetch = fetch) => {
  const graph: Graph = {
    vertexes: [
      { id: "in", type: "input" },
      { id: "h", type: "http", config },
    ],
    edges: [{ source: "in", target: "h" }],
  };
  return executeFlow({
    runId: "r",
    graph,
    configure: normalizeConfigure({}),
    parameter,
    signal: new AbortController().signal,
    deps: { ...deps, fetch: fetchFn },
  });
};

describe("http node", () => {
  it("renders templates in url, headers and body and parses the JSON response", async () => {
    const res = await run(
      {
        method: "POST",
        url: `${base}/orders/{{id}}?region={{$params.region}}`,
        headers: { "x-customer": "{{customer}}" },
        body: { id: "{{id}}", label: "order {{id}} of {{customer}}", total: "{{amount * qty}}" },
      },
      { id: 7, customer: "ann", amount: 2.5, qty: 4, region: "eu" },
    );
    assert.equal(res.status, "SUCCESS", res.error);
    const req = seen.at(-1);
    assert.equal(req?.method, "POST");
    assert.equal(req?.url, "/orders/7?region=eu");
    assert.equal(req?.headers["x-customer"], "ann");
    assert.equal(req?.headers["content-type"], "application/json");
    // A whole-string template keeps its JSON type; a mixed one becomes text.
    assert.deepEqual(res.result, { echoed: { id: 7, label: "order 7 of ann", total: 10 } });
  });

  it("a JSON answer with an integer past ±(2^53 − 1) fails the node naming it, never rounded", async () => {
    const big = encodeURIComponent('{"users":[{"id":1789012345678901234}]}');
    const res = await run({ url: `${base}/int64?${big}` }, {});
    assert.equal(res.status, "FAILURE", JSON.stringify(res.result));
    assert.equal(res.failedNodeId, "h");
    assert.match(res.error ?? "", /response\.users\.0\.id is an integer beyond ±\(2\^53 − 1\)/);
    const safe = encodeURIComponent('{"id":"1789012345678901234","n":9007199254740991,"f":1e300}');
    const ok = await run({ url: `${base}/int64?${safe}` }, {});
    assert.deepEqual(ok.result, { id: "1789012345678901234", n: 9007199254740991, f: 1e300 });
    // Past a double: JSON.parse makes it Infinity, which the run would keep as null.
    const huge = await run(
      { url: `${base}/int64?${encodeURIComponent('{"rate":[1,1e400]}')}` },
      {},
    );
    assert.equal(huge.status, "FAILURE", JSON.stringify(huge.result));
    assert.match(
      huge.error ?? "",
      /response\.rate\.1 is a number beyond ±1\.8e308, which a double cannot hold$/,
    );
  });

  // Before, a run whose node log kept such an answer (logContent DETAILED) was answered as an
  // internal error and never recorded: writing the log overflowed the stack.
  it("a JSON answer nested deeper than 512 levels fails the node naming the depth; 512 passes", async () => {
    for (const depth of [513, 30_000]) {
      const res = await run({ url: `${base}/deep?${depth}` }, {});
      assert.equal(res.status, "FAILURE", `depth ${depth}`);
      assert.equal(res.failedNodeId, "h");
      assert.match(
        res.error ?? "",
        /HTTP 200 from GET .*: the answer nests deeper than 512 levels/,
      );
    }
    const ok = await run({ url: `${base}/deep?512` }, {});
    assert.equal(ok.status, "SUCCESS");
  });

  it("returns text when the body is not JSON", async () => {
    const res = await run({ url: `${base}/text` }, {});
    assert.equal(res.result, "plain words");
    assert.equal(seen.at(-1)?.method, "GET");
  });

  it("a non-2xx status fails the node", async () => {
    const res = await run({ url: `${base}/fail` }, {});
    assert.equal(res.status, "FAILURE");
    assert.equal(res.failedNodeId, "h");
    assert.match(res.error ?? "", /HTTP 503/);
    assert.match(res.error ?? "", /down/);
  });
  it("stops reading a response past its limit and fails the node", async () => {
    const out = await run({ url: `${base}/endless` }, {});
    assert.equal(out.status, "FAILURE");
    assert.match(JSON.stringify(out), /larger than 65536 bytes/);
  });

  describe("a connection that fails names its reason", () => {
    let closed = 0;
    before(async () => {
      const probe = createServer();
      await new Promise<void>((r) => probe.listen(0, "127.0.0.1", r));
      closed = (probe.address() as AddressInfo).port;
      await new Promise<void>((r) => probe.close(() => r()));
    });

    it("refused", async () => {
      const out = await run({ url: `http://127.0.0.1:${closed}/` }, {});
      assert.equal(out.status, "FAILURE");
      assert.match(out.error ?? "", /^GET http:\/\/127\.0\.0\.1:\d+\/: connect ECONNREFUSED/);
    });

    it("refused at every address of a name (fetch reports an AggregateError without a message)", async () => {
      // A name with two addresses, as most public names have (A and AAAA): each is tried.
      const twoAddresses = new Agent({
        connect: {
          lookup: (_host, _options, callback) =>
            callback(null, [
              { address: "127.0.0.1", family: 4 },
              { address: "127.0.0.2", family: 4 },
            ]),
        },
      });
      const viaAgent: typeof fetch = (input, init) =>
        fetch(input, { ...init, dispatcher: twoAddresses } as RequestInit);
      const out = await run({ url: `http://two.test:${closed}/` }, {}, viaAgent);
      await twoAddresses.close();
      assert.equal(out.status, "FAILURE");
      assert.match(
        out.error ?? "",
        /^GET http:\/\/two\.test:\d+\/: connect ECONNREFUSED 127\.0\.0\.1/,
      );
    });
  });
});
