/**
 * JSON Schema checks of input nodes (run parameter, cron trigger parameters). TypeBox 1.x
 * validates plain JSON Schema (types, required, properties, items, enum, const, formats, $ref to
 * $defs, …), so it is used here; the check sits behind this one function so that another validator
 * (ajv) can be swapped in without touching callers.
 */
import type { TSchema } from "typebox";
import { Compile } from "typebox/compile";

export interface SchemaIssue {
  /** JSON pointer into the value, e.g. `/orders/0`. */
  instancePath: string;
  message: string;
}

type Validator = ReturnType<typeof Compile>;
// Keyed by the schema object: a deployed revision's schema is compiled once, not per run.
const compiled = new WeakMap<object, Validator>();

function validatorFor(schema: object): Validator {
  let v = compiled.get(schema);
  if (v === undefined) {
    v = Compile(schema as TSchema);
    compiled.set(schema, v);
  }
  return v;
}

/** Empty when `value` conforms to `schema` (a JSON Schema object or boolean). */
export function validateJsonSchema(schema: unknown, value: unknown): SchemaIssue[] {
  if (schema === true || schema === undefined) return [];
  if (schema === false) return [{ instancePath: "", message: "schema is false" }];
  if (typeof schema !== "object" || schema === null) {
    return [{ instancePath: "", message: "schema must be an object" }];
  }
  const v = validatorFor(schema);
  if (v.Check(value)) return [];
  return [...v.Errors(value)].map((e) => ({ instancePath: e.instancePath, message: e.message }));
}

/** One line naming each issue, for 400 messages and validation results. */
export function describeIssues(issues: readonly SchemaIssue[]): string {
  return issues.map((i) => `${i.instancePath || "/"} ${i.message}`).join("; ");
}

/**
 * The run-request check (docs/flow-graph.md): the parameter against every input node's `config.schema`. Empty
 * when it conforms; otherwise the caller answers 400 and creates no run.
 */
export function runParameterIssues(
  graph: { vertexes: readonly { type: string; config?: unknown }[] },
  parameter: unknown,
): SchemaIssue[] {
  for (const v of graph.vertexes) {
    if (v.type !== "input" || typeof v.config !== "object" || v.config === null) continue;
    const issues = validateJsonSchema((v.config as { schema?: unknown }).schema, parameter);
    if (issues.length > 0) return issues;
  }
  return [];
}
