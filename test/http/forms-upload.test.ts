import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { FORM_CLIENTS, type Param } from "../helpers/clients.ts";
import {
  type Reply,
  scopeHeaders,
  startServer,
  type TestServer,
  upload,
} from "../helpers/server.ts";

/**
 * Endpoint 21 (POST /file/batch-upload) as every client writes its form (docs/errors.md, "How
 * fields are read"): Python requests' data= (None left out, booleans "True"/"False"), a browser
 * form (every input, empty ones as ""), curl -F (booleans 1/0).
 */
describe("upload forms from every client", () => {
  let server: TestServer;
  const h = scopeHeaders();
  const file = (body: string) => ({ name: "up.py", content: `def main(p):\n    return ${body}\n` });
  const send = (client: (typeof FORM_CLIENTS)[number], values: Record<string, Param>, body = "1") =>
    upload(server, [file(body)], Object.fromEntries(client.fields(values)), h);
  const items = (r: Reply) =>
    r.body.data?.map((i: { status: number; message: string }) => [i.status, i.message]);
  const taskOf = async (path: string) => {
    const r = await server.call("POST", `/script/external/up/run-sync?path=${path}`, {
      headers: h,
      body: {},
    });
    return r.body;
  };

  before(async () => {
    server = await startServer();
  });
  after(() => server.close());

  it("path, folderId and overwrite read alike from every client", async () => {
    for (const c of FORM_CLIENTS) {
      const path = `/up/${c.name}`;
      const created = await send(c, { folderId: undefined, path, overwrite: false });
      assert.deepEqual(items(created), [[0, "created"]], `${c.name}: ${created.text}`);
      const skipped = await send(c, { folderId: undefined, path, overwrite: false }, "2");
      assert.deepEqual(items(skipped), [[1, skipped.body.data?.[0]?.message]], skipped.text);
      assert.equal(await taskOf(path), 1);
      const replaced = await send(c, { folderId: undefined, path, overwrite: true }, "3");
      assert.deepEqual(items(replaced), [[0, "overwritten"]], `${c.name}: ${replaced.text}`);
      assert.equal(await taskOf(path), 3);
      const unset = await send(c, { folderId: undefined, path, overwrite: undefined }, "4");
      assert.equal(unset.body.data?.[0]?.status, 1, `${c.name}: overwrite unset is false`);
    }
  });

  it("a form with every field unset imports into the root folder", async () => {
    for (const c of FORM_CLIENTS) {
      const r = await send(
        c,
        { folderId: undefined, path: undefined, overwrite: true },
        `"${c.name}"`,
      );
      assert.equal(r.body.data?.[0]?.status, 0, `${c.name}: ${r.text}`);
      assert.equal(await taskOf("/"), c.name);
    }
  });

  it("overwrite accepts true/false/1/0 in any case; anything else names the field", async () => {
    for (const value of ["TRUE", "tRuE", "1", "False", "0"]) {
      const r = await upload(server, [file("5")], { path: "/up/case", overwrite: value }, h);
      assert.equal(r.body.status, true, `${value}: ${r.text}`);
    }
    for (const value of ["on", "yes", "2", "null"]) {
      const r = await upload(server, [file("5")], { path: "/up/case", overwrite: value }, h);
      assert.equal(r.body.code, 400, `${value}: ${r.text}`);
      assert.match(r.body.message, /overwrite must be true, false, 1 or 0/, r.text);
    }
  });

  it("folderId and path both given (neither empty) is a 400", async () => {
    const r = await upload(server, [file("6")], { path: "/up/x", folderId: "f1" }, h);
    assert.equal(r.body.code, 400, r.text);
    assert.match(r.body.message, /folderId and path must not both be given/, r.text);
  });

  it("a field given twice is a 400 naming it, not the first or the last value", async () => {
    const form = new FormData();
    form.append("path", "/up/a");
    form.append("path", "/up/b");
    form.append("batchFile", new Blob([file("7").content]), "up.py");
    const res = await fetch(`${server.url}/script/file/batch-upload`, {
      method: "POST",
      body: form,
      headers: h,
    });
    const body = await res.json();
    assert.equal(body.code, 400, JSON.stringify(body));
    assert.match(body.message, /form field "path" is given more than once/);
  });

  it("no batchFile part, or a body that is not a form, is a 400 naming what is missing", async () => {
    const form = new FormData();
    form.append("path", "/up/x");
    const res = await fetch(`${server.url}/script/file/batch-upload`, {
      method: "POST",
      body: form,
      headers: h,
    });
    const body = await res.json();
    assert.equal(body.code, 400, JSON.stringify(body));
    assert.match(body.message, /batchFile is required/);
    const json = await server.call("POST", "/script/file/batch-upload", {
      headers: h,
      body: { path: "/up/x" },
    });
    assert.equal(json.body.code, 400, json.text);
    assert.match(json.body.message, /multipart\/form-data/, json.text);
  });
});
