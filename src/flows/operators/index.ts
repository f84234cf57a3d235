/** The operator registry and the chain evaluation of a transform node. */
import { located } from "../expr.ts";
import { aggregate } from "./aggregate.ts";
import { distinct } from "./distinct.ts";
import { expr } from "./expr.ts";
import { filter } from "./filter.ts";
import { flatten } from "./flatten.ts";
import { limit } from "./limit.ts";
import { map } from "./map.ts";
import { rename } from "./rename.ts";
import { select } from "./select.ts";
import { sort } from "./sort.ts";
import type { OperatorContext, OperatorDef } from "./types.ts";

export type { OperatorContext, OperatorDef } from "./types.ts";

export const OPERATORS: Readonly<Record<string, OperatorDef>> = Object.fromEntries(
  [filter, map, select, rename, sort, limit, distinct, aggregate, flatten, expr].map((d) => [
    d.type,
    d,
  ]),
);

export function operatorDef(type: unknown): OperatorDef | undefined {
  return typeof type === "string" && Object.hasOwn(OPERATORS, type) ? OPERATORS[type] : undefined;
}

/** Run the operators in order, each over the previous one's output. */
export async function applyOperators(
  operators: readonly Record<string, unknown>[],
  input: unknown,
  ctx: OperatorContext,
): Promise<unknown> {
  let value = input;
  for (const [i, op] of operators.entries()) {
    const def = operatorDef(op.type);
    if (!def) throw new Error(`unknown operator type: ${String(op.type)}`);
    // A failure names the operator and the field of the expression that failed (docs/flow-graph.md,
    // "Where a run failed"): `operator m1 (map), fields.up: …`.
    const name = `operator ${typeof op.id === "string" ? op.id : `#${i}`} (${def.type})`;
    const fields = new Map<string, string>();
    for (const e of def.expressions(op))
      if (!fields.has(e.text)) fields.set(e.text, e.path.join("."));
    try {
      value = await def.apply(op, value, {
        evaluate: async (text, record) => {
          try {
            return await ctx.evaluate(text, record);
          } catch (err) {
            const field = fields.get(text);
            throw located(err, field === undefined ? name : `${name}, ${field}`);
          }
        },
      });
    } catch (err) {
      throw located(err, name);
    }
  }
  return value;
}
