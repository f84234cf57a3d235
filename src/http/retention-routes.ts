import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import type { Retention } from "../runs/retention.ts";
import { scopeOf } from "./context.ts";
import { Envelope, ok } from "./envelope.ts";

const PreviewItem = Type.Object({
  elementId: Type.String(),
  elementType: Type.Union([Type.Literal("DPL"), Type.Literal("PY")]),
  elementName: Type.String(),
  path: Type.String(),
  retentionDays: Type.Integer({ minimum: 1 }),
  rule: Type.Union(
    [Type.Literal("global"), Type.Literal("configure"), Type.Literal("declaration")],
    {
      description:
        "where the days come from: RUN_RETENTION_DAYS, the flow's configure.retentionDays, the script's # sluice-retention-days",
    },
  ),
  cutoff: Type.Integer({ description: "epoch ms: finished runs that ended before it go" }),
  runs: Type.Integer({
    description: "finished runs a purge now would delete, counted up to 10,000",
  }),
  more: Type.Boolean({ description: "true: more than `runs` would go (the count stopped)" }),
});

const Preview = Type.Object({
  retentionDays: Type.Integer({ description: "RUN_RETENTION_DAYS; 0: kept for good" }),
  total: Type.Integer(),
  elements: Type.Array(PreviewItem, {
    description: "every element of the scope whose runs are not kept for good",
  }),
});

/**
 * The dry run of run retention (docs/retention.md): what a purge now would delete in the
 * caller's scope, per element. Deletes nothing.
 */
export async function retentionRoutes(
  fastify: FastifyInstance,
  opts: { retention: Pick<Retention, "preview">; globalDays: number },
): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.get(
    "/retention/preview",
    { config: { access: "context" }, schema: { response: { 200: Envelope(Preview) } } },
    async (req) => {
      const items = await opts.retention.preview(scopeOf(req));
      return ok({
        retentionDays: opts.globalDays,
        total: items.reduce((n, i) => n + i.runs, 0),
        elements: items.map((i) => ({
          elementId: i.elementId,
          elementType: i.elementType,
          elementName: i.elementName,
          path: i.path,
          retentionDays: i.rule.days,
          rule: i.rule.source,
          cutoff: i.cutoff,
          runs: i.runs,
          more: i.more,
        })),
      });
    },
  );
}
