import { badRequest } from "../errors.ts";
import type {
  ColFilter,
  IntervalColumn,
  RunQuery,
  RunStatus,
  SortField,
  SortKey,
  StringColumn,
  StringOp,
  TriggerType,
} from "../store/types.ts";
import { FINISHED } from "../store/types.ts";
import { pageWindow } from "./paging.ts";

/** PagedRunsFilter as the HTTP schema lets it through (types checked, meaning not yet). */
export interface PagedRunsFilterInput {
  pageNo: number;
  pageSize: number;
  runStatusFilter?: string[] | undefined;
  triggerFilter?: string[] | undefined;
  versionFilter?: string[] | undefined;
  quickSearch?: string | undefined;
  colFilters?: ColFilterInput[] | undefined;
  orderBy?: { name: string; asc?: boolean | undefined }[] | undefined;
}

export interface ColFilterInput {
  name: string;
  value?: string | undefined;
  op?: string | undefined;
  from?: number | undefined;
  to?: number | undefined;
}

const STATUSES: readonly RunStatus[] = ["QUEUED", "STARTED", ...FINISHED];
const TRIGGERS: readonly TriggerType[] = ["API", "SCHEDULED", "SYNC", "ASYNC"];
const SORT_FIELDS: readonly SortField[] = [
  "runId",
  "runName",
  "createTime",
  "startTime",
  "endTime",
  "duration",
  "runStatus",
  "triggerType",
  "version",
  "initiator",
  "summary",
];
const STRING_COLUMNS: readonly StringColumn[] = [
  "runId",
  "runName",
  "initiator",
  "version",
  "summary",
  "triggerType",
  "runStatus",
];
const INTERVAL_COLUMNS: readonly IntervalColumn[] = [
  "startTime",
  "endTime",
  "createTime",
  "duration",
];
const OPS: readonly StringOp[] = ["contains", "eq", "prefix"];

const isOneOf = <T extends string>(list: readonly T[], v: string): v is T =>
  (list as readonly string[]).includes(v);

/** An absent or empty list means "no filter"; unknown values are a 400 naming the field. */
function valuesOf<T extends string>(
  field: string,
  list: readonly T[],
  given: string[] | undefined,
): T[] | null {
  if (!given || given.length === 0) return null;
  const out = new Set<T>();
  for (const v of given) {
    if (!isOneOf(list, v))
      throw badRequest(`${field} holds unknown value "${v}"; allowed: ${list.join(", ")}`);
    out.add(v);
  }
  return [...out];
}

/** A key the filter's kind does not read would be dropped silently and match every run. */
function onlyKeys(f: ColFilterInput, where: string, allowed: readonly string[]): void {
  for (const key of Object.keys(f)) {
    if (key !== "name" && !allowed.includes(key))
      throw badRequest(
        `${where}.${key} is not allowed for column ${f.name}; allowed: name, ${allowed.join(", ")}`,
      );
  }
}

function colFilterOf(f: ColFilterInput, i: number): ColFilter {
  const where = `colFilters[${i}]`;
  if (isOneOf(STRING_COLUMNS, f.name)) {
    onlyKeys(f, where, ["value", "op"]);
    if (typeof f.value !== "string")
      throw badRequest(`${where}.value is required for column ${f.name}`);
    const op = f.op ?? "contains";
    if (!isOneOf(OPS, op)) throw badRequest(`${where}.op must be one of ${OPS.join(", ")}`);
    return { kind: "string", column: f.name, value: f.value, op };
  }
  if (isOneOf(INTERVAL_COLUMNS, f.name)) {
    onlyKeys(f, where, ["from", "to"]);
    const from = f.from ?? null;
    const to = f.to ?? null;
    if (from !== null && to !== null && from > to)
      throw badRequest(`${where}: from must not be after to`);
    return { kind: "interval", column: f.name, from, to };
  }
  throw badRequest(
    `${where}.name "${f.name}" is not a filterable column; allowed: ${[...STRING_COLUMNS, ...INTERVAL_COLUMNS].join(", ")}`,
  );
}

function orderOf(given: PagedRunsFilterInput["orderBy"]): SortKey[] {
  const keys: SortKey[] = [];
  for (const [i, o] of (given ?? []).entries()) {
    if (!isOneOf(SORT_FIELDS, o.name))
      throw badRequest(`orderBy[${i}].name must be one of ${SORT_FIELDS.join(", ")}`);
    // A repeated field adds nothing to the order; the first mention wins.
    if (!keys.some((k) => k.field === o.name)) keys.push({ field: o.name, asc: o.asc ?? true });
  }
  if (keys.length === 0) keys.push({ field: "createTime", asc: false });
  // runId is unique, so appending it makes the order total; it follows the last key's direction
  // so that one index on (…, key, id) serves the whole ORDER BY in either direction.
  const last = keys[keys.length - 1] as SortKey;
  if (!keys.some((k) => k.field === "runId")) keys.push({ field: "runId", asc: last.asc });
  return keys;
}

/** Validates a PagedRunsFilter (minus its locator) into the query the store runs. */
export function parseRunsFilter(input: PagedRunsFilterInput): RunQuery {
  const { limit, offset } = pageWindow(input.pageNo, input.pageSize);
  const search = input.quickSearch?.trim().toLowerCase() ?? "";
  return {
    statuses: valuesOf("runStatusFilter", STATUSES, input.runStatusFilter),
    triggers: valuesOf("triggerFilter", TRIGGERS, input.triggerFilter),
    versions:
      input.versionFilter && input.versionFilter.length > 0
        ? [...new Set(input.versionFilter)]
        : null,
    quickSearch: search === "" ? null : search,
    colFilters: (input.colFilters ?? []).map(colFilterOf),
    orderBy: orderOf(input.orderBy),
    limit,
    offset,
  };
}
