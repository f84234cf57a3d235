/** The operator registry and the chain evaluation of a transform node. */
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
  for (const op of operators) {
    const def = operatorDef(op.type);
    if (!def) throw new Error(`unknown operator type: ${String(op.type)}`);
    value = await def.apply(op, value, ctx);
  }
  return value;
}
