import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { SCOPE, scopeHeaders, startServer, type TestServer, upload } from "../helpers/server.ts";
import { makeZip } from "../helpers/zip.ts";

describe("POST /script/file/batch-upload", () => {
  let server: TestServer;
  before(async () => {
    server = await startServer({ LIMIT_UPLOAD_FILE_BYTES: "4096", LIMIT_ZIP_ENTRIES: "5" });
  });
  after(() => server.close());

  it("imports .py and .zip files in part order, with per-item statuses", async () => {
    const r = await upload(
      server,
      [
        { name: "hello.py", content: "def main(p):\n    return {'hi': p}\n" },
        { name: "notes.txt", content: "x" },
        { name: "broken.py", content: "def main(:\n    pass\n" },
        {
          name: "pkg.zip",
          content: makeZip([
            { name: "main.py", content: "from util import f\ndef main(): return f()" },
            { name: "util.py", content: "def f(): return 42" },
          ]),
        },
        { name: "evil.zip", content: makeZip([{ name: "main.py" }, { name: "../x.py" }]) },
        { name: "big.py", content: `x = 1\n${"#".repeat(5000)}` },
      ],
      { path: "/up/load" },
    );
    assert.equal(r.status, 200);
    assert.equal(r.body.status, true);
    const items = r.body.data as { filePath: string; status: number; message: string }[];
    assert.deepEqual(
      items.map((i) => [i.filePath, i.status]),
      [
        ["/up/load/hello", 0],
        ["/up/load/notes.txt", 2],
        ["/up/load/broken", 2],
        ["/up/load/pkg", 0],
        ["/up/load/evil", 2],
        ["/up/load/big", 3],
      ],
    );
    assert.match(items[2]?.message ?? "", /line 1/);
    assert.match(items[4]?.message ?? "", /unsafe/);
  });

  it("skips an existing element unless overwrite is true", async () => {
    const file = [{ name: "dup.py", content: "def main(): return 1\n" }];
    assert.equal((await upload(server, file, { path: "/d" })).body.data[0].status, 0);
    const again = await upload(server, file, { path: "/d" });
    assert.equal(again.body.data[0].status, 1);
    const over = await upload(server, [{ name: "dup.py", content: "def main(): return 2\n" }], {
      path: "/d",
      overwrite: "true",
    });
    assert.deepEqual([over.body.data[0].status, over.body.data[0].message], [0, "overwritten"]);
    const run = await server.call("POST", "/script/external/dup/run-sync", {
      headers: scopeHeaders(),
      body: {},
    });
    assert.equal(run.body, 2);
  });

  it("rejects a zip with too many entries as over a limit (status 3)", async () => {
    const zip = makeZip(
      Array.from({ length: 7 }, (_, i) => ({ name: i === 0 ? "main.py" : `m${i}.py` })),
    );
    const r = await upload(server, [{ name: "many.zip", content: zip }], { path: "/z" });
    assert.equal(r.body.data[0].status, 3);
  });

  it("rejects a zip whose stored sizes lie as that item's status 2, not the whole request", async () => {
    const good = makeZip([{ name: "main.py", content: "def main(): return 1\n" }]);
    const lying = Buffer.from(good);
    // The central directory's uncompressed size of main.py, which yauzl holds the data to.
    lying.writeUInt32LE(3, lying.indexOf(Buffer.from([0x50, 0x4b, 0x01, 0x02])) + 24);
    const r = await upload(
      server,
      [
        { name: "liar.zip", content: lying },
        { name: "fine.zip", content: good },
      ],
      { path: "/lies" },
    );
    assert.deepEqual([r.body.status, r.body.code], [true, 0]);
    const items = r.body.data as { filePath: string; status: number; message: string }[];
    assert.deepEqual(
      items.map((i) => [i.filePath, i.status]),
      [
        ["/lies/liar", 2],
        ["/lies/fine", 0],
      ],
    );
    assert.match(items[0]?.message ?? "", /^corrupt zip: entry "main\.py": too many bytes/);
  });

  it("answers folderId with path as 400, unknown folderId as 28010003, no file as 400", async () => {
    const both = await upload(server, [{ name: "a.py", content: "" }], {
      path: "/a",
      folderId: "x",
    });
    assert.deepEqual([both.body.status, both.body.code], [false, 400]);
    assert.match(both.body.message, /folderId and path/);
    const unknown = await upload(server, [{ name: "a.py", content: "" }], { folderId: "nope" });
    assert.equal(unknown.body.code, 28010003);
    const none = await upload(server, [], { path: "/a" });
    assert.deepEqual([none.body.code, /batchFile/.test(none.body.message)], [400, true]);
    const badPath = await upload(server, [{ name: "a.py", content: "" }], { path: "/a/../b" });
    assert.equal(badPath.body.code, 400);
  });

  it("is answered with an envelope when the body is not multipart", async () => {
    const r = await server.call("POST", "/script/file/batch-upload", {
      headers: scopeHeaders(),
      body: { x: 1 },
    });
    assert.deepEqual([r.status, r.body.status, r.body.code], [200, false, 400]);
  });

  it("keeps uploads of one space invisible to another", async () => {
    await upload(server, [{ name: "private.py", content: "def main(): return 'secret'\n" }], {
      path: "/p",
    });
    const other = await server.call("POST", "/script/external/private/run-sync", {
      headers: { app: SCOPE.app, space: "elsewhere", user: "eve" },
      body: {},
    });
    assert.equal(other.body.code, 28010001);
  });
});
