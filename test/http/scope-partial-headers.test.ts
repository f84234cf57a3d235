import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DF, deployAndActivate, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import {
  OTHER_SCOPE,
  SCOPE,
  scopeHeaders,
  startServer,
  type TestServer,
} from "../helpers/server.ts";

/**
 * GET /flow/list in auth mode off (docs/auth.md, "Headers per endpoint"): the scope comes from
 * `app` and `space`, and only with neither does it list every scope. A caller that sends one of
 * the two (a client that forgot `space`) must not be handed every other tenant's flows: like
 * every other endpoint, it is told which header is missing.
 */
describe("GET /flow/list with only one of app and space", () => {
  let server: TestServer;
  const other = { app: "app2", space: "space9", user: "eve" };

  before(async () => {
    server = await startServer();
    await deployAndActivate(server, "mine", NO_SCRIPT_FLOW);
    await deployAndActivate(server, "theirs", NO_SCRIPT_FLOW, {}, scopeHeaders(OTHER_SCOPE));
    await deployAndActivate(server, "elsewhere", NO_SCRIPT_FLOW, {}, scopeHeaders(other));
  });
  after(() => server.close());

  const list = (headers: Record<string, string>) =>
    server.call("GET", `${DF}/flow/list`, { headers });

  it("app alone is a 400 naming space, not every scope's flows", async () => {
    const r = await list({ app: SCOPE.app, user: SCOPE.user });
    assert.equal(r.body.status, false, r.text);
    assert.equal(r.body.code, 400);
    assert.match(r.body.message, /header space is required/);
    assert.equal(r.body.data, null);
  });

  it("space alone is a 400 naming app, not every scope's flows", async () => {
    const r = await list({ space: SCOPE.space });
    assert.equal(r.body.status, false, r.text);
    assert.equal(r.body.code, 400);
    assert.match(r.body.message, /header app is required/);
  });

  it("both headers list the scope's own flows; neither lists every scope (unchanged)", async () => {
    const mine = await list(scopeHeaders());
    assert.deepEqual(
      mine.body.data.map((f: { elementName: string }) => f.elementName),
      ["mine"],
    );
    const all = await list({});
    assert.deepEqual(all.body.data.map((f: { elementName: string }) => f.elementName).sort(), [
      "elsewhere",
      "mine",
      "theirs",
    ]);
  });
});
