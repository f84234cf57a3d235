/** Deploy-time checks of `configure` (docs/flow-graph.md). Findings use nodeId and nodeType `configure`. */
import { Cron } from "croner";
import type { TSchema } from "typebox";
import type { Locator } from "../elements/locator.ts";
import { errorText } from "../errors.ts";
import { MAX_RETENTION_DAYS } from "../runs/retention-rules.ts";
import { webhookUrlProblem } from "../webhooks/targets.ts";
import { isCronTrigger } from "./cron-triggers.ts";
import {
  ErrorHandlers,
  FILE_CLEANUP_VARIANTS,
  RUN_TIMEOUT_VARIANTS,
  TRIGGER_VARIANTS,
  WebhooksSchema,
} from "./graph.ts";
import { describeIssues, validateJsonSchema } from "./json-schema.ts";
import { unknownPlaceholders } from "./run-name.ts";
import { type JsonPath, schemaIssues } from "./schema-issues.ts";
import { missingElement } from "./validate-nodes.ts";
import {
  Severity,
  ValidationCode,
  type ValidationCodeValue,
  type ValidationContext,
  type ValidationResult,
} from "./validation-codes.ts";

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

function issue(
  errorCode: ValidationCodeValue,
  path: JsonPath,
  errorMessage: string,
): ValidationResult {
  return {
    errorCode,
    nodeId: "configure",
    nodeType: "configure",
    errorMessage,
    severity: Severity.ERROR,
    path,
  };
}

/** A crontab error message, or null: 5 fields, or 6 with seconds first (croner parses the fields). */
export function cronError(crontab: string): string | null {
  const fields = crontab.trim().split(/\s+/);
  if (fields.length !== 5 && fields.length !== 6) {
    return `crontab needs 5 fields, or 6 with seconds first; got ${fields.length}`;
  }
  try {
    new Cron(crontab, { paused: true }).stop();
    return null;
  } catch (err) {
    return errorText(err);
  }
}

export function isValidTimeZone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

/** Schema issues of a `{type, …}` variant chosen by its `type`. */
function variantIssues(
  variants: Readonly<Record<string, TSchema>>,
  value: unknown,
  path: JsonPath,
): ValidationResult[] {
  const type = isRecord(value) ? value.type : undefined;
  const schema =
    typeof type === "string" && Object.hasOwn(variants, type) ? variants[type] : undefined;
  if (!schema) {
    const allowed = Object.keys(variants).join(", ");
    const at = isRecord(value) ? [...path, "type"] : path;
    return [issue(ValidationCode.INVALID_CONFIGURE, at, `type must be one of ${allowed}`)];
  }
  return schemaIssues(schema, value).map((i) =>
    issue(ValidationCode.INVALID_CONFIGURE, [...path, ...i.path], i.message),
  );
}

/** A Locator checked against LocatorSchema: its type, when given, is PY or DPL. */
type FlowLocator = Locator & { elementType?: "PY" | "DPL" | undefined };

async function elementIssue(
  locator: FlowLocator,
  path: JsonPath,
  ctx: ValidationContext,
): Promise<ValidationResult[]> {
  const types = locator.elementType ? [locator.elementType] : (["PY", "DPL"] as const);
  let reason: false | string = false;
  for (const t of types) {
    const found = await ctx.elementExists(locator, t);
    if (found === true) return [];
    reason ||= found;
  }
  return [
    issue(ValidationCode.ELEMENT_NOT_FOUND, path, missingElement("element", locator, reason)),
  ];
}

