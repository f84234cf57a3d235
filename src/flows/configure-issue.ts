/** What the checks of `configure` share: a finding's form, and a `{type, …}` variant's shape. */
import type { TSchema } from "typebox";
import { type JsonPath, schemaIssues } from "./schema-issues.ts";
import {
  Severity,
  ValidationCode,
  type ValidationCodeValue,
  type ValidationResult,
} from "./validation-codes.ts";

export const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

export function issue(
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

/** Schema issues of a `{type, …}` variant chosen by its `type`. */
export function variantIssues(
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
