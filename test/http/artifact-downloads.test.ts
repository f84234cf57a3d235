import assert from "node:assert/strict";
import net from "node:net";
import { after, before, describe, it } from "node:test";
import { artifactsSaved } from "../helpers/artifacts.ts";
import { DF, deployAndActivate } from "../helpers/flows.ts";
import { scopeHeaders, startServer, TEST_MODE, type TestServer } from "../helpers/server.ts";
import { pollUntil, within } from "../helpers/wait.ts";

const MiB = 1024 * 1024;
const SIZE = 16 * MiB - 1024;

/** One script node leaving a file just under the default ARTIFACT_MAX_FILE_BYTES. */
const BIG = {
  vertexes: [
    { id: "in", type: "input" },
    {
      id: "w",
      type: "script",
      config: {
        code: `def main(p):\n    open('big.bin', 'wb').write(b'x' * ${SIZE})\n    return 1\n`,
      },
    },
  ],
  edges: [{ source: "in", target: "w" }],
};

const scope = (app: string) => scopeHeaders({ app, space: "s1", user: "u" });

/**
 * A download answers a file of up to ARTIFACT_MAX_FILE_BYTES (16 MiB) read whole into memory,
 * and keeps it there until the client has read it (docs/artifacts.md, "Downloads"). A tenant that
 * started downloads of its own 16 MiB file and read nothing held 16 MiB of the service's memory
 * each, without bound: fifty of them grew the service by 850 MB.
 */
describe(`artifact downloads in flight, per app and per node (${TEST_MODE})`, () => {
  let server: TestServer;
  const runs = new Map<string, string>();
  const stalled: net.Socket[] = [];
  before(async () => {
    server = await startServer({
      FILE_SWEEP_MS: "0",
      ARTIFACT_DOWNLOAD_BYTES: String(48 * MiB),
      ARTIFACT_DOWNLOAD_BYTES_PER_APP: String(32 * MiB),
    });
    const saved = artifactsSaved(server.services);
    for (const app of ["app1", "app2"]) {
      await deployAndActivate(server, "big", BIG, { fileCleanup: { type: "keep" } }, scope(app));
      const r = await server.call("POST", `${DF}/run-sync`, {
        headers: scope(app),
        body: { elementName: "big" },
      });
      assert.equal(r.body.status, true, r.text);
      const runId = r.headers.get("x-run-id") ?? "";
      await within(saved(runId), 60_000, `${app}'s file is kept`);
      runs.set(app, runId);
    }
  });
  after(async () => {
    for (const s of stalled) s.destroy();
    await server?.close();
  });

  const path = (app: string) => `${DF}/run/${runs.get(app)}/artifacts/big.bin`;
  /** A download whose client reads its first bytes, then nothing more. */
  const stall = (app: string) =>
    new Promise<net.Socket>((resolve) => {
      const sock = net.connect(Number(new URL(server.url).port), "127.0.0.1", () =>
        sock.write(`GET ${path(app)} HTTP/1.1\r\nhost: x\r\napp: ${app}\r\nspace: s1\r\n\r\n`),
      );
      sock.on("error", () => {});
      sock.once("data", (d: Buffer) => {
        sock.pause();
        assert.match(d.toString("latin1"), /^HTTP\/1\.1 200/);
        stalled.push(sock);
        resolve(sock);
      });
    });
  const download = async (app: string) => {
    const r = await fetch(server.url + path(app), { headers: scope(app) });
    const bytes = Buffer.from(await r.arrayBuffer());
    if (r.headers.get("content-disposition")) return { file: bytes.length };
    return { envelope: JSON.parse(bytes.toString()) as { code: number; message: string } };
  };

  it("refuses a download past the app's bytes in flight, then past the node's, with a 429", async () => {
    await stall("app1");
    await stall("app1");
    const overApp = await download("app1");
    assert.equal(overApp.envelope?.code, 429, JSON.stringify(overApp));
    assert.match(overApp.envelope?.message ?? "", /ARTIFACT_DOWNLOAD_BYTES_PER_APP/);
    // The listing reads no bytes and is not held back.
    const list = await server.call("GET", `${DF}/run/${runs.get("app1")}/artifacts`, {
      headers: scope("app1"),
    });
    assert.equal(list.body.data.files[0].size, SIZE, list.text);

    // Another app is not held back by app1's downloads, up to the node's bound.
    await stall("app2");
    const overNode = await download("app2");
    assert.equal(overNode.envelope?.code, 429, JSON.stringify(overNode));
    assert.match(overNode.envelope?.message ?? "", /ARTIFACT_DOWNLOAD_BYTES\b(?!_)/);

    // A client that goes gives its bytes back (the service sees its socket close a moment
    // later, and nothing announces it).
    stalled.shift()?.destroy();
    const done = await pollUntil(
      () => download("app2"),
      (d) => d.file !== undefined,
      "app2's download once one of app1's clients went",
    );
    assert.equal(done.file, SIZE);
  });
});