export async function validateConfigure(
  configure: unknown,
  inputSchemas: readonly unknown[],
  ctx: ValidationContext,
): Promise<ValidationResult[]> {
  if (configure === undefined || configure === null) return [];
  const base: JsonPath = ["configure"];
  if (!isRecord(configure))
    return [issue(ValidationCode.INVALID_CONFIGURE, base, "configure must be an object")];
  const out: ValidationResult[] = [];
  const { triggers, errorHandlers, prelude, runNameTemplate, runTimeout, logContent, fileCleanup } =
    configure;

  if (triggers !== undefined && triggers !== null)
    out.push(...triggerIssues(triggers, inputSchemas, [...base, "triggers"]));
  if (errorHandlers !== undefined && errorHandlers !== null)
    out.push(...(await errorHandlerIssues(errorHandlers, ctx, [...base, "errorHandlers"])));

  if (prelude !== undefined && prelude !== null && typeof prelude !== "string") {
    out.push(
      issue(ValidationCode.INVALID_CONFIGURE, [...base, "prelude"], "prelude must be a string"),
    );
  }

  if (runNameTemplate !== undefined && runNameTemplate !== null) {
    const path = [...base, "runNameTemplate"];
    if (typeof runNameTemplate !== "string") {
      out.push(issue(ValidationCode.INVALID_CONFIGURE, path, "runNameTemplate must be a string"));
    } else {
      for (const p of unknownPlaceholders(runNameTemplate)) {
        out.push(issue(ValidationCode.UNKNOWN_PLACEHOLDER, path, `unknown placeholder \${${p}}`));
      }
    }
  }

  if (runTimeout !== undefined && runTimeout !== null) {
    out.push(...variantIssues(RUN_TIMEOUT_VARIANTS, runTimeout, [...base, "runTimeout"]));
  }
  if (
    logContent !== undefined &&
    logContent !== null &&
    logContent !== "DETAILED" &&
    logContent !== "CONCISE"
  ) {
    out.push(
      issue(
        ValidationCode.INVALID_CONFIGURE,
        [...base, "logContent"],
        "logContent must be DETAILED or CONCISE",
      ),
    );
  }
  if (fileCleanup !== undefined && fileCleanup !== null) {
    out.push(...variantIssues(FILE_CLEANUP_VARIANTS, fileCleanup, [...base, "fileCleanup"]));
  }
  out.push(...maxRunsIssues(configure.maxConcurrentRuns, [...base, "maxConcurrentRuns"]));
  out.push(...retentionIssues(configure.retentionDays, [...base, "retentionDays"]));
  if (configure.webhooks !== undefined && configure.webhooks !== null)
    out.push(...webhookIssues(configure.webhooks, [...base, "webhooks"]));
  return out;
}

/** `configure.webhooks` (docs/webhooks.md): its shape, and that every URL is http or https. */
function webhookIssues(webhooks: unknown, at: JsonPath): ValidationResult[] {
  const out = schemaIssues(WebhooksSchema, webhooks).map((i) =>
    issue(ValidationCode.INVALID_CONFIGURE, [...at, ...i.path], i.message),
  );
  if (!Array.isArray(webhooks)) return out;
  webhooks.forEach((w: unknown, k) => {
    const problem = isRecord(w) && typeof w.url === "string" ? webhookUrlProblem(w.url) : null;
    if (problem)
      out.push(issue(ValidationCode.INVALID_CONFIGURE, [...at, k, "url"], `url ${problem}`));
  });
  return out;
}

/** Cron triggers one flow may have (docs/scheduler.md). */
export const MAX_CRON_TRIGGERS = 100;

/** `configure.triggers`: the shape of each, and of each cron trigger its name, expression, zone and parameter. */
function triggerIssues(
  triggers: unknown,
  inputSchemas: readonly unknown[],
  at: JsonPath,
): ValidationResult[] {
  if (!Array.isArray(triggers))
    return [issue(ValidationCode.INVALID_CONFIGURE, at, "triggers must be an array")];
  // Checked before any trigger: each costs a croner parse and a zone lookup here, and a schedule
  // on every node after the deploy (docs/scheduler.md, "Apps share the scheduler").
  const crons = triggers.filter(isCronTrigger).length;
  if (crons > MAX_CRON_TRIGGERS)
    return [
      issue(
        ValidationCode.INVALID_CONFIGURE,
        at,
        `a flow has at most ${MAX_CRON_TRIGGERS} cron triggers; got ${crons}`,
      ),
    ];
  const out: ValidationResult[] = [];
  const names = new Set<string>();
  triggers.forEach((t: unknown, k) => {
    const path: JsonPath = [...at, k];
    const shape = variantIssues(TRIGGER_VARIANTS, t, path);
    out.push(...shape);
    if (shape.length > 0 || !isRecord(t) || t.type !== "cron") return;
    const name = t.name as string;
    if (names.has(name)) {
      out.push(
        issue(
          ValidationCode.DUPLICATE_TRIGGER_NAME,
          [...path, "name"],
          `duplicate trigger name "${name}"`,
        ),
      );
    }
    names.add(name);
    out.push(...cronIssues(t, path, inputSchemas));
  });
  return out;
}

