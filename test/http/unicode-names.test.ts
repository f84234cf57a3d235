import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DF, deployAndActivate, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import { scopeHeaders, startServer, type TestServer, upload } from "../helpers/server.ts";

/**
 * A name or folder path is one text whatever Unicode form it arrives in (docs/dataflow-service.md,
 * "Names"): macOS writes file names decomposed (NFD: `e` + U+0301), most other systems and
 * keyboards composed (NFC: U+00E9). Before, a script uploaded as `café.py` from a Mac was refused
 * ("must be 1–128 letters…": the combining mark is not a letter), and a flow deployed as
 * `Müller` in one form was not found by the other (`element does not exist: Müller`).
 */
const nfd = (s: string) => s.normalize("NFD");
const nfc = (s: string) => s.normalize("NFC");

describe("names and paths in either Unicode form", () => {
  let server: TestServer;
  before(async () => {
    server = await startServer();
  });
  after(() => server.close());

  it("a script uploaded with a decomposed file name into a decomposed folder runs by its composed name and path, and by the decomposed", async () => {
    const up = await upload(
      server,
      [{ name: nfd("café.py"), content: "def main(p):\n    return p\n" }],
      { path: nfd("/Bücher") },
    );
    assert.equal(up.body.data[0].status, 0, up.text);
    assert.equal(up.body.data[0].filePath, nfc("/Bücher/café"));
    for (const form of [nfc, nfd]) {
      const url = `/script/external/${encodeURIComponent(form("café"))}/run-sync?path=${encodeURIComponent(form("/Bücher"))}`;
      const r = await server.call("POST", url, { headers: scopeHeaders(), body: { x: 1 } });
      assert.equal(r.headers.get("x-task-status"), "SUCCESS", r.text);
      assert.deepEqual(r.body, { x: 1 });
    }
    // Uploaded again in the other form: the same element, not a second one.
    const again = await upload(
      server,
      [{ name: nfc("café.py"), content: "def main(p):\n    return 2\n" }],
      { path: nfc("/Bücher"), overwrite: "true" },
    );
    assert.equal(again.body.data[0].status, 0, again.text);
    const r = await server.call(
      "POST",
      `/script/external/${encodeURIComponent(nfd("café"))}/run-sync?path=${encodeURIComponent(nfd("/Bücher"))}`,
      { headers: scopeHeaders(), body: {} },
    );
    assert.equal(r.body, 2, r.text);
  });

  it("a flow deployed under a decomposed name is found, listed and redeployed under the composed one", async () => {
    await deployAndActivate(
      server,
      nfd("Müller-Ströme"),
      NO_SCRIPT_FLOW,
      {},
      scopeHeaders(),
      nfd("/Flüsse"),
    );
    const run = await server.call("POST", `${DF}/run-sync`, {
      headers: scopeHeaders(),
      body: {
        elementName: nfc("Müller-Ströme"),
        path: nfc("/Flüsse"),
        parameter: { orders: [{ amount: 1, qty: 2 }] },
      },
    });
    assert.equal(run.body.status, true, run.text);
    const redeploy = await server.call("POST", `${DF}/flow/deploy`, {
      headers: scopeHeaders(),
      body: {
        elementName: nfc("Müller-Ströme"),
        revisionName: "r2",
        path: nfc("/Flüsse"),
        flow: NO_SCRIPT_FLOW,
        configure: {},
      },
    });
    assert.equal(redeploy.body.status, true, redeploy.text);
    const list = await server.call("GET", `${DF}/flow/list`, { headers: scopeHeaders() });
    assert.equal(list.body.status, true, list.text);
    const names = JSON.stringify(list.body.data)
      .match(/"[^"]*-Str[^"]*"/g)
      ?.map((n: string) => JSON.parse(n) as string);
    assert.deepEqual(names, [nfc("Müller-Ströme")], "one element, named in the composed form");
  });
});
