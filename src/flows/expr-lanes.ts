/**
 * Where each job of a run's expressions is evaluated (docs/security.md, "Flow expressions"): on
 * the service's thread when every expression in it is bounded (expr-bounded.ts) — a mapping, a
 * filter, arithmetic, as most flows are — stopped by JSONata itself after a short limit; in the
 * expression processes otherwise, or when the short limit was reached (then that expression goes
 * there from then on). Both give the same answer: only where the time is spent differs.
 */
import { LRUCache } from "lru-cache";
import { errorText } from "../errors.ts";
import { createEvaluator, templateExpressions } from "./expr.ts";
import { isBounded } from "./expr-bounded.ts";
import { expressionsOver, type FlowExpressions, type Job, runJob } from "./expr-jobs.ts";
import { operatorDef } from "./operators/index.ts";

// A revision's operator lists are the same objects run after run: their texts are found once.
const operatorTexts = new WeakMap<object, string[]>();

/** What one job evaluates: the texts of its expressions. */
function textsOf(job: Job): string[] {
  switch (job.kind) {
    case "transform": {
      let texts = operatorTexts.get(job.operators);
      if (texts === undefined) {
        texts = job.operators.flatMap(
          (op) =>
            operatorDef(op.type)
              ?.expressions(op)
              .map((e) => e.text) ?? [],
        );
        operatorTexts.set(job.operators, texts);
      }
      return texts;
    }
    case "conditions":
      return [...job.texts];
    case "template":
      return templateExpressions(job.text);
    case "deep":
      return stringsIn(job.value).flatMap(templateExpressions);
  }
}

function stringsIn(value: unknown): string[] {
  if (typeof value === "string") return [value];
  if (Array.isArray(value)) return value.flatMap(stringsIn);
  if (typeof value === "object" && value !== null) return Object.values(value).flatMap(stringsIn);
  return [];
}

/** JSONata's own stops: its time limit (D1012) and its nesting limit (D1011). */
const stopped = (err: unknown) => {
  const code = (err as { code?: unknown } | null)?.code;
  return code === "D1012" || code === "D1011";
};

export function createExpressionLanes(o: {
  /** The expression processes, for everything else. */
  pool: { run(job: Job): Promise<unknown> };
  /** The service thread's limit per evaluation (FLOW_EXPR_INLINE_MS); 0: every job to the pool. */
  inlineMs: number;
}): FlowExpressions {
  if (o.inlineMs <= 0) return expressionsOver(o.pool.run);
  const ev = createEvaluator({ timeoutMs: o.inlineMs, depth: 200 });
  // Expressions that reached the short limit once: the data they see is large, or they are slow.
  const slow = new LRUCache<string, true>({ max: 10_000 });
  return expressionsOver(async (job) => {
    const texts = textsOf(job);
    if (!texts.every((t) => isBounded(t) && !slow.has(t))) return o.pool.run(job);
    try {
      return await runJob(ev, job);
    } catch (err) {
      if (!stopped(err)) throw new Error(errorText(err));
      for (const t of texts) slow.set(t, true);
      return o.pool.run(job);
    }
  });
}
