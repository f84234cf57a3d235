/**
 * The flow graph and `configure` of docs/flow-graph.md–7 as TypeBox schemas. The schemas are the single
 * source of truth for shapes: the validator checks requests against them, the executor relies on
 * the types they induce.
 */
import { type Static, Type } from "typebox";
import { WEBHOOK_ON, type WebhookTarget } from "../webhooks/types.ts";

/**
 * How a flow names an element (a node's script or sub-flow, a custom error handler): the shape of a
 * Locator (src/elements/locator.ts, docs/dataflow-service.md) as a flow must write it.
 */
export const LocatorSchema = Type.Object({
  elementName: Type.String({ minLength: 1 }),
  elementType: Type.Optional(Type.Union([Type.Literal("PY"), Type.Literal("DPL")])),
  folderId: Type.Optional(Type.String()),
  path: Type.Optional(Type.String()),
  elementId: Type.Optional(Type.Union([Type.String(), Type.Integer()])),
});

/**
 * The longest name inside a flow (docs/flow-graph.md, "Names and IDs"): node IDs, names and types,
 * edge IDs and ends, operator IDs and types, trigger names. Each is repeated in every finding,
 * progress event, node log and error that names it; a longer one is a deploy finding at its path.
 */
export const MAX_NAME_LENGTH = 200;

/** A name of the graph: a string of at most MAX_NAME_LENGTH characters. */
export const GraphName = (min = 0) =>
  Type.String({ ...(min > 0 ? { minLength: min } : {}), maxLength: MAX_NAME_LENGTH });

/**
 * `value` when it is a name short enough to repeat in a finding; otherwise undefined. Counted in
 * code points, as the schema's `maxLength` counts: a name the deploy accepts is always repeated.
 */
export const shortName = (value: unknown): string | undefined =>
  typeof value === "string" &&
  (value.length <= MAX_NAME_LENGTH ||
    (value.length <= 2 * MAX_NAME_LENGTH && [...value].length <= MAX_NAME_LENGTH))
    ? value
    : undefined;

export const NODE_TYPES = [
  "input",
  "transform",
  "script",
  "http",
  "subflow",
  "merge",
  "output",
] as const;
export type NodeType = (typeof NODE_TYPES)[number];

export function isNodeType(value: unknown): value is NodeType {
  return typeof value === "string" && (NODE_TYPES as readonly string[]).includes(value);
}

/** Extra keys are allowed on vertexes and edges: editors keep layout data there. */
export const Vertex = Type.Object({
  id: GraphName(1),
  type: GraphName(1),
  name: Type.Optional(GraphName()),
  config: Type.Optional(Type.Unknown()),
  retries: Type.Optional(Type.Integer({ minimum: 0, maximum: 100 })),
  retryDelayMs: Type.Optional(Type.Integer({ minimum: 0 })),
  // The longest a timer waits (2^31 − 1 ms): docs/flow-graph.md, "Scheduling".
  timeoutSeconds: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: 2_147_483 })),
  continueOnError: Type.Optional(Type.Boolean()),
});
export type Vertex = Static<typeof Vertex>;

export const Edge = Type.Object({
  id: Type.Optional(GraphName()),
  source: GraphName(1),
  target: GraphName(1),
  when: Type.Optional(Type.String()),
});
export type Edge = Static<typeof Edge>;

export const Graph = Type.Object({
  vertexes: Type.Array(Vertex),
  edges: Type.Optional(Type.Array(Edge)),
});
export type Graph = Static<typeof Graph>;

// ---- configure (docs/flow-graph.md) ----

export const ManualTrigger = Type.Object({
  type: Type.Literal("manual"),
  name: Type.Optional(GraphName()),
});
export const CronTrigger = Type.Object({
  type: Type.Literal("cron"),
  name: GraphName(1),
  crontab: Type.String({ minLength: 1 }),
  timezone: Type.Optional(Type.String({ minLength: 1 })),
  parameter: Type.Optional(Type.Unknown()),
});
export type ManualTrigger = Static<typeof ManualTrigger>;
export type CronTrigger = Static<typeof CronTrigger>;
export type Trigger = ManualTrigger | CronTrigger;

export const EmailHandler = Type.Object({
  to: Type.Array(Type.String({ minLength: 3 }), { minItems: 1 }),
  subject: Type.Optional(Type.String()),
});
export const BotHandler = Type.Object({
  webhookUrl: Type.String({ pattern: "^https?://" }),
  kind: Type.Optional(
    Type.Union([
      Type.Literal("generic"),
      Type.Literal("slack"),
      Type.Literal("dingtalk"),
      Type.Literal("feishu"),
    ]),
  ),
});
export const CustomHandler = Type.Object({ element: LocatorSchema });
export const ErrorHandlers = Type.Object({
  email: Type.Optional(EmailHandler),
  bot: Type.Optional(BotHandler),
  custom: Type.Optional(CustomHandler),
});
export type ErrorHandlers = Static<typeof ErrorHandlers>;

/** `configure.webhooks`: URLs called when a run ends (docs/webhooks.md); `on` absent is ANY. */
export const WebhookSchema = Type.Object({
  url: Type.String({ minLength: 1 }),
  on: Type.Optional(
    Type.Array(Type.Union(WEBHOOK_ON.map((v) => Type.Literal(v))), { minItems: 1 }),
  ),
});
export const WebhooksSchema = Type.Array(WebhookSchema, { maxItems: 20 });

