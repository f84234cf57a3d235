import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  flowListItem,
  flowOverview,
  nextSchedule,
  pickDescription,
  runDisplay,
  runInfo,
} from "../../src/monitor/present.ts";
import type { Element, RunRecord } from "../../src/store/types.ts";

const element: Element = {
  id: "7",
  scope: { app: "a", space: "s" },
  folderId: "f1",
  path: "/flows",
  type: "DPL",
  name: "orders",
  description: { en: "Orders", "zh-cn": "订单" },
  status: "APPROVED",
  releaseVersion: 3,
  releaseUser: { userId: "alice" },
  releaseTime: Date.UTC(2024, 0, 2),
  createdAt: 1,
  updatedAt: 2,
};

const queued: RunRecord = {
  id: "r1",
  scope: { app: "a", space: "s" },
  elementId: "7",
  elementType: "DPL",
  elementName: "orders",
  folderId: "f1",
  version: "3",
  triggerType: "ASYNC",
  status: "QUEUED",
  runName: null,
  runParam: "{}",
  initiator: null,
  parentRunId: null,
  inProcess: false,
  nodeId: null,
  createTime: 1000,
  startTime: null,
  endTime: null,
  duration: null,
  summary: null,
  rerunOf: null,
};

describe("present", () => {
  it("runInfo fills what has a value and leaves the rest absent", () => {
    assert.deepEqual(runInfo(queued), {
      runId: "r1",
      triggerType: "ASYNC",
      runStatus: "QUEUED",
      createTime: 1000,
      version: "3",
      runParam: "{}",
    });
    const done = {
      ...queued,
      status: "SUCCESS" as const,
      startTime: 1001,
      endTime: 1011,
      duration: 10,
      summary: "3 nodes",
      runName: "n",
      initiator: { userId: "u" },
    };
    assert.deepEqual(Object.keys(runInfo(done)).sort(), [
      "createTime",
      "duration",
      "endTime",
      "initiator",
      "runId",
      "runName",
      "runParam",
      "runStatus",
      "startTime",
      "summary",
      "triggerType",
      "version",
    ]);
  });
  it("runDisplay adds element name, localized description and folder", () => {
    const d = runDisplay(queued, element, "zh-CN");
    assert.deepEqual([d.elementName, d.elementDescription, d.folderId], ["orders", "订单", "f1"]);
  });
  it("pickDescription: exact locale, then its language, then en, then any", () => {
    assert.equal(pickDescription({ en: "E", "zh-cn": "Z" }, "zh-cn"), "Z");
    assert.equal(pickDescription({ en: "E", "zh-cn": "Z" }, "zh-TW"), "Z");
    assert.equal(pickDescription({ en: "E", "zh-cn": "Z" }, "fr"), "E");
    assert.equal(pickDescription({ de: "D" }, undefined), "D");
    assert.equal(pickDescription(null, "en"), undefined);
  });
  it("nextSchedule picks the earliest nextRunAt, else the first", () => {
    const a = { name: "a", crontab: "* * * * *", scheduleId: "1", nextRunAt: 50 };
    const b = { name: "b", crontab: "0 * * * *", scheduleId: "2", nextRunAt: 20, lastRunAt: 10 };
    assert.deepEqual(nextSchedule([a, b]), b);
    assert.equal(
      nextSchedule([
        { name: "x", crontab: "c", scheduleId: "3" },
        { name: "y", crontab: "c", scheduleId: "4" },
      ])?.name,
      "x",
    );
    assert.equal(nextSchedule([]), undefined);
  });
  it("flowOverview fills revision, lastRelease, lastRun, totalRuns and a summary", () => {
    const o = flowOverview(
      { element, revisionName: "nightly", totalRuns: 2, lastRun: queued },
      "en",
      [],
    );
    assert.deepEqual(o.element, {
      elementName: "orders",
      elementType: "DPL",
      folderId: "f1",
      path: "/flows",
      elementId: "7",
      description: "Orders",
    });
    assert.deepEqual(o.revision, { version: "3", name: "nightly" });
    assert.deepEqual(o.lastRelease, {
      user: { userId: "alice" },
      time: "2024-01-02T00:00:00.000Z",
    });
    assert.equal(o.lastRun?.runId, "r1");
    assert.equal(o.lastRun?.runParam, undefined, "RunOverview has no runParam");
    assert.equal(o.totalRuns, 2);
    assert.equal(o.schedule, undefined);
    assert.match(o.summary ?? "", /^APPROVED v3 "nightly", 2 runs, last QUEUED/);
  });
  it("flowListItem carries the full description object", () => {
    assert.deepEqual(flowListItem({ element, inProcessCount: 2 }).description, element.description);
  });
});
