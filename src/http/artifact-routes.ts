import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import { nameProblem } from "../artifacts/names.ts";
import { badRequest, ErrorCode, SluiceError } from "../errors.ts";
import type { ArtifactStore } from "../store/kysely-artifacts.ts";
import type { ScopeFilter, Store } from "../store/types.ts";
import {
  ArtifactList,
  ArtifactListParams,
  ArtifactListQuery,
  ArtifactParams,
} from "./artifact-schemas.ts";
import type { DownloadBudget } from "./download-budget.ts";
import { Envelope, ok } from "./envelope.ts";
import type { TypedApp } from "./typed-app.ts";

interface ArtifactDeps {
  store: Store;
  artifacts: ArtifactStore;
  /** Bytes of downloads in flight per app and node (docs/artifacts.md, "Downloads"). */
  budget: DownloadBudget;
}

/** The files a run kept (docs/artifacts.md): listed and downloaded, scoped like the run. */
export async function artifactRoutes(fastify: FastifyInstance, opts: ArtifactDeps): Promise<void> {
  const app: TypedApp = fastify.withTypeProvider<TypeBoxTypeProvider>();
  registerList(app, opts);
  registerDownload(app, opts);
}

/** The run, if the caller's scope sees it: another scope's run is answered as not existing. */
async function runOf(store: Store, scope: ScopeFilter, runId: string): Promise<string> {
  const run = await store.getRun(scope, runId);
  if (!run) throw new SluiceError(ErrorCode.RUN_NOT_FOUND, [runId]);
  return run.id;
}

function registerList(app: TypedApp, { store, artifacts }: ArtifactDeps): void {
  app.get(
    "/run/:runId/artifacts",
    {
      config: { access: "contextEnv" },
      schema: {
        params: ArtifactListParams,
        querystring: ArtifactListQuery,
        response: { 200: Envelope(ArtifactList) },
      },
    },
    async (req) => {
      const runId = await runOf(store, req.ctx.scope, req.params.runId);
      const { files, set } = await artifacts.list(runId);
      const node = req.query.nodeId;
      return ok({
        runId,
        collected: set !== undefined,
        files: files
          .filter((f) => node === undefined || f.nodeId === node)
          .map((f) => ({
            name: f.name,
            nodeId: f.nodeId,
            size: f.size,
            contentType: f.contentType,
            sha256: f.sha256,
            createTime: f.createdAt,
          })),
        skipped: set?.skipped ?? [],
        skippedMore: set?.skippedMore ?? 0,
      });
    },
  );
}

function registerDownload(app: TypedApp, { store, artifacts, budget }: ArtifactDeps): void {
  app.get(
    "/run/:runId/artifacts/:name",
    { config: { access: "contextEnv" }, schema: { params: ArtifactParams } },
    async (req, reply) => {
      const { name } = req.params;
      const problem = nameProblem(name);
      if (problem) throw badRequest(`params.name ${problem}`);
      const runId = await runOf(store, req.ctx.scope, req.params.runId);
      const size = (await artifacts.info(runId, name))?.size;
      if (size === undefined) throw new SluiceError(ErrorCode.ARTIFACT_NOT_FOUND, [name]);
      // Its bytes are held until the client has read them (or went): reserved before the read.
      const free = budget.take(req.ctx.scope, size);
      reply.raw.once("close", free);
      // A client gone before the listener was there: its close was already heard by nobody.
      if (reply.raw.destroyed || req.raw.socket.destroyed) {
        free();
        throw new SluiceError(ErrorCode.ARTIFACT_NOT_FOUND, [name]);
      }
      let found: Awaited<ReturnType<ArtifactStore["get"]>>;
      try {
        found = await artifacts.get(runId, name);
      } catch (err) {
        free();
        throw err;
      }
      if (!found) {
        free();
        throw new SluiceError(ErrorCode.ARTIFACT_NOT_FOUND, [name]);
      }
      const { info, bytes } = found;
      // Always a download, never shown in the API's origin: an HTML or SVG file a script wrote
      // must not run as a page of the service.
      return reply
        .header("content-type", info.contentType)
        .header("content-length", String(bytes.length))
        .header("content-disposition", disposition(name))
        .header("x-content-type-options", "nosniff")
        .header("content-security-policy", "default-src 'none'; sandbox")
        .header("x-run-id", runId)
        .header("x-artifact-sha256", info.sha256)
        .send(bytes);
    },
  );
}

/** `attachment` with the base name, ASCII-safe, and the exact one in RFC 5987 form. */
function disposition(name: string): string {
  const base = name.slice(name.lastIndexOf("/") + 1);
  const ascii = base.replace(/[^\x20-\x7e]|["\\%]/g, "_");
  const exact = encodeURIComponent(base).replace(
    /['()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
  return `attachment; filename="${ascii}"; filename*=UTF-8''${exact}`;
}
