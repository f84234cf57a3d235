/**
 * `merge`: combines the taken inputs. `object` (default): keyed by source vertex id; `concat`:
 * arrays joined in edge order (a non-array input counts as one element); `join`: records of `left`
 * joined with records of `right` on field `on`, `inner` (default) or `left`; matched pairs are
 * merged `{...left, ...right}`, one output per match. A skipped side counts as no records.
 */
import { Type } from "typebox";
import { sizeOf, tooLarge } from "../expr-size.ts";
import { GraphName } from "../graph.ts";
import { asRecords, getField, isRow } from "../operators/types.ts";
import type { NodeDef } from "./types.ts";

export const mergeNode: NodeDef = {
  type: "merge",
  configSchema: Type.Object({
    mode: Type.Optional(
      Type.Union([Type.Literal("object"), Type.Literal("concat"), Type.Literal("join")]),
    ),
    // Node IDs: names of the graph (docs/flow-graph.md, "Names and IDs").
    left: Type.Optional(GraphName(1)),
    right: Type.Optional(GraphName(1)),
    on: Type.Optional(Type.String({ minLength: 1 })),
    kind: Type.Optional(Type.Union([Type.Literal("inner"), Type.Literal("left")])),
  }),
  check(config, { sources }) {
    if (config.mode !== "join") return [];
    const issues = [];
    for (const side of ["left", "right"] as const) {
      const id = config[side];
      if (typeof id !== "string") issues.push({ path: [side], message: `join needs "${side}"` });
      else if (!sources.includes(id)) {
        issues.push({ path: [side], message: `"${id}" is not a source of an edge into this node` });
      }
    }
    if (typeof config.on !== "string") issues.push({ path: ["on"], message: `join needs "on"` });
    return issues;
  },
  async run(ctx) {
    const { config, inputs } = ctx;
    const mode = (config.mode as string | undefined) ?? "object";
    if (mode === "concat") return inputs.flatMap((i) => asRecords(i.value));
    if (mode === "object") return Object.fromEntries(inputs.map((i) => [i.source, i.value]));
    const side = (id: unknown) => asRecords(inputs.find((i) => i.source === id)?.value);
    const on = config.on as string;
    const index = new Map<string, unknown[]>();
    for (const r of side(config.right)) {
      const key = JSON.stringify(getField(r, on) ?? null);
      const list = index.get(key) ?? [];
      list.push(r);
      index.set(key, list);
    }
    const out: unknown[] = [];
    // Every left record may match every right one: the output is counted as it grows, so a join
    // past the value limit stops there instead of building it all (docs/flow-graph.md).
    const limit = ctx.deps.valueBytes;
    const sizes = new Map<unknown, number>();
    const size = (r: unknown) => sizes.get(r) ?? sizes.set(r, sizeOf(r, limit)).get(r) ?? 0;
    let total = 0;
    const add = (record: unknown, ...parts: unknown[]) => {
      for (const p of parts) total += size(p);
      if (total > limit) throw tooLarge("the join's output is", limit);
      out.push(record);
    };
    for (const l of side(config.left)) {
      const value = getField(l, on);
      const matches =
        value === undefined || value === null ? [] : (index.get(JSON.stringify(value)) ?? []);
      for (const r of matches) add({ ...(isRow(l) ? l : {}), ...(isRow(r) ? r : {}) }, l, r);
      if (matches.length === 0 && config.kind === "left") add(l, l);
    }
    return out;
  },
};
