/**
 * Run names from `configure.runNameTemplate` (docs/flow-graph.md). Placeholders: ${elementName} ${runId}
 * ${version} ${triggerType} ${user} ${date} ${date:FORMAT} ${param.a.b}. FORMAT tokens are yyyy MM
 * dd HH mm ss SSS; any other character is literal. `${date}` alone means `${date:yyyyMMddHHmmss}`.
 */
import { DEFAULT_RUN_NAME_TEMPLATE } from "./graph.ts";

export { DEFAULT_RUN_NAME_TEMPLATE };

export interface RunNameVars {
  elementName: string;
  runId: string;
  version: string | number;
  triggerType: string;
  user: string;
  parameter: unknown;
  /** Epoch milliseconds. */
  now: number;
  /** IANA zone for ${date:…}; default UTC. */
  timeZone?: string;
}

const PLACEHOLDER = /\$\{([^}]*)\}/g;
const SIMPLE = new Set(["elementName", "runId", "version", "triggerType", "user", "date"]);
const PARAM = /^param(\.[^.]+)+$/;

function isKnown(name: string): boolean {
  return SIMPLE.has(name) || name.startsWith("date:") || PARAM.test(name);
}

/** Placeholders of `template` that renderRunName does not know (for the deploy validator). */
export function unknownPlaceholders(template: string): string[] {
  return [...template.matchAll(PLACEHOLDER)].map((m) => m[1] ?? "").filter((p) => !isKnown(p));
}

const formatters = new Map<string, Intl.DateTimeFormat>();

const two = (n: number) => String(n).padStart(2, "0");

function dateParts(now: number, timeZone: string): Record<string, string> {
  // UTC (the default, and every run's name is rendered on the hot path) needs no Intl.
  if (timeZone === "UTC") {
    const d = new Date(now);
    return {
      yyyy: String(d.getUTCFullYear()).padStart(4, "0"),
      MM: two(d.getUTCMonth() + 1),
      dd: two(d.getUTCDate()),
      HH: two(d.getUTCHours()),
      mm: two(d.getUTCMinutes()),
      ss: two(d.getUTCSeconds()),
      SSS: String(d.getUTCMilliseconds()).padStart(3, "0"),
    };
  }
  let f = formatters.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat("en-US", {
      timeZone,
      year: "numeric",
      month: "2-digit",
      day: "2-digit",
      hour: "2-digit",
      minute: "2-digit",
      second: "2-digit",
      hourCycle: "h23",
    });
    formatters.set(timeZone, f);
  }
  const parts: Record<string, string> = {};
  for (const p of f.formatToParts(new Date(now))) parts[p.type] = p.value;
  return {
    yyyy: (parts.year ?? "").padStart(4, "0"),
    MM: parts.month ?? "",
    dd: parts.day ?? "",
    HH: parts.hour ?? "",
    mm: parts.minute ?? "",
    ss: parts.second ?? "",
    // Zone offsets are whole seconds, so the millisecond field is the same in every zone.
    SSS: String(((now % 1000) + 1000) % 1000).padStart(3, "0"),
  };
}

export function formatDate(now: number, format: string, timeZone = "UTC"): string {
  const parts = dateParts(now, timeZone);
  return format.replace(/yyyy|SSS|MM|dd|HH|mm|ss/g, (t) => parts[t] ?? t);
}

function paramAt(parameter: unknown, path: string[]): string {
  let cur: unknown = parameter;
  for (const key of path) {
    if (typeof cur !== "object" || cur === null) return "";
    cur = (cur as Record<string, unknown>)[key];
  }
  if (cur === undefined || cur === null) return "";
  return typeof cur === "string" ? cur : JSON.stringify(cur);
}

/**
 * The longest run name (docs/flow-graph.md, "Run names"): a rendered one is cut there, a given
 * `taskName` past it is a 400. Names are labels for lists and searches; without a cut, a template
 * repeating `${param.a}` multiplied a parameter into a name hundreds of times its size.
 */
export const RUN_NAME_MAX = 1024;

/**
 * Render, cut at RUN_NAME_MAX; placeholders past the cut are not evaluated. Unknown placeholders
 * are kept as written (deploy validation rejects them anyway).
 */
export function renderRunName(template: string | undefined, vars: RunNameVars): string {
  const text = template || DEFAULT_RUN_NAME_TEMPLATE;
  let out = "";
  let at = 0;
  for (const m of text.matchAll(PLACEHOLDER)) {
    out += text.slice(at, m.index);
    if (out.length >= RUN_NAME_MAX) break;
    out += placeholder(m[0], m[1] ?? "", vars);
    at = m.index + m[0].length;
    if (out.length >= RUN_NAME_MAX) break;
  }
  if (out.length < RUN_NAME_MAX) out += text.slice(at);
  if (out.length <= RUN_NAME_MAX) return out;
  // Not between the two halves of a surrogate pair (a lone half is not text).
  const high = out.charCodeAt(RUN_NAME_MAX - 1);
  return out.slice(0, high >= 0xd800 && high <= 0xdbff ? RUN_NAME_MAX - 1 : RUN_NAME_MAX);
}

function placeholder(whole: string, name: string, vars: RunNameVars): string {
  const tz = vars.timeZone ?? "UTC";
  switch (name) {
    case "elementName":
      return vars.elementName;
    case "runId":
      return vars.runId;
    case "version":
      return String(vars.version);
    case "triggerType":
      return vars.triggerType;
    case "user":
      return vars.user;
    case "date":
      return formatDate(vars.now, "yyyyMMddHHmmss", tz);
  }
  if (name.startsWith("date:")) return formatDate(vars.now, name.slice(5), tz);
  if (PARAM.test(name)) return paramAt(vars.parameter, name.split(".").slice(1));
  return whole;
}