/** One well-shaped cron trigger: its expression, time zone and the parameter it will send. */
function cronIssues(
  t: Record<string, unknown>,
  path: JsonPath,
  inputSchemas: readonly unknown[],
): ValidationResult[] {
  const out: ValidationResult[] = [];
  const cron = cronError(t.crontab as string);
  if (cron) out.push(issue(ValidationCode.INVALID_CRON, [...path, "crontab"], cron));
  if (typeof t.timezone === "string" && !isValidTimeZone(t.timezone)) {
    out.push(
      issue(
        ValidationCode.INVALID_TIMEZONE,
        [...path, "timezone"],
        `unknown IANA time zone "${t.timezone}"`,
      ),
    );
  }
  // normalizeConfigure gives an absent parameter `{}`; check what will actually be sent.
  const parameter = t.parameter ?? {};
  for (const schema of inputSchemas) {
    const problems = validateJsonSchema(schema, parameter);
    if (problems.length > 0) {
      out.push(
        issue(
          ValidationCode.TRIGGER_PARAMETER_MISMATCH,
          [...path, "parameter"],
          `parameter does not match the input schema: ${describeIssues(problems)}`,
        ),
      );
      break;
    }
  }
  return out;
}

/** `configure.errorHandlers`: its shape, and that a custom handler's element exists. */
async function errorHandlerIssues(
  errorHandlers: unknown,
  ctx: ValidationContext,
  at: JsonPath,
): Promise<ValidationResult[]> {
  const shape = schemaIssues(ErrorHandlers, errorHandlers).map((i) =>
    issue(ValidationCode.INVALID_CONFIGURE, [...at, ...i.path], i.message),
  );
  const custom = isRecord(errorHandlers) ? errorHandlers.custom : undefined;
  if (shape.length > 0 || !isRecord(custom)) return shape;
  return elementIssue(custom.element as FlowLocator, [...at, "custom", "element"], ctx);
}

/**
 * `configure.maxConcurrentRuns` (docs/run-limits.md): absent, or a positive integer that each run
 * can record (`runs.run_limit` is a 32-bit integer in PostgreSQL).
 */
const MAX_RUNS_LIMIT = 2 ** 31 - 1;

function maxRunsIssues(value: unknown, path: JsonPath): ValidationResult[] {
  if (value === undefined || value === null) return [];
  if (Number.isInteger(value) && (value as number) >= 1 && (value as number) <= MAX_RUNS_LIMIT)
    return [];
  const message = `maxConcurrentRuns must be a positive integer (at most ${MAX_RUNS_LIMIT})`;
  return [issue(ValidationCode.INVALID_CONFIGURE, path, message)];
}

/** `configure.retentionDays` (docs/retention.md): absent, or whole days, 0 meaning for good. */
function retentionIssues(value: unknown, path: JsonPath): ValidationResult[] {
  if (value === undefined || value === null) return [];
  if (
    typeof value === "number" &&
    Number.isSafeInteger(value) &&
    value >= 0 &&
    value <= MAX_RETENTION_DAYS
  )
    return [];
  const message = `retentionDays must be a whole number from 0 to ${MAX_RETENTION_DAYS}`;
  return [issue(ValidationCode.INVALID_CONFIGURE, path, message)];
}
