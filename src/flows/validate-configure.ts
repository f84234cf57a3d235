/** Deploy-time checks of `configure` (docs/flow-graph.md). Findings use nodeId and nodeType `configure`. */
import type { Locator } from "../elements/locator.ts";
import { MAX_RETENTION_DAYS } from "../runs/retention-rules.ts";
import { webhookUrlProblem } from "../webhooks/targets.ts";
import { isRecord, issue, variantIssues } from "./configure-issue.ts";
import {
  ErrorHandlers,
  FILE_CLEANUP_VARIANTS,
  RUN_TIMEOUT_VARIANTS,
  WebhooksSchema,
} from "./graph.ts";
import { unknownPlaceholders } from "./run-name.ts";
import { type JsonPath, schemaIssues } from "./schema-issues.ts";
import { missingElement } from "./validate-nodes.ts";
import { triggerIssues } from "./validate-triggers.ts";
import {
  ValidationCode,
  type ValidationContext,
  type ValidationResult,
} from "./validation-codes.ts";

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
