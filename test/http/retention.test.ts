import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { workDirOf } from "../../src/runs/file-cleanup.ts";
import type { NewRun, RunEnd, Scope } from "../../src/store/types.ts";
import { DF, deployAndActivate, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import { newRun } from "../helpers/runs.ts";
import {
  OTHER_SCOPE,
  SCOPE,
  scopeHeaders,
  startServer,
  type TestServer,
  upload,
} from "../helpers/server.ts";

/**
 * Run retention through the real service (docs/retention.md), in both modes: RUN_RETENTION_DAYS,
 * a flow's configure.retentionDays, a Python element's # sluice-retention-days; the dry run per
 * scope; a pass deletes what the dry run showed, with the runs' kept files, and nothing else;
 * totalRuns and the status counts stay right.
 */

const DAY = 86_400_000;
const scope = (s: { app: string; space: string }): Scope => ({ app: s.app, space: s.space });

describe("run retention", () => {
  let server: TestServer;
  const ids: Record<string, string> = {};
  const now = Date.now();
  /** Run ids by what must happen to them. */
  const gone: string[] = [];
  const kept: string[] = [];

  async function seed(
    name: string,
    type: "DPL" | "PY",
    s: Scope,
    endedDaysAgo: number | null,
    fate: "gone" | "kept",
  ): Promise<string> {
    const run: NewRun = newRun({
      scope: s,
      elementId: ids[name] as string,
      elementType: type,
      elementName: name,
      version: type === "DPL" ? "1" : null,
      createTime: now - (endedDaysAgo ?? 100) * DAY - 1000,
      ...(endedDaysAgo === null ? { status: "STARTED" as const, startTime: now - 100 * DAY } : {}),
    });
    const end: RunEnd | undefined =
      endedDaysAgo === null
        ? undefined
        : { status: "SUCCESS", endTime: now - endedDaysAgo * DAY, summary: null, stdout: "x" };
    await server.services.store.insertRun(run, end);
    (fate === "gone" ? gone : kept).push(run.id);
    return run.id;
  }

  before(async () => {
    server = await startServer({ RUN_RETENTION_DAYS: "30", RUN_RETENTION_SWEEP_MS: "0" });
    await deployAndActivate(server, "global", NO_SCRIPT_FLOW);
    await deployAndActivate(server, "short", NO_SCRIPT_FLOW, { retentionDays: 2 });
    await deployAndActivate(server, "forever", NO_SCRIPT_FLOW, { retentionDays: 0 });
    await deployAndActivate(server, "theirs", NO_SCRIPT_FLOW, {}, scopeHeaders(OTHER_SCOPE));
    const up = await upload(
      server,
      [{ name: "daily.py", content: "# sluice-retention-days: 1\ndef main(p):\n    return 1\n" }],
      { path: "/s" },
    );
    assert.equal(up.body.data[0]?.status, 0, up.text);
    const rows = await server.services.store.db
      .selectFrom("elements")
      .select(["id", "name"])
      .execute();
    for (const r of rows) ids[r.name] = String(r.id);

    await seed("global", "DPL", scope(SCOPE), 40, "gone");
    await seed("global", "DPL", scope(SCOPE), 10, "kept");
    await seed("global", "DPL", scope(SCOPE), null, "kept"); // unfinished, however old
    await seed("short", "DPL", scope(SCOPE), 10, "gone");
    await seed("short", "DPL", scope(SCOPE), 3, "gone");
    await seed("short", "DPL", scope(SCOPE), 1, "kept");
    await seed("forever", "DPL", scope(SCOPE), 900, "kept");
    await seed("daily", "PY", scope(SCOPE), 2, "gone");
    await seed("daily", "PY", scope(SCOPE), 0.5, "kept");
    await seed("theirs", "DPL", scope(OTHER_SCOPE), 31, "gone");
  });

  after(async () => {
    await server?.close();
  });

  const totalRuns = async (s: typeof SCOPE) => {
    const r = await server.call("GET", `${DF}/monitor/flows`, { headers: scopeHeaders(s) });
    return Object.fromEntries(
      r.body.data.map((f: { element: { elementName: string }; totalRuns: number }) => [
        f.element.elementName,
        f.totalRuns,
      ]),
    );
  };

  it("a deploy refuses a retentionDays that is not whole days from 0 to 36500, naming it", async () => {
    for (const bad of [-1, 1.5, "7", 36_501]) {
      const r = await server.call("POST", `${DF}/flow/deploy`, {
        headers: scopeHeaders(),
        body: {
          elementName: "bad",
          revisionName: "r1",
          path: "/flows",
          flow: NO_SCRIPT_FLOW,
          configure: { retentionDays: bad },
        },
      });
      const issues = (r.body.data ?? []) as { severity: number; path: string; message: string }[];
      const issue = issues.find((i) => i.severity === 2);
      assert.ok(issue, `${JSON.stringify(bad)}: ${r.text}`);
      assert.match(JSON.stringify(issue), /retentionDays/);
    }
  });

  it("an upload refuses a bad # sluice-retention-days, naming it", async () => {
    for (const bad of ["-1", "soon", "36501"]) {
      const r = await upload(
        server,
        [{ name: "bad.py", content: `# sluice-retention-days: ${bad}\ndef main(p): return 1\n` }],
        { path: "/s" },
      );
      assert.equal(r.body.data[0]?.status, 2, r.text);
      assert.match(r.body.data[0]?.message, /sluice-retention-days must be a whole number/);
    }
  });

  it("the dry run shows, per element of the caller's scope only, what would go", async () => {
    const r = await server.call("GET", `${DF}/retention/preview`, { headers: scopeHeaders() });
    assert.equal(r.body.status, true, r.text);
    const d = r.body.data;
    assert.equal(d.retentionDays, 30);
    const byName = Object.fromEntries(
      d.elements.map((e: { elementName: string }) => [e.elementName, e]),
    );
    assert.deepEqual(Object.keys(byName).sort(), ["daily", "global", "short"], "forever is kept");
    assert.deepEqual(
      [byName.global.runs, byName.global.rule, byName.global.retentionDays],
      [1, "global", 30],
    );
    assert.deepEqual(
      [byName.short.runs, byName.short.rule, byName.short.retentionDays],
      [2, "configure", 2],
    );
    assert.deepEqual(
      [byName.daily.runs, byName.daily.rule, byName.daily.elementType],
      [1, "declaration", "PY"],
    );
    assert.equal(d.total, 4);
    const theirs = await server.call("GET", `${DF}/retention/preview`, {
      headers: scopeHeaders(OTHER_SCOPE),
    });
    assert.deepEqual(
      theirs.body.data.elements.map((e: { elementName: string; runs: number }) => [
        e.elementName,
        e.runs,
      ]),
      [["theirs", 1]],
    );
    const none = await server.call("GET", `${DF}/retention/preview`, { headers: {} });
    assert.equal(none.body.status, false, "the scope headers are required");
  });

  it("a pass deletes exactly those runs and their kept files; counts and totalRuns stay right", async () => {
    const before = await totalRuns(SCOPE);
    const dirs = [gone[0], kept[0]].map((id) => workDirOf(server.dataDir, id as string));
    for (const dir of dirs) {
      fs.mkdirSync(dir, { recursive: true });
      fs.writeFileSync(path.join(dir, "kept.txt"), "kept by fileCleanup: keep");
    }
    const result = await server.services.retention.pass();
    assert.equal(result.runs, gone.length);
    assert.equal(result.dirs, 1);
    for (const id of gone)
      assert.equal(await server.services.store.getRun(null, id), undefined, id);
    for (const id of kept) assert.ok(await server.services.store.getRun(null, id), id);
    assert.equal(fs.existsSync(dirs[0] as string), false, "the purged run's files went with it");
    assert.equal(fs.existsSync(dirs[1] as string), true, "a kept run's files stay");

    assert.deepEqual(await totalRuns(SCOPE), before, "totalRuns counts every run ever started");
    const page = await server.call("POST", `${DF}/monitor/runs`, {
      headers: scopeHeaders(),
      body: { elementName: "global", pageNo: 0, pageSize: 10 },
    });
    const d = page.body.data;
    assert.deepEqual(
      [d.totalCount, d.successCount, d.startedCount, d.runs.length],
      [2, 1, 1, 2],
      page.text,
    );
    const after = await server.call("GET", `${DF}/retention/preview`, { headers: scopeHeaders() });
    assert.equal(after.body.data.total, 0);
    assert.equal((await server.services.retention.pass()).runs, 0, "a second pass finds nothing");
  });
});
