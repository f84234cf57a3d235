import { Type } from "typebox";
import { Description } from "./flow-schemas.ts";

/** TypeBox schemas of the monitoring endpoints (docs/monitoring.md). */

const Str = Type.String();
const Int = Type.Integer();
/** A time or duration in ms compared in the store (a PostgreSQL `bigint`): 1e300 is a 400. */
const Ms = Type.Integer({ minimum: -Number.MAX_SAFE_INTEGER, maximum: Number.MAX_SAFE_INTEGER });
const Opt = Type.Optional;
const ElementId = Type.Union([Type.String(), Type.Integer()]);
const User = Type.Record(Type.String(), Type.Unknown(), {
  description: "user object: userId, userName, email, …",
});

const RunStatus = Type.Union(
  ["QUEUED", "STARTED", "SUCCESS", "FAILURE", "CANCELED"].map((s) => Type.Literal(s)),
);
const Trigger = Type.Union(["API", "SCHEDULED", "SYNC", "ASYNC"].map((s) => Type.Literal(s)));

/** StringColFilter {name, value, op} or IntervalColFilter {name, from, to}, told apart by name. */
const ColFilter = Type.Object({
  name: Type.String({ minLength: 1 }),
  value: Opt(Str),
  op: Opt(Type.Union([Type.Literal("contains"), Type.Literal("eq"), Type.Literal("prefix")])),
  from: Opt(Ms),
  to: Opt(Ms),
});

export const PagedRunsFilter = Type.Object({
  pageNo: Type.Integer({ minimum: 0 }),
  pageSize: Type.Integer({ minimum: 1, maximum: 100 }),
  elementName: Opt(Type.String({ minLength: 1 })),
  elementType: Opt(Str),
  folderId: Opt(Str),
  path: Opt(Str),
  elementId: Opt(ElementId),
  runStatusFilter: Opt(Type.Array(RunStatus, { maxItems: 10 })),
  triggerFilter: Opt(Type.Array(Trigger, { maxItems: 10 })),
  orderBy: Opt(Type.Array(Type.Object({ name: Str, asc: Opt(Type.Boolean()) }), { maxItems: 10 })),
  versionFilter: Opt(Type.Array(Str, { maxItems: 100 })),
  quickSearch: Opt(Type.String({ maxLength: 200 })),
  colFilters: Opt(Type.Array(ColFilter, { maxItems: 20 })),
});

const RunOverviewFields = {
  runId: Str,
  triggerType: Str,
  runStatus: Str,
  duration: Opt(Int),
  createTime: Opt(Int),
  startTime: Opt(Int),
  endTime: Opt(Int),
  version: Opt(Str),
  runName: Opt(Str),
  summary: Opt(Str),
};
const RunOverview = Type.Object(RunOverviewFields);
const RunInfoFields = { ...RunOverviewFields, runParam: Opt(Str), initiator: Opt(User) };
export const RunInfo = Type.Object(RunInfoFields);

export const RunDisplayResp = Type.Object({
  ...RunInfoFields,
  elementName: Opt(Str),
  elementDescription: Opt(Str),
  folderId: Opt(Str),
  rerunOf: Opt(
    Type.Object(
      {
        runId: Str,
        kind: Type.Union([Type.Literal("rerun"), Type.Literal("resume")]),
      },
      { description: "the run this one re-runs or resumes" },
    ),
  ),
});

/** docs/security.md, "Disk", "Kept directories": the run's kept directory went early. */
export const FilesRemovedSchema = Type.Object(
  {
    time: Int,
    reason: Str,
  },
  {
    description:
      "the working directory this ended run kept on its node was removed before its fileCleanup said (SCRIPT_KEPT_BYTES_PER_APP, DATA_DIR_FREE_BYTES_MIN); its artifacts are not affected",
  },
);

export const MonitorRunResp = Type.Object({
  totalCount: Int,
  totalPage: Int,
  runs: Type.Array(RunInfo),
  queuedCount: Int,
  startedCount: Int,
  successCount: Int,
  failureCount: Int,
  canceledCount: Int,
});

export const MonitorRunQuery = Type.Object({ runId: Type.String({ minLength: 1 }) });

const ScheduleOverview = Type.Object({
  name: Str,
  crontab: Str,
  scheduleId: Str,
  lastRunAt: Opt(Int),
  nextRunAt: Opt(Int),
});

export const FlowOverviewRecord = Type.Object({
  element: Type.Object({
    elementName: Str,
    elementType: Str,
    folderId: Opt(Str),
    path: Opt(Str),
    elementId: Opt(Str),
    description: Opt(Str),
  }),
  status: Str,
  revision: Type.Object({ version: Str, name: Str }),
  schedule: Opt(ScheduleOverview),
  lastRelease: Opt(Type.Object({ user: Opt(User), time: Opt(Str) })),
  lastRun: Opt(RunOverview),
  totalRuns: Int,
  summary: Opt(Str),
});

export const FlowElementInfoWithInProcess = Type.Object({
  elementName: Str,
  inProcessCount: Int,
  elementType: Opt(Str),
  folderId: Opt(Str),
  path: Opt(Str),
  elementId: Opt(Str),
  description: Opt(Description),
  app: Opt(
    Type.String({ description: "only when the list spans every scope (auth off, no scope)" }),
  ),
  space: Opt(
    Type.String({ description: "only when the list spans every scope (auth off, no scope)" }),
  ),
});
