import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import { systemClock } from "../../src/clock.ts";
import { createPgNotifyBridge, type PgNotifyBridge } from "../../src/runs/pg-notify.ts";
import { createRunEvents, type RunEvents } from "../../src/runs/run-events.ts";
import { startPostgres, terminateBackends } from "../helpers/pg.ts";
import { condition } from "../helpers/wait.ts";

const logged: string[] = [];
const logger = {
  info: (_: unknown, msg?: string) => void logged.push(msg ?? ""),
  warn: (_: unknown, msg?: string) => void logged.push(msg ?? ""),
  error: (_: unknown, msg?: string) => void logged.push(msg ?? ""),
};

/** Two "nodes": each its own RunEvents and bridge, one database between them. */
describe("LISTEN/NOTIFY run-end bridge", () => {
  let url: string;
  let a: RunEvents;
  let b: RunEvents;
  let bridgeA: PgNotifyBridge;
  let bridgeB: PgNotifyBridge;
  /** Every payload on the channel, as a third party sees it. */
  const wire: string[] = [];
  const heard = condition();
  /** The payloads on the wire that carry runs named `prefix…`. */
  const onWire = (prefix: string) =>
    wire.filter((p) =>
      p
        .slice(p.indexOf(":") + 1)
        .split(",")
        .some((id) => id.startsWith(prefix)),
    );
  /** Every run ID the spy has seen go over the wire. */
  const wireIds = new Set<string>();
  /** Resolves once the spy has seen the ends of all `runIds` go over the wire. */
  const wireSaw = (...runIds: string[]) =>
    heard.until(() => runIds.every((id) => wireIds.has(id)), `${runIds.length} ends on the wire`);
  let spy: pg.Client;

  before(async () => {
    url = await (await startPostgres()).createDatabase();
    a = createRunEvents({ clock: systemClock });
    b = createRunEvents({ clock: systemClock });
    bridgeA = await createPgNotifyBridge({
      connectionString: url,
      events: a,
      logger,
      heartbeatMs: 200,
    });
    bridgeB = await createPgNotifyBridge({
      connectionString: url,
      events: b,
      logger,
      heartbeatMs: 200,
    });
    spy = new pg.Client({ connectionString: url });
    await spy.connect();
    spy.on("notification", (m) => {
      const payload = m.payload ?? "";
      wire.push(payload);
      for (const id of payload.slice(payload.indexOf(":") + 1).split(",")) wireIds.add(id);
      heard.changed();
    });
    await spy.query("LISTEN sluice_run_end");
  });

  after(async () => {
    await bridgeA.close();
    await bridgeB.close();
    await spy.end();
  });

  it("a run ending on A wakes a request waiting on B, and the reverse", async () => {
    const onB = b.waitFor("run-1", 5000);
    a.notify("run-1");
    assert.equal(await onB, true);

    const onA = a.waitFor("run-2", 5000);
    b.notify("run-2");
    assert.equal(await onA, true);
  });

  it("waiters for other runs keep waiting", async () => {
    let woke = false;
    void b.waitFor("run-other", 5000).then((w) => {
      woke = w;
    });
    const relayed = b.waitFor("run-3", 5000);
    a.notify("run-3");
    // B has relayed run-3 (its waiter woke): the waiter of another run is still waiting.
    assert.equal(await relayed, true);
    assert.equal(woke, false);
    b.notify("run-other");
  });

  it("each end goes over the wire once, tagged with its node; nothing echoes back", async () => {
    let seenOnA = 0;
    let seenOnB = 0;
    a.onEnd((id) => {
      if (id === "run-echo") seenOnA++;
    });
    b.onEnd((id) => {
      if (id === "run-echo") seenOnB++;
    });
    const onB = b.waitFor("run-echo", 5000);
    a.notify("run-echo");
    assert.equal(await onB, true);
    // An echo by B would be published before B's next own end, on the same connection, and A
    // would hear it before that end: once both have gone round, any echo has shown.
    const markerOnA = a.waitFor("echo-marker", 5000);
    b.notify("echo-marker");
    assert.equal(await markerOnA, true);
    await wireSaw("echo-marker");
    assert.deepEqual(onWire("run-echo"), [`${bridgeA.nodeId}:run-echo`]);
    assert.equal(seenOnA, 1);
    assert.equal(seenOnB, 1);
    assert.notEqual(bridgeA.nodeId, bridgeB.nodeId);
  });

  it("a burst of ends is batched into few notifications and wakes every waiter", async () => {
    const ids = Array.from({ length: 2000 }, (_, i) => `burst-run-${String(i).padStart(6, "0")}`);
    const waits = ids.map((id) => b.waitFor(id, 5000));
    for (const id of ids) a.notify(id);
    const woke = await Promise.all(waits);
    assert.ok(woke.every(Boolean));
    await wireSaw(...ids);
    const burst = onWire("burst-run-");
    assert.ok(burst.length < 20, `${burst.length} notifications for ${ids.length} ends`);
    assert.ok(burst.every((p) => p.length <= 8000));
  });

  it("reconnects after losing its connection", async () => {
    // Kill both bridges' listening connections and the publishers too.
    const ended = await terminateBackends(url, "application_name LIKE 'sluice-run-events%'");
    assert.ok(ended >= 2);
    // The first end after the kill may be lost while B is away; keep ending runs until one lands.
    const deadline = Date.now() + 10_000;
    let woke = false;
    for (let i = 0; !woke && Date.now() < deadline; i++) {
      const id = `after-kill-${i}`;
      const wait = b.waitFor(id, 300);
      a.notify(id);
      woke = await wait;
    }
    assert.ok(woke, "B hears A again after reconnecting");
    // And once reconnected, every end lands.
    const waits = [0, 1, 2].map((i) => a.waitFor(`back-${i}`, 3000));
    for (const i of [0, 1, 2]) b.notify(`back-${i}`);
    assert.deepEqual(await Promise.all(waits), [true, true, true]);
    assert.ok(
      logged.filter((m) => m.includes("reconnected")).length >= 2,
      "both listeners reconnected",
    );
  });

  it("close stops relaying", async () => {
    const c = createRunEvents({ clock: systemClock });
    const bridgeC = await createPgNotifyBridge({ connectionString: url, events: c, logger });
    const before = c.waitFor("pre-close", 3000);
    a.notify("pre-close");
    assert.equal(await before, true);
    await bridgeC.close();
    const afterClose = c.waitFor("post-close", 300);
    a.notify("post-close");
    assert.equal(await afterClose, false);
  });

  it("fails fast when the database is unreachable", async () => {
    const events = createRunEvents({ clock: systemClock });
    await assert.rejects(() =>
      createPgNotifyBridge({
        connectionString: "postgres://postgres@127.0.0.1:1/none",
        events,
        logger,
      }),
    );
  });
});
