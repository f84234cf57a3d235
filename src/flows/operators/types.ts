/** What every transform operator provides: its config schema, its expressions, its evaluation. */
import type { TSchema } from "typebox";
import type { JsonPath } from "../schema-issues.ts";

export interface OperatorContext {
  /** Evaluates one expression over `input`, with the run parameter bound to `$params`. */
  evaluate(text: string, input: unknown): Promise<unknown>;
}

export interface OperatorDef {
  type: string;
  /** Shape of the operator object (with `type` and optional `id`). */
  schema: TSchema;
  /** JSONata texts inside a schema-valid operator, with their path relative to the operator. */
  expressions(op: Record<string, unknown>): { path: JsonPath; text: string }[];
  apply(op: Record<string, unknown>, input: unknown, ctx: OperatorContext): Promise<unknown>;
}

export type Row = Record<string, unknown>;

/** Collection operators treat one object (or any non-array) as a one-record collection. */
export function asRecords(input: unknown): unknown[] {
  if (Array.isArray(input)) return input;
  return input === undefined || input === null ? [] : [input];
}

export function isRow(value: unknown): value is Row {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Field access by name, with `a.b` reaching into nested objects. */
export function getField(record: unknown, field: string): unknown {
  if (isRow(record) && field in record) return record[field];
  let cur: unknown = record;
  for (const key of field.split(".")) {
    if (!isRow(cur)) return undefined;
    cur = cur[key];
  }
  return cur;
}

/** Record-wise operators keep the input's shape: an array maps to an array, an object to an object. */
export async function perRecord(
  input: unknown,
  fn: (record: unknown) => Promise<unknown> | unknown,
): Promise<unknown> {
  if (!Array.isArray(input)) return fn(input);
  const out: unknown[] = new Array(input.length);
  for (let i = 0; i < input.length; i++) out[i] = await fn(input[i]);
  return out;
}
