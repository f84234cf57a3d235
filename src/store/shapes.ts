import { type Compilable, CompiledQuery } from "kysely";

/**
 * Compiled statements kept per shape. Kysely builds and compiles a statement's whole tree on every
 * call: for the multi-row insert of run records, some thirty value nodes per row, walked and
 * frozen each time, a third of the CPU of a lone run write on SQLite (bench/README.md). The
 * hottest writes compile each shape once, with numbered placeholders for values, and bind each
 * call's values to the positions Kysely gave the placeholders, so the SQL stays Kysely's own.
 */

const SLOT = "\u0000sluice-slot:";

export interface Shape {
  readonly sql: string;
  /** For each parameter of `sql`, the index of its value (packed: an insert of 200 rows has 6,000). */
  readonly slots: Int32Array;
}

/**
 * Compiles `build`'s statement once; `slot(i)` stands for the i-th value of every later call (typed
 * as whatever the column takes: it is only ever compiled, never sent).
 */
export function shapeOf(build: (slot: (i: number) => never) => Compilable): Shape {
  const slot = ((i: number) => `${SLOT}${i}`) as (i: number) => never;
  const { sql, parameters } = build(slot).compile();
  const slots = Int32Array.from(parameters, (p) => {
    if (typeof p !== "string" || !p.startsWith(SLOT))
      throw new Error(`a shape's parameter is not one of its slots: ${String(p)}`);
    return Number(p.slice(SLOT.length));
  });
  return { sql, slots };
}

/** The shape's statement with these values. */
export function bound(shape: Shape, values: readonly unknown[]): CompiledQuery {
  return CompiledQuery.raw(
    shape.sql,
    Array.from(shape.slots, (i) => values[i]),
  );
}

/**
 * Shapes by key (a batch size, say), made on first use. `max` bounds how many are kept: past it
 * the cache starts again, which only costs compiling again.
 */
export function shapeCache<K>(max: number, make: (key: K) => Shape): (key: K) => Shape {
  const shapes = new Map<K, Shape>();
  return (key) => {
    let s = shapes.get(key);
    if (!s) {
      if (shapes.size >= max) shapes.clear();
      s = make(key);
      shapes.set(key, s);
    }
    return s;
  };
}
