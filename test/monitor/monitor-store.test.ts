import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { type PagedRunsFilterInput, parseRunsFilter } from "../../src/monitor/filter.ts";
import { type OpenedStore, openStore } from "../../src/store/open-store.ts";
import type { RunStatus, Scope, TriggerType } from "../../src/store/types.ts";
import { startPostgres } from "../helpers/pg.ts";

/** The monitoring queries of the Store, the same in both dialects (docs/operations.md, docs/monitoring.md). */

const SCOPE: Scope = { app: "app1", space: "space1" };
const OTHER: Scope = { app: "app1", space: "space2" };

interface Seed {
  id: string;
  create: number;
  trigger: TriggerType;
  version: string;
  name: string | null;
  who: string | null;
  status: RunStatus;
  start?: number;
  end?: number;
  summary?: string;
  inProcess?: boolean;
}

// Ties on purpose: r00/r01 share createTime, r00/r05 share duration; r04/r05 never started.
const SEEDS: Seed[] = [
  {
    id: "r00",
    create: 1000,
    trigger: "ASYNC",
    version: "1",
    name: "alpha nightly",
    who: "alice",
    status: "SUCCESS",
    start: 1001,
    end: 1011,
  },
  {
    id: "r01",
    create: 1000,
    trigger: "SYNC",
    version: "1",
    name: "beta",
    who: "bob",
    status: "FAILURE",
    start: 1002,
    end: 1032,
    summary: "node py failed: 50%_off",
  },
  {
    id: "r02",
    create: 2000,
    trigger: "SCHEDULED",
    version: "2",
    name: "Gamma Nightly",
    who: "alice",
    status: "SUCCESS",
    start: 2001,
    end: 2006,
  },
  {
    id: "r03",
    create: 3000,
    trigger: "API",
    version: "2",
    name: null,
    who: "bob",
    status: "STARTED",
    start: 3001,
    inProcess: true,
  },
  {
    id: "r04",
    create: 4000,
    trigger: "ASYNC",
    version: "2",
    name: "delta",
    who: null,
    status: "QUEUED",
  },
  {
    id: "r05",
    create: 5000,
    trigger: "ASYNC",
    version: "3",
    name: "epsilon",
    who: "carol",
    status: "CANCELED",
    end: 5010,
  },
  {
    id: "r06",
    create: 6000,
    trigger: "SYNC",
    version: "3",
    name: "zeta",
    who: "alice",
    status: "SUCCESS",
    start: 6001,
    end: 6101,
    inProcess: true,
  },
];

