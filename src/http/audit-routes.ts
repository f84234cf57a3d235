import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import type { AuditTrail } from "../audit/audit-trail.ts";
import { pageWindow, totalPages } from "../monitor/paging.ts";
import { AuditPageSchema, AuditQuery } from "./audit-schemas.ts";
import { Envelope, ok } from "./envelope.ts";

/**
 * GET /audit (docs/audit.md): the caller's scope's entries, newest first, filtered and paged.
 * Read-only by design: no route updates or deletes an entry.
 */
export async function auditRoutes(
  fastify: FastifyInstance,
  opts: { audit: Pick<AuditTrail, "list"> },
): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.get(
    "/audit",
    {
      // Scoped like the run lookups: required in signature mode; in off mode without app and
      // space every scope's entries (docs/auth.md).
      config: { access: "contextEnv" },
      schema: { querystring: AuditQuery, response: { 200: Envelope(AuditPageSchema) } },
    },
    async (req) => {
      const q = req.query;
      const page = await opts.audit.list(
        req.ctx.scope,
        { from: q.from, to: q.to, user: q.user, action: q.action, outcome: q.outcome },
        pageWindow(q.pageNo, q.pageSize),
      );
      return ok({ ...page, totalPage: totalPages(page.totalCount, q.pageSize) });
    },
  );
}
