import { Type } from "typebox";
import { dropDeclaredNulls, isRecord, type ShapeSchema } from "../schema/null-absent.ts";
import {
  CronTrigger,
  Edge,
  ErrorHandlers,
  FILE_CLEANUP_VARIANTS,
  isNodeType,
  LogContent,
  ManualTrigger,
  RUN_TIMEOUT_VARIANTS,
  Vertex,
  WebhooksSchema,
} from "./graph.ts";
import { NODES } from "./nodes/index.ts";
import { operatorDef } from "./operators/index.ts";

/** `configure` as far as its fields are declared: what a deploy's nulls are read against. */
const ConfigureShape = Type.Object({
  triggers: Type.Optional(Type.Array(Type.Union([ManualTrigger, CronTrigger]))),
  errorHandlers: Type.Optional(ErrorHandlers),
  prelude: Type.Optional(Type.String()),
  runNameTemplate: Type.Optional(Type.String()),
  runTimeout: Type.Optional(Type.Union(Object.values(RUN_TIMEOUT_VARIANTS))),
  logContent: Type.Optional(LogContent),
  fileCleanup: Type.Optional(Type.Union(Object.values(FILE_CLEANUP_VARIANTS))),
  webhooks: Type.Optional(WebhooksSchema),
});

const shape = (schema: unknown) => schema as ShapeSchema;

/**
 * A deployed graph and configure with every declared field holding `null` removed, before they
 * are validated and stored (docs/flow-graph.md, "configure"): a client that builds the
 * graph from classes (Jackson, System.Text.Json, dataclasses) writes every unset field as null.
 * Each vertex is read against its node type's config and each operator against its own schema;
 * free-form values (an input schema, an http body, a cron parameter's content) stay as sent.
 */
export function dropGraphNulls(flow: unknown, configure: unknown): void {
  if (isRecord(configure)) dropDeclaredNulls(configure, shape(ConfigureShape));
  if (!isRecord(flow)) return;
  if (flow.edges === null) delete flow.edges;
  if (Array.isArray(flow.edges)) for (const e of flow.edges) dropDeclaredNulls(e, shape(Edge));
  if (!Array.isArray(flow.vertexes)) return;
  for (const v of flow.vertexes) {
    dropDeclaredNulls(v, shape(Vertex));
    if (!isRecord(v) || !isNodeType(v.type) || !isRecord(v.config)) continue;
    dropDeclaredNulls(v.config, shape(NODES[v.type].configSchema));
    if (v.type !== "transform" || !Array.isArray(v.config.operators)) continue;
    for (const op of v.config.operators) {
      const def = isRecord(op) ? operatorDef(op.type) : undefined;
      if (def) dropDeclaredNulls(op, shape(def.schema));
    }
  }
}
