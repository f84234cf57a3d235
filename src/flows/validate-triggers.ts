/** Deploy-time checks of `configure.triggers` (docs/flow-graph.md, docs/scheduler.md). */
import { Cron } from "croner";
import { errorText } from "../errors.ts";
import { isRecord, issue, variantIssues } from "./configure-issue.ts";
import { isCronTrigger } from "./cron-triggers.ts";
import { TRIGGER_VARIANTS } from "./graph.ts";
import { describeIssues, validateJsonSchema } from "./json-schema.ts";
import type { JsonPath } from "./schema-issues.ts";
import { ValidationCode, type ValidationResult } from "./validation-codes.ts";

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

/** Cron triggers one flow may have (docs/scheduler.md). */
export const MAX_CRON_TRIGGERS = 100;

/** `configure.triggers`: the shape of each, and of each cron trigger its name, expression, zone and parameter. */
export function triggerIssues(
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
