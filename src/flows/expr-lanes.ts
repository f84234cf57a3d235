/**
 * Where each job of a run's expressions is evaluated (docs/security.md, "Flow expressions"): on
 * the service's thread when every expression in it is bounded (expr-bounded.ts) — a mapping, a
 * filter, arithmetic, as most flows are — stopped by JSONata itself after a short limit; in the
 * expression processes otherwise, or when the short limit was reached (then that expression goes
 * there from then on). Both give the same answer: only where the time is spent differs.
 */
import { LRUCache } from "lru-cache";
import { errorText } from "../errors.ts";
import type { Scope } from "../store/model.ts";
import { createEvaluator, type Evaluator, evaluatorOver, templateExpressions } from "./expr.ts";
import { isBounded } from "./expr-bounded.ts";
import { type ExpressionsFor, expressionsOver, type Job, runJob } from "./expr-jobs.ts";
import { jsonWithin } from "./expr-size.ts";
import { transformNode } from "./nodes/transform.ts";

/**
 * Operators that may run here: each evaluates an expression per record (where the job's deadline
 * is checked) or only slices. The others loop over the records with no check in between, at a
 * cost past the input's size: a flatten copies each record once per item of its array (9 s for
 * 35 kB), a sort or distinct writes records out as JSON for every comparison.
 */
const CHECKED_OPERATORS = new Set(["filter", "map", "expr", "limit"]);

function checkedOperators(job: Job): boolean {
  if (job.kind !== "transform") return true;
  return job.operators.every(
    (op) =>
      CHECKED_OPERATORS.has(String(op.type)) &&
      // A map without fields copies every record without evaluating anything.
      (op.type !== "map" || Object.keys((op.fields ?? {}) as object).length > 0),
  );
}

/** The data a job reads. */
function dataOf(job: Job): unknown[] {
  switch (job.kind) {
    case "transform":
    case "template":
    case "deep":
      return [job.input, job.params];
    case "conditions":
      return [job.value, job.params];
  }
}

// A revision's operator lists are the same objects run after run: their texts are found once.
const operatorTexts = new WeakMap<object, string[]>();
/** Whether every expression text of a list is bounded, found once per list (texts are fixed). */
const boundedLists = new WeakMap<readonly string[], boolean>();

/** What one job evaluates: the texts of its expressions. */
function textsOf(job: Job): string[] {
  switch (job.kind) {
    case "transform": {
      let texts = operatorTexts.get(job.operators);
      if (texts === undefined) {
        // The validator's own list of a transform's expressions (nodes/transform.ts).
        texts = (transformNode.expressions?.({ operators: job.operators }) ?? []).map(
          (e) => e.text,
        );
        operatorTexts.set(job.operators, texts);
      }
      return texts;
    }
    case "conditions":
      return job.texts as string[];
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

/** The job's evaluations share one limit: JSONata's own is per evaluation, and a job has many. */
function withDeadline(ev: Evaluator, ms: number): Evaluator {
  const deadline = Date.now() + ms;
  return evaluatorOver((text, input, params) => {
    if (Date.now() > deadline)
      throw Object.assign(new Error(`expressions ran longer than ${ms} ms here`), {
        code: "D1012",
      });
    return ev.evaluate(text, input, params);
  });
}

export function createExpressionLanes(o: {
  /** The expression processes, for everything else. */
  pool: { run(job: Job, tenant: Scope): Promise<unknown> };
  /** The service thread's limit per job (FLOW_EXPR_INLINE_MS); 0: every job to the pool. */
  inlineMs: number;
  /** The largest data a job here reads or answers, about as JSON (LIMIT_RESULT_BYTES). */
  sizeBudget: number;
}): ExpressionsFor {
  if (o.inlineMs <= 0) return (scope) => expressionsOver((job) => o.pool.run(job, scope));
  const ev = createEvaluator({ timeoutMs: o.inlineMs, depth: 200 });
  const small = jsonWithin(o.sizeBudget);
  // Expressions that reached the short limit once: the data they see is large, or they are slow.
  const slow = new LRUCache<string, true>({ max: 10_000 });
  const lane = async (job: Job, tenant: Scope): Promise<unknown> => {
    const pooled = () => o.pool.run(job, tenant);
    const texts = textsOf(job);
    let bounded = boundedLists.get(texts);
    if (bounded === undefined) {
      bounded = texts.every(isBounded);
      if (job.kind === "transform") boundedLists.set(texts, bounded);
    }
    if (!bounded || texts.some((t) => slow.has(t))) return pooled();
    if (!checkedOperators(job) || !dataOf(job).every(small)) return pooled();
    let value: unknown;
    try {
      value = await runJob(withDeadline(ev, o.inlineMs), job);
    } catch (err) {
      if (!stopped(err)) throw new Error(errorText(err));
      for (const t of texts) slow.set(t, true);
      return pooled();
    }
    // A value that repeats a part: the processes write it out and measure it, not the service.
    if (!small(value)) return pooled();
    // As JSON, as it comes back from a process: JSONata's sequence markers do not survive the
    // node in either lane, so where a job ran never changes what the next node sees.
    return value === undefined ? undefined : JSON.parse(JSON.stringify(value));
  };
  return (scope) => expressionsOver((job) => lane(job, scope));
}