for (const dialect of ["sqlite", "postgres"] as const) {
  describe(`monitor store (${dialect})`, () => {
    let store: OpenedStore;
    let dataDir: string;
    let flowId = "";
    let scriptId = "";
    let otherFlowId = "";

    const add = async (scope: Scope, elementId: string, type: "DPL" | "PY", s: Seed) => {
      await store.insertRun({
        id: s.id,
        scope,
        elementId,
        elementType: type,
        elementName: type === "DPL" ? "orders" : "script",
        folderId: "f",
        version: s.version,
        triggerType: s.trigger,
        status: s.start !== undefined ? "STARTED" : "QUEUED",
        runName: s.name,
        runParam: "{}",
        initiator: s.who ? { userId: s.who } : null,
        parentRunId: null,
        inProcess: s.inProcess ?? false,
        nodeId: null,
        createTime: s.create,
        startTime: s.start ?? null,
      });
      if (s.end !== undefined) {
        await store.endRun(s.id, {
          status: s.status as "SUCCESS",
          endTime: s.end,
          summary: s.summary ?? `${s.status} summary`,
        });
      }
    };

    const page = (input: Partial<PagedRunsFilterInput> = {}, scope = SCOPE, el = () => flowId) =>
      store.monitorRuns(scope, el(), parseRunsFilter({ pageNo: 0, pageSize: 100, ...input }));
    const ids = async (input: Partial<PagedRunsFilterInput> = {}) =>
      (await page(input)).runs.map((r) => r.id);

    before(async () => {
      dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-monitor-"));
      const databaseUrl =
        dialect === "postgres" ? await (await startPostgres()).createDatabase() : undefined;
      store = await openStore({ databaseUrl, dataDir });
      const folder = await store.ensureFolder(SCOPE, "/flows", 1);
      const deploy = (scope: Scope, folderId: string, name: string) =>
        store.deployFlow({
          scope,
          folderId,
          name,
          revisionName: "first",
          flow: {},
          configure: {},
          description: { en: name },
          user: { userId: "alice" },
          now: 1,
        });
      flowId = (await deploy(SCOPE, folder.id, "orders")).element.id;
      await deploy(SCOPE, folder.id, "idle");
      await store.putScript(
        {
          scope: SCOPE,
          folderId: folder.id,
          name: "script",
          kind: "module",
          content: new Uint8Array([1]),
          now: 1,
        },
        false,
      );
      scriptId = (await store.findElements(SCOPE, { type: "PY", name: "script" }))[0]?.id ?? "";
      const otherFolder = await store.ensureFolder(OTHER, "/flows", 1);
      otherFlowId = (await deploy(OTHER, otherFolder.id, "orders")).element.id;
      for (const s of SEEDS) await add(SCOPE, flowId, "DPL", s);
      await add(SCOPE, scriptId, "PY", {
        id: "p00",
        create: 7000,
        trigger: "ASYNC",
        version: "",
        name: "task one",
        who: "alice",
        status: "SUCCESS",
        start: 7001,
        end: 7002,
      });
      await add(SCOPE, scriptId, "PY", {
        id: "p01",
        create: 8000,
        trigger: "SYNC",
        version: "",
        name: "task two",
        who: "alice",
        status: "STARTED",
        start: 8001,
        inProcess: true,
      });
      await add(OTHER, otherFlowId, "DPL", {
        id: "o00",
        create: 9000,
        trigger: "ASYNC",
        version: "1",
        name: "alpha nightly",
        who: "alice",
        status: "QUEUED",
        inProcess: true,
      });
    });

    after(async () => {
      await store?.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    });

    it("counts every status; default order is createTime desc, ties by runId", async () => {
      const p = await page();
      assert.deepEqual(p.counts, { QUEUED: 1, STARTED: 1, SUCCESS: 3, FAILURE: 1, CANCELED: 1 });
      assert.equal(p.totalCount, 7);
      assert.deepEqual(
        p.runs.map((r) => r.id),
        ["r06", "r05", "r04", "r03", "r02", "r01", "r00"],
      );
      const r00 = p.runs.find((r) => r.id === "r00");
      assert.deepEqual(
        [r00?.duration, r00?.initiator, r00?.version, r00?.runName],
        [10, { userId: "alice" }, "1", "alpha nightly"],
      );
    });

    it("runStatusFilter narrows runs and totalCount but not the five counts", async () => {
      const p = await page({ runStatusFilter: ["SUCCESS", "QUEUED"] });
      assert.deepEqual(
        p.runs.map((r) => r.id),
        ["r06", "r04", "r02", "r00"],
      );
      assert.equal(p.totalCount, 4);
      assert.deepEqual(p.counts, { QUEUED: 1, STARTED: 1, SUCCESS: 3, FAILURE: 1, CANCELED: 1 });
    });

    it("triggerFilter, and the counts follow the other filters", async () => {
      const p = await page({ triggerFilter: ["ASYNC"] });
      assert.deepEqual(
        p.runs.map((r) => r.id),
        ["r05", "r04", "r00"],
      );
      assert.deepEqual(p.counts, { QUEUED: 1, STARTED: 0, SUCCESS: 1, FAILURE: 0, CANCELED: 1 });
    });

    it("versionFilter", async () => {
      assert.deepEqual(await ids({ versionFilter: ["2"] }), ["r04", "r03", "r02"]);
      assert.deepEqual(await ids({ versionFilter: ["1", "3"] }), ["r06", "r05", "r01", "r00"]);
    });

    it("quickSearch: case-insensitive over runId, runName, summary and initiator; wildcards literal", async () => {
      assert.deepEqual(await ids({ quickSearch: "NIGHTLY" }), ["r02", "r00"]);
      assert.deepEqual(await ids({ quickSearch: "R03" }), ["r03"]);
      assert.deepEqual(await ids({ quickSearch: "50%_off" }), ["r01"]);
      assert.deepEqual(await ids({ quickSearch: "%" }), ["r01"]);
      assert.deepEqual(await ids({ quickSearch: "_" }), ["r01"]);
      assert.deepEqual(await ids({ quickSearch: "carol" }), ["r05"]);
      assert.deepEqual(
        await ids({ quickSearch: "userid" }),
        [],
        "JSON keys of the initiator are not searched",
      );
      assert.deepEqual(await ids({ quickSearch: "x'; drop table runs; --" }), []);
    });

    it("string colFilters: runId, runName, initiator, version with contains, eq and prefix", async () => {
      const f = (name: string, value: string, op?: string) =>
        ids({ colFilters: [{ name, value, ...(op ? { op } : {}) }] });
      assert.deepEqual(await f("runId", "r03", "eq"), ["r03"]);
      assert.deepEqual(await f("runId", "R0", "prefix"), [
        "r06",
        "r05",
        "r04",
        "r03",
        "r02",
        "r01",
        "r00",
      ]);
      assert.deepEqual(await f("runId", "5"), ["r05"]);
      assert.deepEqual(await f("runName", "ETA"), ["r06", "r01"]);
      assert.deepEqual(await f("runName", "gam", "prefix"), ["r02"]);
      assert.deepEqual(await f("runName", "beta", "eq"), ["r01"]);
      assert.deepEqual(await f("runName", "Beta", "eq"), [], "eq is exact");
      assert.deepEqual(await f("initiator", "alice", "eq"), ["r06", "r02", "r00"]);
      assert.deepEqual(await f("initiator", "B"), ["r03", "r01"]);
      assert.deepEqual(await f("version", "3", "eq"), ["r06", "r05"]);
    });

    it("interval colFilters: startTime, endTime, createTime, duration, inclusive", async () => {
      const f = (name: string, from?: number, to?: number) =>
        ids({ colFilters: [{ name, from, to }] });
      assert.deepEqual(await f("startTime", 2001, 3001), ["r03", "r02"]);
      assert.deepEqual(await f("endTime", undefined, 1011), ["r00"]);
      assert.deepEqual(await f("createTime", 5000), ["r06", "r05"]);
      assert.deepEqual(await f("duration", 10, 30), ["r05", "r01", "r00"]);
      assert.deepEqual(
        await f("endTime"),
        ["r06", "r05", "r02", "r01", "r00"],
        "no bounds: the value exists",
      );
    });

    it("filters combine with AND", async () => {
      const p = await page({
        triggerFilter: ["ASYNC", "SYNC"],
        versionFilter: ["1"],
        quickSearch: "b",
        colFilters: [{ name: "duration", from: 20 }],
      });
      assert.deepEqual(
        p.runs.map((r) => r.id),
        ["r01"],
      );
    });

    const SORTED: Record<string, string[]> = {
      runId: ["r00", "r01", "r02", "r03", "r04", "r05", "r06"],
      createTime: ["r00", "r01", "r02", "r03", "r04", "r05", "r06"],
      // NULL (never started / not ended) sorts as the smallest value, in both dialects.
      startTime: ["r04", "r05", "r00", "r01", "r02", "r03", "r06"],
      endTime: ["r03", "r04", "r00", "r01", "r02", "r05", "r06"],
      duration: ["r03", "r04", "r02", "r00", "r05", "r01", "r06"],
      // Lifecycle order: QUEUED, STARTED, SUCCESS, FAILURE, CANCELED (not alphabetical).
      runStatus: ["r04", "r03", "r00", "r02", "r06", "r01", "r05"],
    };
    for (const [name, asc] of Object.entries(SORTED)) {
      it(`orderBy ${name} ascending and descending, ties by runId`, async () => {
        assert.deepEqual(await ids({ orderBy: [{ name, asc: true }] }), asc);
        assert.deepEqual(await ids({ orderBy: [{ name }] }), asc, "asc defaults to true");
        assert.deepEqual(await ids({ orderBy: [{ name, asc: false }] }), [...asc].reverse());
      });
    }

    it("orderBy with several keys", async () => {
      assert.deepEqual(
        await ids({
          orderBy: [
            { name: "runStatus", asc: false },
            { name: "createTime", asc: true },
          ],
        }),
        ["r05", "r01", "r00", "r02", "r06", "r03", "r04"],
      );
    });

    it("pages cover the order exactly once; past the end is empty with counts intact", async () => {
      const seen: string[] = [];
      for (let pageNo = 0; pageNo < 3; pageNo++) {
        const p = await page({ pageNo, pageSize: 3 });
        assert.equal(p.totalCount, 7);
        seen.push(...p.runs.map((r) => r.id));
      }
      assert.deepEqual(seen, ["r06", "r05", "r04", "r03", "r02", "r01", "r00"]);
      const beyond = await page({ pageNo: 9, pageSize: 3 });
      assert.deepEqual([beyond.runs, beyond.totalCount, beyond.counts.SUCCESS], [[], 7, 3]);
    });

    it("script tasks list the same way", async () => {
      const p = await page({}, SCOPE, () => scriptId);
      assert.deepEqual(
        p.runs.map((r) => [r.id, r.elementType]),
        [
          ["p01", "PY"],
          ["p00", "PY"],
        ],
      );
      assert.deepEqual(p.counts, { QUEUED: 0, STARTED: 1, SUCCESS: 1, FAILURE: 0, CANCELED: 0 });
    });

    it("a second space sees nothing of the first", async () => {
      const p = await page({}, OTHER, () => flowId);
      assert.deepEqual([p.totalCount, p.runs], [0, []]);
      const flows = await store.monitorFlows(OTHER);
      assert.deepEqual(
        flows.map((f) => [f.element.id, f.totalRuns, f.lastRun?.id]),
        [[otherFlowId, 1, "o00"]],
      );
      assert.deepEqual(
        (await store.listFlows(OTHER)).map((f) => [f.element.id, f.inProcessCount]),
        [[otherFlowId, 1]],
      );
    });

    it("monitorFlows: DPL elements with revision, counter and newest run", async () => {
      const flows = await store.monitorFlows(SCOPE);
      assert.deepEqual(
        flows.map((f) => [f.element.name, f.revisionName, f.totalRuns, f.lastRun?.id ?? null]),
        [
          ["idle", "first", 0, null],
          ["orders", "first", 7, "r06"],
        ],
      );
    });

    it("totalRuns counts every insert, deleted runs included (cumulative)", async () => {
      await add(SCOPE, flowId, "DPL", {
        id: "r07",
        create: 6500,
        trigger: "ASYNC",
        version: "3",
        name: "eta",
        who: null,
        status: "SUCCESS",
        start: 6501,
        end: 6502,
      });
      await store.deleteRuns(SCOPE, ["r07"]);
      const orders = (await store.monitorFlows(SCOPE)).find((f) => f.element.id === flowId);
      assert.deepEqual([orders?.totalRuns, orders?.lastRun?.id], [8, "r06"]);
    });

    it("listFlows: unfinished in-process runs per DPL element; null scope lists every scope", async () => {
      assert.deepEqual(
        (await store.listFlows(SCOPE)).map((f) => [f.element.name, f.inProcessCount]),
        [
          ["idle", 0],
          ["orders", 1],
        ],
      );
      const all = await store.listFlows(null);
      assert.deepEqual(
        all.map((f) => `${f.element.scope.space}:${f.element.name}:${f.inProcessCount}`),
        ["space1:idle:0", "space1:orders:1", "space2:orders:1"],
      );
    });
  });
}
