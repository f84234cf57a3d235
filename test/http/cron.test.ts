import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DF, deployAndActivate, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import { scopeHeaders, startServer, type TestServer } from "../helpers/server.ts";
import { type Condition, onRunEvents } from "../helpers/wait.ts";

const ORDERS = { orders: [{ amount: 2, qty: 3 }] };

/** Cron end to end through a real server and the real clock: every-second triggers keep it short. */
describe("cron triggers end to end", () => {
  let server: TestServer;
  const h = scopeHeaders();
  const call = (method: string, p: string, body?: unknown) =>
    server.call(method, DF + p, { headers: h, body });
  const scheduledRuns = async (elementName: string) => {
    const r = await call("POST", "/monitor/runs", {
      elementName,
      pageNo: 0,
      pageSize: 100,
      triggerFilter: ["SCHEDULED"],
    });
    return r.body.data.runs as { runId: string; runStatus: string; runParam?: string }[];
  };
  const scheduleOf = async (elementName: string) => {
    const r = await call("GET", "/monitor/flows");
    return r.body.data.find(
      (f: { element: { elementName: string } }) => f.element.elementName === elementName,
    )?.schedule;
  };
  /** Changes with every run event of the server: waits re-read the runs only then. */
  let runEvents: Condition;

  before(async () => {
    server = await startServer();
    runEvents = onRunEvents(server.services.events);
  });
  after(() => server.close());

  it("starts SCHEDULED runs with the trigger's parameter while APPROVED, and shows the schedule", async () => {
    await deployAndActivate(server, "ticking", NO_SCRIPT_FLOW, {
      triggers: [
        { type: "manual" },
        { type: "cron", name: "every-second", crontab: "* * * * * *", parameter: ORDERS },
      ],
    });
    await runEvents.readUntil(
      () => scheduledRuns("ticking"),
      (runs) => runs.some((r) => r.runStatus === "SUCCESS"),
      "a scheduled run succeeded",
      4000,
    );
    const [run] = (await scheduledRuns("ticking")).filter((r) => r.runStatus === "SUCCESS");
    const full = await server.services.store.getRun(null, run?.runId ?? "");
    assert.equal(full?.triggerType, "SCHEDULED");
    assert.deepEqual(JSON.parse(full?.runParam ?? "null"), ORDERS);
    assert.deepEqual(JSON.parse(full?.result ?? "null"), [{ amount: 2, qty: 3, total: 6 }]);

    const sched = await scheduleOf("ticking");
    assert.equal(sched.name, "every-second");
    assert.equal(sched.crontab, "* * * * * *");
    assert.equal(typeof sched.lastRunAt, "number");
    assert.ok(sched.nextRunAt > Date.now() - 1000 && sched.nextRunAt <= Date.now() + 1000);

    // A redeploy changing the crontab takes effect at once and keeps scheduleId.
    const d = await call("POST", "/flow/deploy", {
      elementName: "ticking",
      revisionName: "r2",
      path: "/flows",
      flow: NO_SCRIPT_FLOW,
      configure: {
        triggers: [{ type: "cron", name: "every-second", crontab: "0 0 1 1 *", parameter: ORDERS }],
      },
    });
    assert.equal(d.body.status, true, d.text);
    await server.services.schedules.settled();
    const changed = await scheduleOf("ticking");
    assert.equal(changed.scheduleId, sched.scheduleId);
    assert.equal(changed.crontab, "0 0 1 1 *");
    assert.equal(new Date(changed.nextRunAt).toISOString().slice(4), "-01-01T00:00:00.000Z");

    // Deactivated: no nextRunAt, and no more fires.
    await call("POST", "/flow/deploy", {
      elementName: "ticking",
      revisionName: "r3",
      path: "/flows",
      flow: NO_SCRIPT_FLOW,
      configure: {
        triggers: [
          { type: "cron", name: "every-second", crontab: "* * * * * *", parameter: ORDERS },
        ],
      },
    });
    await server.services.schedules.settled();
    const deact = await call("POST", "/flow/deactivate", {
      elementName: "ticking",
      path: "/flows",
    });
    assert.equal(deact.body.data, "OBSOLETE");
    assert.equal((await scheduleOf("ticking")).nextRunAt, undefined);
    const before = (await scheduledRuns("ticking")).length;
    // A witness flow fires every second: once two of its ticks have run, "ticking" would have
    // fired in them too had it still been scheduled (due schedules fire in one loop per tick).
    await deployAndActivate(server, "witness", NO_SCRIPT_FLOW, {
      triggers: [{ type: "cron", name: "every-second", crontab: "* * * * * *", parameter: ORDERS }],
    });
    await runEvents.readUntil(
      () => scheduledRuns("witness"),
      (runs) => runs.filter((r) => r.runStatus === "SUCCESS").length >= 2,
      "two ticks of the witness ran",
      5000,
    );
    assert.equal((await scheduledRuns("ticking")).length, before, "no fires while not APPROVED");
  });
});

describe("LIMIT_SCHEDULE_MIN_INTERVAL_S through a real server", () => {
  let server: TestServer;
  const h = scopeHeaders();
  before(async () => {
    server = await startServer({ LIMIT_SCHEDULE_MIN_INTERVAL_S: "3600" });
  });
  after(() => server.close());

  it("a per-second crontab is shown, and armed, at the next whole hour", async () => {
    await deployAndActivate(server, "thinned", NO_SCRIPT_FLOW, {
      triggers: [{ type: "cron", name: "every-second", crontab: "* * * * * *", parameter: ORDERS }],
    });
    await server.services.schedules.settled();
    const r = await server.call("GET", `${DF}/monitor/flows`, { headers: h });
    const sched = r.body.data.find(
      (f: { element: { elementName: string } }) => f.element.elementName === "thinned",
    )?.schedule;
    const HOUR = 3_600_000;
    // Read after the call: the next hour then, or the one after if the hour turned meanwhile.
    const now = Date.now();
    const nextHour = now - (now % HOUR) + HOUR;
    assert.ok(
      sched.nextRunAt === nextHour || sched.nextRunAt === nextHour - HOUR,
      `nextRunAt ${new Date(sched.nextRunAt).toISOString()}`,
    );
  });
});
