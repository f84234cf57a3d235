/** The contract between the executor and the node types, and the executor's injected effects. */
import type { TSchema } from "typebox";
import type { Locator } from "../../elements/locator.ts";
import type { Traceback } from "../../scripts/traceback.ts";
import type { SecretValues } from "../../secrets/substitute.ts";
import type { FlowExpressions } from "../expr-jobs.ts";
import type { NodeType, Vertex } from "../graph.ts";
import type { JsonPath } from "../schema-issues.ts";

export type ScriptResult =
  | { ok: true; value: unknown; stdout: string; stderr: string }
  | { ok: false; error: string; stdout: string; stderr: string; traceback?: Traceback };

export interface FlowDeps {
  runScript(req: {
    nodeId: string;
    element?: Locator;
    code?: string;
    parameter: unknown;
    timeoutMs?: number;
    /** The task's environment from the node's `env` (secrets resolved), besides its own. */
    env?: Record<string, string>;
    signal: AbortSignal;
  }): Promise<ScriptResult>;
  runSubflow(req: {
    nodeId: string;
    element: Locator;
    parameter: unknown;
    signal: AbortSignal;
  }): Promise<{ ok: true; value: unknown } | { ok: false; error: string }>;
  fetch: typeof fetch;
  /** Where the flow's expressions are evaluated: the expression processes (docs/security.md). */
  expressions: FlowExpressions;
  /**
   * Largest value a node reads or answers, about as JSON (LIMIT_RESULT_BYTES): an http node's
   * response body, any node's output; past it the node fails (docs/flow-graph.md).
   */
  valueBytes: number;
  /** The largest node input or output a run's log keeps (LIMIT_NODE_LOG_BYTES, node-log.ts). */
  logValueBytes: number;
  /**
   * Reserves bytes of a value the run holds in memory (src/runs/run-memory.ts), or throws the 429
   * naming LIMIT_RUN_BYTES_IN_FLIGHT[_PER_APP]; the function given back frees them early, and the
   * run's end frees what is left. Absent: no bound.
   */
  hold?: ((bytes: number) => () => void) | undefined;
  now(): number;
  /** `${secret.NAME}` values, resolved when a node executes (docs/secrets.md); absent: none. */
  secrets?: SecretValues | undefined;
}

export interface NodeContext {
  runId: string;
  vertex: Vertex;
  /** `vertex.config` (schema-valid, since the graph passed validation). */
  config: Record<string, unknown>;
  /** One taken input: its value; several incoming edges: an object keyed by source id. */
  input: unknown;
  /** Values of the taken incoming edges, in edge order (merge needs order and sources). */
  inputs: { source: string; value: unknown }[];
  params: unknown;
  prelude: string;
  signal: AbortSignal;
  deps: FlowDeps;
  /** Where a node puts its process output for the node log. */
  log: { stdout?: string; stderr?: string; traceback?: Traceback };
}

/** A validation finding inside one vertex's config, relative to `config`. */
export interface ConfigIssue {
  path: JsonPath;
  message: string;
  operatorId?: string;
  operatorType?: string;
}

/** A JSONata text inside a config: `expr` is one expression, `template` holds `{{…}}` parts. */
export interface ConfigExpression {
  path: JsonPath;
  text: string;
  kind: "expr" | "template";
  operatorId?: string;
  operatorType?: string;
}

export interface NodeDef {
  type: NodeType;
  configSchema: TSchema;
  /** Checks beyond the schema; only called on a schema-valid config. */
  check?(config: Record<string, unknown>, info: { sources: string[] }): ConfigIssue[];
  expressions?(config: Record<string, unknown>): ConfigExpression[];
  /**
   * Fields of a schema-valid config the node does not read (deploy warnings); absent: those
   * `configSchema` does not name (schema-issues.ts, `unreadFields`).
   */
  unread?(config: Record<string, unknown>): ConfigIssue[];
  run(ctx: NodeContext): Promise<unknown>;
}
