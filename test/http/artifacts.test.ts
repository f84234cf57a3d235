import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { ErrorCode } from "../../src/errors.ts";
import { artifactsSaved, WRITERS } from "../helpers/artifacts.ts";
import { DF, deployAndActivate } from "../helpers/flows.ts";
import {
  OTHER_SCOPE,
  scopeHeaders,
  startServer,
  TEST_MODE,
  type TestServer,
} from "../helpers/server.ts";
import { within } from "../helpers/wait.ts";

const H = scopeHeaders();

/** One script node leaving a long name (466 bytes, 1271 characters URL-encoded) and an odd one. */
const LONG_NAMES = {
  vertexes: [
    { id: "in", type: "input" },
    {
      id: "w",
      type: "script",
      config: {
        code: [
          "import os",
          "def main(p):",
          "    long = 'd' * 60 + '/' + '\u00e9' * 100",
          "    os.makedirs(long, exist_ok=True)",
          "    open(long + '/' + '\u00e9' * 100 + '.txt', 'w').write('long')",
          "    open('q\"uo;te\u2028.html', 'w').write('odd')",
          "    return 'w'",
          "",
        ].join("\n"),
      },
    },
  ],
  edges: [{ source: "in", target: "w" }],
};

/** docs/artifacts.md: the files a `keep` run leaves, listed, downloaded, scoped, deleted. */
describe(`artifacts (${TEST_MODE})`, () => {
  let server: TestServer;
  let saved: (runId: string) => Promise<void>;
  let runId: string;
  const list = (id: string, headers = H, query = "") =>
    server.call("GET", `${DF}/run/${id}/artifacts${query}`, { headers });
  const download = (id: string, name: string, headers = H) =>
    server.call("GET", `${DF}/run/${id}/artifacts/${encodeURIComponent(name)}`, { headers });
  const runSync = async (elementName: string) => {
    const r = await server.call("POST", `${DF}/run-sync`, { headers: H, body: { elementName } });
    assert.equal(r.body.status, true, r.text);
    return r.headers.get("x-run-id") ?? "";
  };

  before(async () => {
    server = await startServer({
      FILE_SWEEP_MS: "0",
      ARTIFACT_MAX_FILE_BYTES: "2000",
      ARTIFACT_MAX_FILES: "20",
    });
    saved = artifactsSaved(server.services);
    await deployAndActivate(server, "keeper", WRITERS, { fileCleanup: { type: "keep" } });
    await deployAndActivate(server, "scratch", WRITERS, { fileCleanup: { type: "afterRun" } });
    await deployAndActivate(server, "longnames", LONG_NAMES, { fileCleanup: { type: "keep" } });
    runId = await runSync("keeper");
    await within(saved(runId), 30_000, "the run's files are kept");
  });
  after(() => server.close());

  it("lists the kept files per node, with sizes, content types and digests, and what was skipped", async () => {
    const r = await list(runId);
    assert.equal(r.body.status, true, r.text);
    const d = r.body.data;
    assert.equal(d.runId, runId);
    assert.equal(d.collected, true);
    const files = d.files.map((f: Record<string, unknown>) => [
      f.name,
      f.nodeId,
      f.size,
      f.contentType,
    ]);
    assert.deepEqual(files, [
      ["b.txt", "b", 12, "text/plain; charset=utf-8"],
      ["page.html", "b", 25, "text/html; charset=utf-8"],
      ["report.csv", "a", 14, "text/csv; charset=utf-8"],
      ["sub/data.json", "a", 12, "application/json"],
    ]);
    assert.match(d.files[0].sha256, /^[0-9a-f]{64}$/);
    const skipped = Object.fromEntries(
      d.skipped.map((s: { name: string; reason: string }) => [s.name, s.reason]),
    );
    assert.deepEqual(skipped, {
      "big.bin": "over ARTIFACT_MAX_FILE_BYTES (2000)",
      pipe: "not a regular file",
      shadow: "symbolic link",
    });
    const onlyA = await list(runId, H, "?nodeId=a");
    assert.deepEqual(
      onlyA.body.data.files.map((f: { name: string }) => f.name),
      ["report.csv", "sub/data.json"],
    );
  });

  it("downloads a file as an attachment with its type, length and nosniff", async () => {
    const r = await download(runId, "sub/data.json");
    assert.equal(r.status, 200);
    assert.equal(r.text, '{"ok": true}');
    assert.equal(r.headers.get("content-type"), "application/json");
    assert.equal(r.headers.get("content-length"), "12");
    assert.equal(r.headers.get("x-content-type-options"), "nosniff");
    assert.match(r.headers.get("content-disposition") ?? "", /^attachment; filename="data.json"/);
    const html = await download(runId, "page.html");
    assert.match(html.headers.get("content-disposition") ?? "", /^attachment;/);
    assert.match(html.headers.get("content-security-policy") ?? "", /sandbox/);
  });

  it("a long or odd name within the limit downloads; one over it is a 400 naming the field", async () => {
    const id = await runSync("longnames");
    await within(saved(id), 30_000, "the run's files are kept");
    const long = `${"d".repeat(60)}/${"é".repeat(100)}/${"é".repeat(100)}.txt`;
    const r = await download(id, long);
    assert.equal(r.status, 200, r.text.slice(0, 300));
    assert.equal(r.text, "long");
    const odd = await download(id, 'q"uo;te\u2028.html');
    assert.equal(odd.text, "odd");
    assert.match(
      odd.headers.get("content-disposition") ?? "",
      /^attachment; filename="q_uo;te_.html"; filename\*=UTF-8''q%22uo%3Bte%E2%80%A8.html$/,
    );
    const over = await download(id, "x".repeat(1025));
    assert.equal(over.body.code, ErrorCode.BAD_REQUEST, over.text.slice(0, 300));
    assert.match(over.body.message, /params\.name/);
  });

  it("refuses names that climb out or are absolute (400 naming the field), answers an unknown one", async () => {
    for (const bad of ["../../etc/passwd", "/etc/passwd", "sub/../report.csv", "a//b"]) {
      const r = await download(runId, bad);
      assert.equal(r.body.code, ErrorCode.BAD_REQUEST, `${bad}: ${r.text}`);
      assert.equal(r.headers.get("content-disposition"), null, "an envelope, not a file");
      assert.match(r.body.message, /params\.name/);
    }
    // Unencoded, the router normalises nothing: a literal .. segment never reaches a file.
    const raw = await server.call("GET", `${DF}/run/${runId}/artifacts/..%2F..%2Fsluice.db`, {
      headers: H,
    });
    assert.equal(raw.body.code, ErrorCode.BAD_REQUEST, raw.text);
    const none = await download(runId, "big.bin");
    assert.equal(none.body.code, ErrorCode.ARTIFACT_NOT_FOUND, none.text);
  });

  it("another scope's run answers exactly as a run that does not exist", async () => {
    const other = scopeHeaders(OTHER_SCOPE);
    const theirs = await list(runId, other);
    const nobodys = await list("no-such-run", other);
    assert.equal(theirs.body.code, ErrorCode.RUN_NOT_FOUND);
    assert.deepEqual({ ...theirs.body, message: "" }, { ...nobodys.body, message: "" });
    const dl = await download(runId, "b.txt", other);
    assert.equal(dl.body.code, ErrorCode.RUN_NOT_FOUND);
    assert.equal(dl.body.data, null);
  });

  it("a run that does not keep its files has no artifacts", async () => {
    const id = await runSync("scratch");
    const r = await list(id);
    assert.equal(r.body.status, true, r.text);
    assert.deepEqual(r.body.data.files, []);
    assert.equal(r.body.data.collected, false);
  });

  it("files survive their working directory, and go with their run", async () => {
    fs.rmSync(path.join(server.dataDir, "tasks", runId), { recursive: true, force: true });
    assert.equal((await download(runId, "b.txt")).text, "written by b");
    const del = await server.call("POST", `${DF}/run/delete`, {
      headers: H,
      body: { runIds: [runId] },
    });
    assert.deepEqual(del.body.data, { [runId]: true });
    assert.equal((await list(runId)).body.code, ErrorCode.RUN_NOT_FOUND);
    const rows = await server.services.artifacts.store.list(runId);
    assert.deepEqual(rows, { files: [], set: undefined });
  });
});
