import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DF, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import { scopeHeaders, startServer, type TestServer } from "../helpers/server.ts";

/**
 * One flow's cron triggers are bounded (docs/scheduler.md, "Apps share the scheduler"): every
 * trigger costs a croner parse, a time-zone lookup and a parameter check at deploy, and a schedule
 * on every node after it; 40,000 of them in a 4 MB deploy held the event loop for 16 s.
 */

const h = scopeHeaders();
const MAX = 100;
const triggers = (n: number) =>
  Array.from({ length: n }, (_, i) => ({
    type: "cron",
    name: `t${i}`,
    crontab: `${i % 60} * * * * *`,
    timezone: "Europe/Berlin",
    parameter: { orders: [] },
  }));

describe("the cron triggers of one flow", () => {
  let s: TestServer;
  before(async () => {
    s = await startServer();
  });
  after(() => s.close());

  const deploy = (elementName: string, n: number) =>
    s.call("POST", `${DF}/flow/deploy`, {
      headers: h,
      body: {
        elementName,
        revisionName: "r",
        path: "/cron",
        flow: NO_SCRIPT_FLOW,
        configure: { triggers: triggers(n) },
      },
    });

  it(`deploys ${MAX}`, async () => {
    const r = await deploy("most", MAX);
    assert.equal(r.body.code, 0, r.text);
    assert.deepEqual(r.body.data, []);
  });

  it(`refuses ${MAX + 1} with one finding on configure.triggers, and 40,000 the same way`, async () => {
    for (const n of [MAX + 1, 40_000]) {
      const r = await deploy(`too-many-${n}`, n);
      assert.equal(r.body.code, 0, r.text.slice(0, 300));
      const errors = r.body.data.filter((f: { severity: number }) => f.severity === 2);
      assert.equal(errors.length, 1, r.text.slice(0, 600));
      assert.deepEqual(errors[0].path, ["configure", "triggers"]);
      assert.match(errors[0].errorMessage, /at most 100 cron triggers/);
    }
  });

  it("refuses an import whose flow has more", async () => {
    const bundle = {
      format: "sluice-export",
      formatVersion: 1,
      exportedAt: new Date(0).toISOString(),
      source: { app: "x", space: "y" },
      allRevisions: true,
      flows: [
        {
          path: "/cron",
          name: "imported",
          status: "APPROVED",
          releaseVersion: 1,
          revisions: [
            {
              version: 1,
              name: "r",
              flow: NO_SCRIPT_FLOW,
              configure: { triggers: triggers(MAX + 1) },
              createdAt: 1,
            },
          ],
        },
      ],
      scripts: [],
    };
    const r = await s.call("POST", `${DF}/import`, { headers: h, body: { bundle } });
    assert.equal(r.body.code, 28040001, r.text.slice(0, 300));
    assert.match(r.body.message, /at most 100 cron triggers/);
  });
});
