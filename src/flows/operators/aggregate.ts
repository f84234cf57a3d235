/**
 * `aggregate {groupBy, metrics: {name: {fn, field}}}`: one record per group (in order of first
 * appearance) holding the groupBy fields and one field per metric. Without groupBy the whole input
 * is one group. sum/avg/min/max ignore non-numeric values; avg/min/max of nothing is null, and
 * count without field counts records (with field: records where the field is present).
 */
import { Type } from "typebox";
import { GraphName } from "../graph.ts";
import { asRecords, getField, type OperatorDef, type Row } from "./types.ts";

const Fn = Type.Union([
  Type.Literal("count"),
  Type.Literal("sum"),
  Type.Literal("avg"),
  Type.Literal("min"),
  Type.Literal("max"),
]);
type Metric = { fn: "count" | "sum" | "avg" | "min" | "max"; field?: string };

function compute(metric: Metric, records: unknown[]): number | null {
  const { fn, field } = metric;
  if (fn === "count") {
    if (field === undefined) return records.length;
    return records.filter((r) => getField(r, field) !== undefined && getField(r, field) !== null)
      .length;
  }
  const nums: number[] = [];
  for (const r of records) {
    const v = field === undefined ? undefined : getField(r, field);
    if (typeof v === "number" && Number.isFinite(v)) nums.push(v);
  }
  if (fn === "sum") return nums.reduce((a, b) => a + b, 0);
  if (nums.length === 0) return null;
  if (fn === "avg") return nums.reduce((a, b) => a + b, 0) / nums.length;
  return fn === "min" ? Math.min(...nums) : Math.max(...nums);
}

export const aggregate: OperatorDef = {
  type: "aggregate",
  schema: Type.Object({
    type: Type.Literal("aggregate"),
    id: Type.Optional(GraphName()),
    groupBy: Type.Optional(Type.Array(Type.String({ minLength: 1 }))),
    metrics: Type.Record(
      Type.String({ minLength: 1 }),
      Type.Object({ fn: Fn, field: Type.Optional(Type.String({ minLength: 1 })) }),
    ),
  }),
  expressions: () => [],
  async apply(op, input) {
    const groupBy = (op.groupBy as string[] | undefined) ?? [];
    const metrics = Object.entries(op.metrics as Record<string, Metric>);
    const groups = new Map<string, { keys: unknown[]; records: unknown[] }>();
    for (const record of asRecords(input)) {
      const keys = groupBy.map((f) => getField(record, f) ?? null);
      const id = JSON.stringify(keys);
      let group = groups.get(id);
      if (!group) {
        group = { keys, records: [] };
        groups.set(id, group);
      }
      group.records.push(record);
    }
    return [...groups.values()].map(({ keys, records }) => {
      const out: Row = {};
      groupBy.forEach((f, i) => {
        out[f] = keys[i];
      });
      for (const [name, metric] of metrics) out[name] = compute(metric, records);
      return out;
    });
  },
};