export const RunTimeout = Type.Union([
  Type.Object({ type: Type.Literal("system") }),
  Type.Object({ type: Type.Literal("customized"), seconds: Type.Number({ exclusiveMinimum: 0 }) }),
  Type.Object({ type: Type.Literal("sentinel"), seconds: Type.Number({ exclusiveMinimum: 0 }) }),
]);
export type RunTimeout = Static<typeof RunTimeout>;

export const LogContent = Type.Union([Type.Literal("DETAILED"), Type.Literal("CONCISE")]);
export type LogContent = Static<typeof LogContent>;

export const FileCleanup = Type.Union([
  Type.Object({ type: Type.Literal("default") }),
  Type.Object({ type: Type.Literal("keep") }),
  Type.Object({ type: Type.Literal("afterRun") }),
  Type.Object({ type: Type.Literal("days"), days: Type.Integer({ minimum: 1 }) }),
]);
export type FileCleanup = Static<typeof FileCleanup>;

/**
 * Variant schemas by discriminator. The validator picks the variant by `type` itself, so that an
 * error names the field that is wrong instead of a wall of anyOf failures.
 */
export const TRIGGER_VARIANTS = { manual: ManualTrigger, cron: CronTrigger } as const;
export const RUN_TIMEOUT_VARIANTS = {
  system: Type.Object({ type: Type.Literal("system") }),
  customized: Type.Object({
    type: Type.Literal("customized"),
    seconds: Type.Number({ exclusiveMinimum: 0 }),
  }),
  sentinel: Type.Object({
    type: Type.Literal("sentinel"),
    seconds: Type.Number({ exclusiveMinimum: 0 }),
  }),
} as const;
export const FILE_CLEANUP_VARIANTS = {
  default: Type.Object({ type: Type.Literal("default") }),
  keep: Type.Object({ type: Type.Literal("keep") }),
  afterRun: Type.Object({ type: Type.Literal("afterRun") }),
  days: Type.Object({ type: Type.Literal("days"), days: Type.Integer({ minimum: 1 }) }),
} as const;

// biome-ignore lint/suspicious/noTemplateCurlyInString: run-name placeholders, not a JS template
export const DEFAULT_RUN_NAME_TEMPLATE = "${elementName}-${date:yyyyMMddHHmmss}";

/** `configure` after defaults: every field present. */
export interface Configure {
  triggers: Trigger[];
  errorHandlers: ErrorHandlers;
  prelude: string;
  runNameTemplate: string;
  runTimeout: RunTimeout;
  logContent: LogContent;
  fileCleanup: FileCleanup;
  /** Runs of this flow executing at once, across the cluster; absent: no limit (docs/run-limits.md). */
  maxConcurrentRuns?: number | undefined;
  /** Days its finished runs are kept; 0: for good; absent: RUN_RETENTION_DAYS (docs/retention.md). */
  retentionDays?: number | undefined;
  /** Completion webhooks (docs/webhooks.md); `on` filled in (ANY when absent). */
  webhooks: WebhookTarget[];
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * Apply the documented defaults (docs/flow-graph.md) to a `configure` that passed validation. Missing or null fields get their
 * default; bot `kind` defaults to generic, cron `timezone` to UTC, so callers never re-derive them.
 */
export function normalizeConfigure(raw: unknown): Configure {
  const c = isRecord(raw) ? raw : {};
  const triggers = Array.isArray(c.triggers)
    ? (c.triggers as Trigger[]).map((t) =>
        t.type === "cron"
          ? { ...t, timezone: t.timezone ?? "UTC", parameter: t.parameter ?? {} }
          : t,
      )
    : [{ type: "manual" as const }];
  const handlers = isRecord(c.errorHandlers) ? (c.errorHandlers as ErrorHandlers) : {};
  const errorHandlers: ErrorHandlers = handlers.bot
    ? { ...handlers, bot: { ...handlers.bot, kind: handlers.bot.kind ?? "generic" } }
    : handlers;
  return {
    triggers,
    errorHandlers,
    prelude: typeof c.prelude === "string" ? c.prelude : "",
    runNameTemplate:
      typeof c.runNameTemplate === "string" && c.runNameTemplate !== ""
        ? c.runNameTemplate
        : DEFAULT_RUN_NAME_TEMPLATE,
    runTimeout: isRecord(c.runTimeout) ? (c.runTimeout as RunTimeout) : { type: "system" },
    logContent: c.logContent === "CONCISE" ? "CONCISE" : "DETAILED",
    fileCleanup: isRecord(c.fileCleanup) ? (c.fileCleanup as FileCleanup) : { type: "default" },
    ...(typeof c.maxConcurrentRuns === "number" ? { maxConcurrentRuns: c.maxConcurrentRuns } : {}),
    ...(typeof c.retentionDays === "number" ? { retentionDays: c.retentionDays } : {}),
    webhooks: Array.isArray(c.webhooks)
      ? (c.webhooks as Static<typeof WebhooksSchema>).map((w) => ({
          url: w.url,
          on: w.on ?? ["ANY"],
        }))
      : [],
  };
}

/** Inline code with the flow's prelude in front; `lineOffset` maps combined lines back to the user's. */
export function joinPrelude(prelude: string, code: string): { code: string; lineOffset: number } {
  if (prelude === "") return { code, lineOffset: 0 };
  const head = prelude.endsWith("\n") ? prelude : `${prelude}\n`;
  return { code: head + code, lineOffset: head.split("\n").length - 1 };
}
