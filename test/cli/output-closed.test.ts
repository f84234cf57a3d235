import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { after, before, describe, it } from "node:test";
import { BIN } from "../helpers/process.ts";
import { SCOPE, startServer, type TestServer, upload } from "../helpers/server.ts";

describe("sluice CLI whose reader goes away (`sluice … | head`)", () => {
  let server: TestServer;
  before(async () => {
    server = await startServer();
    const up = await upload(
      server,
      [{ name: "big.py", content: "def main(p):\n    return ['x' * 100] * 5000\n" }],
      { path: "/cli-out" },
    );
    assert.equal(up.body.data[0].status, 0);
  });
  after(() => server.close());

  it("drops the rest of the output and ends with the command's own exit code", async () => {
    // About 550 KB of result, far more than a pipe holds: the CLI is still writing when the
    // reader closes its end after the first chunk, as `head` does.
    const child = spawn(process.execPath, [BIN, "run", "big", "--type", "PY", "--sync"], {
      env: {
        PATH: process.env.PATH ?? "",
        SLUICE_URL: server.url,
        SLUICE_APP: SCOPE.app,
        SLUICE_SPACE: SCOPE.space,
        SLUICE_USER: SCOPE.user,
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let first = "";
    child.stdout.once("data", (chunk: Buffer) => {
      first = chunk.toString();
      child.stdout.destroy();
    });
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
    assert.match(first, /^\[/, "the output began");
    assert.doesNotMatch(stderr, /EPIPE|Error|at /, "no stack trace");
    assert.match(stderr, /SUCCESS/, "the command went on to its end");
    assert.equal(code, 0);
  });
});
