import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DF, deployAndActivate } from "../helpers/flows.ts";
import { scopeHeaders, startServer, type TestServer, upload } from "../helpers/server.ts";

/**
 * An integer field that reaches a query is bounded by what its column holds (docs/errors.md,
 * "How fields are read"): in cluster mode a script version past 2^31 − 1 (a PostgreSQL
 * `integer`) or a time past ±(2^53 − 1) (`1e300` is an integer to a JSON schema; a `bigint`
 * cannot hold it) was an `internal error`. Both modes answer the 400 naming the field and its
 * range; the largest value that fits is still read.
 */

const FLOW = {
  vertexes: [
    { id: "in", type: "input", config: { schema: { type: "object" } } },
    { id: "out", type: "output" },
  ],
  edges: [{ source: "in", target: "out" }],
};
const MAX_SAFE = Number.MAX_SAFE_INTEGER;

describe("integer fields are bounded by what is stored", () => {
  let server: TestServer;
  const h = scopeHeaders();
  const json = (method: string, url: string, raw?: string) =>
    server.call(method, url, {
      headers: raw === undefined ? h : { ...h, "content-type": "application/json" },
      raw,
    });
  const refused = (
    r: { text: string; body: { code: number; message: string } },
    detail: string,
  ) => {
    assert.equal(r.body.code, 400, r.text);
    assert.equal(r.body.message, `invalid request: ${detail}`);
  };

  before(async () => {
    server = await startServer();
    await deployAndActivate(server, "bounds", FLOW);
    const u = await upload(server, [{ name: "echo.py", content: "def main(p):\n    return p\n" }], {
      path: "/bounds",
    });
    assert.equal(u.body.status, true, u.text);
  });
  after(() => server.close());

  it("a script version past 2^31 − 1, in a body or a query, is a 400 naming it", async () => {
    for (const version of ["2147483648", "1e20"]) {
      refused(
        await json(
          "POST",
          "/script/script/run-sync",
          `{"elementName":"echo","version":${version}}`,
        ),
        "body.version must be from 1 to 2147483647",
      );
      refused(
        await json("POST", "/script/script/run", `{"elementName":"echo","version":${version}}`),
        "body.version must be from 1 to 2147483647",
      );
      refused(
        await json("POST", `/script/external/echo/run-sync?version=${version}`, "{}"),
        "querystring.version must be from 1 to 2147483647",
      );
    }
    const largest = await json(
      "POST",
      "/script/script/run-sync",
      '{"elementName":"echo","version":2147483647}',
    );
    assert.equal(largest.body.code, 28030006, largest.text);
  });

  it("a run filter's interval past ±(2^53 − 1) is a 400 naming it", async () => {
    const page = (filter: string) =>
      json(
        "POST",
        `${DF}/monitor/runs`,
        `{"elementName":"bounds","pageNo":0,"pageSize":10,"colFilters":[${filter}]}`,
      );
    const range = `from -${MAX_SAFE} to ${MAX_SAFE}`;
    refused(
      await page('{"name":"startTime","from":1e300}'),
      `body.colFilters.0.from must be ${range}`,
    );
    refused(await page('{"name":"duration","to":-1e300}'), `body.colFilters.0.to must be ${range}`);
    const widest = await page(`{"name":"startTime","from":-${MAX_SAFE},"to":${MAX_SAFE}}`);
    assert.equal(widest.body.code, 0, widest.text);
  });

  it("the audit trail's from and to past 2^53 − 1 are a 400 naming them", async () => {
    refused(
      await json("GET", `${DF}/audit?from=1e300`),
      `querystring.from must be from 0 to ${MAX_SAFE}`,
    );
    refused(
      await json("GET", `${DF}/audit?to=9007199254740992`),
      `querystring.to must be from 0 to ${MAX_SAFE}`,
    );
    const widest = await json("GET", `${DF}/audit?from=0&to=${MAX_SAFE}`);
    assert.equal(widest.body.code, 0, widest.text);
  });
});
