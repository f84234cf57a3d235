import type { ScheduleOverview } from "../scheduler/scheduler.ts";
import type {
  Element,
  FlowListRow,
  FlowOverviewRow,
  RerunLink,
  RunRecord,
} from "../store/types.ts";

/** Wire shapes of the API (docs/monitoring.md: RunInfo, RunDisplayResp, FlowOverviewRecord, …) from store rows. */

export type { ScheduleOverview };
/** A schedule as the API shows it (docs/monitoring.md): the scheduler's, without its time zone. */
export type ScheduleInfo = Omit<ScheduleOverview, "timezone">;

export interface RunInfo {
  runId: string;
  triggerType: string;
  runStatus: string;
  duration?: number;
  createTime?: number;
  startTime?: number;
  endTime?: number;
  version?: string;
  runName?: string;
  summary?: string;
  runParam?: string;
  initiator?: Record<string, unknown>;
}

export interface RunDisplay extends RunInfo {
  /** The run this one re-runs or resumes (docs/dataflow-service.md, "Re-run and resume"). */
  rerunOf?: RerunLink;
  elementName?: string;
  elementDescription?: string;
  folderId?: string;
}

/** Sets `key` only when the value is there: optional fields are absent, never null (docs/monitoring.md). */
function put<T extends object, K extends keyof T>(
  out: T,
  key: K,
  value: T[K] | null | undefined,
): void {
  if (value !== null && value !== undefined) out[key] = value;
}

export function runInfo(r: RunRecord): RunInfo {
  const out: RunInfo = { runId: r.id, triggerType: r.triggerType, runStatus: r.status };
  put(out, "createTime", r.createTime);
  put(out, "startTime", r.startTime);
  put(out, "endTime", r.endTime);
  put(out, "duration", r.duration);
  put(out, "version", r.version);
  put(out, "runName", r.runName);
  put(out, "summary", r.summary);
  put(out, "runParam", r.runParam);
  put(out, "initiator", r.initiator);
  return out;
}

/** RunOverview (lastRun): RunInfo without runParam and initiator. */
export function runOverview(r: RunRecord): RunInfo {
  const { runParam: _p, initiator: _i, ...rest } = runInfo(r);
  return rest;
}

export function runDisplay(
  r: RunRecord,
  element: Element | undefined,
  language: string | undefined,
): RunDisplay {
  const out: RunDisplay = runInfo(r);
  out.elementName = r.elementName;
  put(
    out,
    "elementDescription",
    element ? pickDescription(element.description, language) : undefined,
  );
  out.folderId = r.folderId;
  put(out, "rerunOf", r.rerunOf);
  return out;
}

/**
 * The description in the caller's locale: exact key (case-insensitive), then its language part
 * (`zh` for `zh-TW`), then `en`, then any.
 */
export function pickDescription(
  desc: Record<string, string> | null,
  language: string | undefined,
): string | undefined {
  if (!desc) return undefined;
  const entries = Object.entries(desc).filter(([, v]) => typeof v === "string" && v !== "");
  const find = (pred: (k: string) => boolean) => entries.find(([k]) => pred(k.toLowerCase()))?.[1];
  const lang = language?.trim().toLowerCase();
  const base = lang?.split(/[-_]/)[0];
  return (
    (lang ? find((k) => k === lang) : undefined) ??
    (base ? find((k) => k === base || k.split(/[-_]/)[0] === base) : undefined) ??
    find((k) => k === "en" || k.startsWith("en-")) ??
    entries[0]?.[1]
  );
}

/** The schedule that fires next; without any nextRunAt (flow not approved), the first. */
export function nextSchedule(list: readonly ScheduleInfo[]): ScheduleInfo | undefined {
  let best: ScheduleInfo | undefined;
  for (const s of list) {
    if (s.nextRunAt === undefined) continue;
    if (!best || (best.nextRunAt ?? Infinity) > s.nextRunAt) best = s;
  }
  const pick = best ?? list[0];
  if (!pick) return undefined;
  const out: ScheduleInfo = {
    name: pick.name,
    crontab: pick.crontab,
    scheduleId: pick.scheduleId,
  };
  put(out, "lastRunAt", pick.lastRunAt);
  put(out, "nextRunAt", pick.nextRunAt);
  return out;
}

export interface FlowOverviewRecord {
  element: {
    elementName: string;
    elementType: string;
    folderId: string;
    path: string;
    elementId: string;
    description?: string;
  };
  status: string;
  revision: { version: string; name: string };
  schedule?: ScheduleInfo;
  lastRelease?: { user?: Record<string, unknown>; time?: string };
  lastRun?: RunInfo;
  totalRuns: number;
  summary?: string;
}

export function flowOverview(
  row: FlowOverviewRow,
  language: string | undefined,
  schedules: readonly ScheduleOverview[],
): FlowOverviewRecord {
  const el = row.element;
  const element: FlowOverviewRecord["element"] = {
    elementName: el.name,
    elementType: el.type,
    folderId: el.folderId,
    path: el.path,
    elementId: el.id,
  };
  put(element, "description", pickDescription(el.description, language));
  const out: FlowOverviewRecord = {
    element,
    status: el.status ?? "DRAFT",
    // A flow always has a release once deployed; "" covers the impossible gap rather than failing the list.
    revision: {
      version: el.releaseVersion == null ? "" : String(el.releaseVersion),
      name: row.revisionName ?? "",
    },
    totalRuns: row.totalRuns,
  };
  put(out, "schedule", nextSchedule(schedules));
  if (el.releaseUser || el.releaseTime != null) {
    const rel: NonNullable<FlowOverviewRecord["lastRelease"]> = {};
    put(rel, "user", el.releaseUser);
    put(rel, "time", el.releaseTime == null ? undefined : new Date(el.releaseTime).toISOString());
    out.lastRelease = rel;
  }
  put(out, "lastRun", row.lastRun ? runOverview(row.lastRun) : undefined);
  out.summary = flowSummary(row);
  return out;
}

/** One line a monitor can show beside the name, from what is already loaded (no extra query). */
export function flowSummary(row: FlowOverviewRow): string {
  const el = row.element;
  const rev =
    el.releaseVersion == null
      ? "no release"
      : `v${el.releaseVersion}${row.revisionName ? ` "${row.revisionName}"` : ""}`;
  const runs = `${row.totalRuns} run${row.totalRuns === 1 ? "" : "s"}`;
  const last = row.lastRun
    ? `, last ${row.lastRun.status} at ${new Date(row.lastRun.createTime).toISOString()}`
    : "";
  return `${el.status ?? "DRAFT"} ${rev}, ${runs}${last}`;
}

export interface FlowElementInfoWithInProcess {
  elementName: string;
  inProcessCount: number;
  elementType: string;
  folderId: string;
  path: string;
  elementId: string;
  description?: Record<string, string>;
  app?: string;
  space?: string;
}

/**
 * `withScope`: the list spans every scope (auth off, no headers, docs/auth.md), so each item says
 * which app and space it belongs to; two scopes may each hold a flow of the same name and path.
 */
export function flowListItem(row: FlowListRow, withScope = false): FlowElementInfoWithInProcess {
  const el = row.element;
  const out: FlowElementInfoWithInProcess = {
    elementName: el.name,
    inProcessCount: row.inProcessCount,
    elementType: el.type,
    folderId: el.folderId,
    path: el.path,
    elementId: el.id,
  };
  put(out, "description", el.description);
  if (withScope) {
    out.app = el.scope.app;
    out.space = el.scope.space;
  }
  return out;
}
