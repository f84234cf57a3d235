import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import { createRevisionReads } from "../flows/revisions.ts";
import { createScriptVersionReads } from "../scripts/versions.ts";
import type { Store } from "../store/types.ts";
import { scopeOf } from "./context.ts";
import { Envelope, ok } from "./envelope.ts";
import {
  ReleasesPage,
  RevisionBody,
  RevisionDetail,
  RevisionDiff,
  RevisionDiffBody,
  RevisionsBody,
  RevisionsPage,
  ScriptVersionBody,
  ScriptVersionDetail,
  ScriptVersionsBody,
  ScriptVersionsPage,
} from "./revision-schemas.ts";

/**
 * Revision history, one revision, a diff of two, the release history (docs/dataflow-service.md,
 * "Revisions and releases"). Access as the other flow endpoints: app, space and user, scoped.
 */
export async function revisionRoutes(
  fastify: FastifyInstance,
  opts: { store: Store },
): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const reads = createRevisionReads(opts.store);
  const access = { access: "context" as const };

  app.post(
    "/flow/revisions",
    { config: access, schema: { body: RevisionsBody, response: { 200: Envelope(RevisionsPage) } } },
    async (req) => ok(await reads.list(scopeOf(req), req.body, req.body)),
  );

  app.post(
    "/flow/revision",
    { config: access, schema: { body: RevisionBody, response: { 200: Envelope(RevisionDetail) } } },
    async (req) => ok(await reads.read(scopeOf(req), req.body, req.body.version)),
  );

  app.post(
    "/flow/revision-diff",
    {
      config: access,
      schema: { body: RevisionDiffBody, response: { 200: Envelope(RevisionDiff) } },
    },
    async (req) =>
      ok(await reads.diff(scopeOf(req), req.body, req.body.fromVersion, req.body.toVersion)),
  );

  app.post(
    "/flow/releases",
    { config: access, schema: { body: RevisionsBody, response: { 200: Envelope(ReleasesPage) } } },
    async (req) => ok(await reads.releases(scopeOf(req), req.body, req.body)),
  );
}

/**
 * Script versions (docs/script-service.md, "Script versions"): internal endpoints, authenticated
 * like `/script/run` (docs/auth.md), scoped to the caller's app and space.
 */
export async function scriptVersionRoutes(
  fastify: FastifyInstance,
  opts: { store: Store },
): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const reads = createScriptVersionReads(opts.store);
  const access = { access: "internal" as const };

  app.post(
    "/script/element/versions",
    {
      config: access,
      schema: { body: ScriptVersionsBody, response: { 200: Envelope(ScriptVersionsPage) } },
    },
    async (req) => ok(await reads.list(scopeOf(req), req.body, req.body)),
  );

  app.post(
    "/script/element/version",
    {
      config: access,
      schema: { body: ScriptVersionBody, response: { 200: Envelope(ScriptVersionDetail) } },
    },
    async (req) => ok(await reads.read(scopeOf(req), req.body, req.body.version)),
  );
}
