/**
 * What a flow run asks of its expressions, as jobs: one node's whole transform chain, one node's
 * edge conditions, one template. A job is the unit the expression processes run and time
 * (expr-pool.ts): one message each way per node, whatever the number of expressions in it.
 */
import { errorText } from "../errors.ts";
import type { Scope } from "../store/model.ts";
import { createEvaluator, type Evaluator, type Guardrails, located, truthy } from "./expr.ts";
import { applyOperators } from "./operators/index.ts";

/** How the executor and the node types evaluate a flow's expressions (docs/flow-graph.md). */
export interface FlowExpressions {
  /** A transform node's operators, in order, over its input. */
  transform(
    operators: readonly Record<string, unknown>[],
    input: unknown,
    params: unknown,
  ): Promise<unknown>;
  /**
   * Whether each edge condition holds for a node's output (JSONata boolean rules); `edges` names
   * each condition's edge in a failure (`edge a->b, when: …`).
   */
  conditions(
    texts: readonly string[],
    value: unknown,
    params: unknown,
    edges?: readonly string[],
  ): Promise<boolean[]>;
  /** One `{{expr}}` template string; `at` names it in a failure (`url: …`). */
  template(text: string, input: unknown, params: unknown, at?: string): Promise<unknown>;
  /** Every string inside a JSON-like value, rendered as a template; `at` as for `deep` of expr.ts. */
  deep(value: unknown, input: unknown, params: unknown, at?: string): Promise<unknown>;
}

/**
 * A run's expressions, evaluated as its tenant's (its app and space): the expression processes
 * take turns between tenants (src/turns.ts), so one tenant's slow expressions hold back no one
 * else's for long.
 */
export type ExpressionsFor = (scope: Scope) => FlowExpressions;

export type Job =
  | {
      kind: "transform";
      operators: readonly Record<string, unknown>[];
      input: unknown;
      params: unknown;
    }
  | {
      kind: "conditions";
      texts: readonly string[];
      value: unknown;
      params: unknown;
      edges?: readonly string[] | undefined;
    }
  | { kind: "template"; text: string; input: unknown; params: unknown; at?: string | undefined }
  | { kind: "deep"; value: unknown; input: unknown; params: unknown; at?: string | undefined };

export async function runJob(ev: Evaluator, job: Job): Promise<unknown> {
  switch (job.kind) {
    case "transform":
      return applyOperators(job.operators, job.input, {
        evaluate: (text, input) => ev.evaluate(text, input, job.params),
      });
    case "conditions": {
      const out: boolean[] = [];
      for (const [k, text] of job.texts.entries()) {
        try {
          out.push(truthy(await ev.evaluate(text, job.value, job.params)));
        } catch (err) {
          const edge = job.edges?.[k];
          throw edge === undefined ? err : located(err, `edge ${edge}, when`);
        }
      }
      return out;
    }
    case "template":
      try {
        return await ev.template(job.text, job.input, job.params);
      } catch (err) {
        throw job.at === undefined ? err : located(err, job.at);
      }
    case "deep":
      return ev.deep(job.value, job.input, job.params, job.at);
  }
}

/** The FlowExpressions interface over any way of running a job. */
export function expressionsOver(run: (job: Job) => Promise<unknown>): FlowExpressions {
  return {
    transform: (operators, input, params) => run({ kind: "transform", operators, input, params }),
    conditions: (texts, value, params, edges) =>
      run({ kind: "conditions", texts, value, params, edges }) as Promise<boolean[]>,
    template: (text, input, params, at) => run({ kind: "template", text, input, params, at }),
    deep: (value, input, params, at) => run({ kind: "deep", value, input, params, at }),
  };
}

/**
 * Expressions evaluated on the calling thread, with JSONata's guardrails only (runJob, as the
 * expression processes run it): what unit tests of the executor use. The service never
 * wires it: a native step (a sort, a regular expression) cannot be stopped on the thread that
 * serves requests, nor an allocation without end.
 */
export function inlineExpressions(
  g: Guardrails = { timeoutMs: 5000, depth: 500 },
): FlowExpressions {
  const ev = createEvaluator(g);
  return expressionsOver(async (job) => {
    try {
      return await runJob(ev, job);
    } catch (err) {
      throw new Error(errorText(err));
    }
  });
}
