import assert from "node:assert/strict";
import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { describe, it } from "node:test";
import { DF } from "../helpers/flows.ts";
import { killHard, startProcess } from "../helpers/process.ts";
import { modeEnv, SCOPE } from "../helpers/server.ts";
import { pollUntil } from "../helpers/wait.ts";

/**
 * Answers whose client reads nothing: a run's stored result (up to LIMIT_RESULT_BYTES) is written
 * to the socket, and what the kernel does not take stays in the service's memory, outside the V8
 * heap, until the client reads or goes. Sixty unread GETs of one run's 13 MiB result took the
 * process past 1 GiB of resident memory, without bound per app or node (docs/errors.md, "Bad input").
 */
const MiB = 2 ** 20;
const UNREAD = 60;

function rssMiB(pid: number): number {
  const m = fs.readFileSync(`/proc/${pid}/status`, "utf8").match(/VmRSS:\s+(\d+)/);
  return Number(m?.[1] ?? 0) / 1024;
}

describe("answers held for clients that read nothing", () => {
  it("are bounded: the resident memory stays under the bound, the next answer is a 429 naming it", async () => {
    const big = JSON.stringify(
      Array.from({ length: 200_000 }, (_, i) => ({ i, n: "x".repeat(48) })),
    );
    const source = http.createServer((_req, res) => {
      res.setHeader("content-type", "application/json");
      res.end(big);
    });
    await new Promise<void>((r) => source.listen(0, "127.0.0.1", () => r()));
    const bigUrl = `http://127.0.0.1:${(source.address() as AddressInfo).port}/big`;
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-answers-"));
    const server = await startProcess({
      DATA_DIR: dataDir,
      LIMIT_ANSWER_BYTES_IN_FLIGHT: String(128 * MiB),
      ...(await modeEnv()),
    });
    const headers = { "content-type": "application/json", ...SCOPE };
    const post = async (p: string, body: unknown) =>
      (await (
        await fetch(server.url + p, { method: "POST", headers, body: JSON.stringify(body) })
      ).json()) as {
        status: boolean;
        data: unknown;
      };
    const sockets: net.Socket[] = [];
    try {
      const flow = {
        vertexes: [
          { id: "in", type: "input" },
          { id: "big", type: "http", config: { url: bigUrl } },
          { id: "out", type: "output" },
        ],
        edges: [
          { source: "in", target: "big" },
          { source: "big", target: "out" },
        ],
      };
      const d = await post(`${DF}/flow/deploy`, {
        elementName: "big",
        revisionName: "r",
        path: "/",
        flow,
        configure: { logContent: "CONCISE" },
      });
      assert.equal(d.status, true, JSON.stringify(d));
      await post(`${DF}/flow/activate`, { elementName: "big" });
      const ran = await fetch(`${server.url}${DF}/run-sync`, {
        method: "POST",
        headers,
        body: JSON.stringify({ elementName: "big", parameter: {} }),
      });
      const runId = ran.headers.get("x-run-id");
      assert.ok((await ran.text()).length > 12 * MiB);
      // What the unread answers add is measured from here: the process's own size after a run
      // of a 13 MiB result moves by tens of MiB with the code and its heap's timing.
      const rssBefore = rssMiB(server.child.pid ?? 0);
      const port = Number(new URL(server.url).port);
      const head = `GET ${DF}/run/${runId}/result HTTP/1.1\r\nHost: x\r\napp: ${SCOPE.app}\r\nspace: ${SCOPE.space}\r\nuser: ${SCOPE.user}\r\n\r\n`;
      for (let i = 0; i < UNREAD; i++) {
        const s = net.connect(port, "127.0.0.1");
        s.on("error", () => {});
        // The answer's first bytes arrive and are left unread.
        const answered = new Promise<void>((r) => s.once("readable", () => r()));
        s.write(head);
        sockets.push(s);
        await answered;
      }
      // Every unread answer was begun: what the kernel did not take is the service's to hold.
      const next = await fetch(`${server.url}${DF}/run/${runId}/result`, { headers });
      const body = (await next.json()) as { code?: number; message?: string };
      // Unbounded, sixty answers of 13 MiB held 780 MiB more (past 1 GiB in all); bounded, the
      // budget's 128 MiB and the copies of the result being written (160-250 MiB measured).
      const grew = rssMiB(server.child.pid ?? 0) - rssBefore;
      assert.ok(grew < 400, `resident memory grew by ${Math.round(grew)} MiB`);
      assert.equal(body.code, 429, JSON.stringify(body).slice(0, 200));
      assert.match(body.message ?? "", /LIMIT_ANSWER_BYTES_IN_FLIGHT/);
      // The clients go: what their answers held comes back, and the answer is given again.
      for (const s of sockets.splice(0)) s.destroy();
      await pollUntil(
        async () =>
          (
            (await (await fetch(`${server.url}${DF}/run/${runId}/result`, { headers })).json()) as {
              status: boolean;
            }
          ).status,
        (ok) => ok,
        "the answer given once the unread ones are gone",
      );
    } finally {
      for (const s of sockets) s.destroy();
      await killHard(server.child);
      source.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
