import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import { exportBundle } from "../bundles/export.ts";
import { Bundle, ExportBody, ImportBody, ImportReport } from "../bundles/format.ts";
import { importBundle, type RevisionCheck, type ScriptCheck } from "../bundles/import.ts";
import type { Clock } from "../clock.ts";
import type { Config } from "../config.ts";
import { appBounds } from "../config-limits.ts";
import type { FlowLifecycle } from "../flows/lifecycle.ts";
import { Severity } from "../flows/validation-codes.ts";
import { validationContext } from "../flows/validation-context.ts";
import { validateFlow } from "../flows/validator.ts";
import { checkScriptBytes } from "../scripts/importer.ts";
import type { SyntaxChecker } from "../scripts/syntax-check.ts";
import type { Scope, Store } from "../store/types.ts";
import type { StoredQuota } from "../stored-quota.ts";
import { scopeOf } from "./context.ts";
import { Envelope, ok } from "./envelope.ts";

interface BundleOptions {
  store: Store;
  clock: Clock;
  lifecycle: FlowLifecycle;
  config: Config;
  syntax: SyntaxChecker;
  /** LIMIT_STORED_BYTES_PER_APP (docs/security.md, "What an app may store"); absent: no bound. */
  stored?: StoredQuota | undefined;
}

/** Endpoints 24–25: export and import (docs/export-import.md), in the caller's app and space. */
export async function bundleRoutes(fastify: FastifyInstance, opts: BundleOptions): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { store, clock, lifecycle } = opts;
  app.post(
    "/export",
    {
      config: { access: "context" },
      schema: { body: ExportBody, response: { 200: Envelope(Bundle) } },
    },
    async (req) =>
      ok(
        await exportBundle(
          store,
          scopeOf(req),
          req.body,
          clock.now(),
          opts.config.limits.bodyBytes,
        ),
      ),
  );

  app.post(
    "/import",
    {
      config: { access: "context" },
      schema: { body: ImportBody, response: { 200: Envelope(ImportReport) } },
    },
    async (req) => {
      const scope = scopeOf(req);
      // A dry run writes nothing: it is refused as the import would be, and counts nothing.
      const bytes = req.body.dryRun ? 0 : Buffer.byteLength(JSON.stringify(req.body), "utf8");
      await opts.stored?.admit(scope.app, bytes, "an import");
      const { report, flowIds } = await importBundle(
        {
          store,
          checkScript: scriptCheck(opts),
          checkRevision: revisionCheck(opts, scope),
          keepRevisions: opts.config.limits.revisionsPerFlow,
          bounds: appBounds(opts.config.limits),
        },
        scope,
        req.ctx.user,
        req.body,
        clock.now(),
      );
      // Schedules and cached locators learn of the written flows as of a deploy.
      await lifecycle.imported(scope, flowIds);
      return ok(report);
    },
  );
}

function scriptCheck(opts: BundleOptions): ScriptCheck {
  return async (name, kind, content) => {
    const file = `${name}.${kind === "package" ? "zip" : "py"}`;
    return (await checkScriptBytes(opts, file, kind, content))?.message ?? null;
  };
}

/**
 * A revision an import writes passes the deploy validator, its element locators looked up in
 * the file as well as in the caller's space. One import checks each distinct Python text once
 * (a history repeats its inline code): the sandboxed checker is shared by every tenant.
 */
function revisionCheck(opts: BundleOptions, scope: Scope): RevisionCheck {
  const base = validationContext(opts, scope);
  const checked = new Map<string, ReturnType<typeof base.checkPythonSyntax>>();
  const checkPythonSyntax = (code: string) => {
    const found = checked.get(code) ?? base.checkPythonSyntax(code);
    checked.set(code, found);
    return found;
  };
  return async (rev, refExists) => {
    const ctx = {
      checkPythonSyntax,
      elementExists: (loc: Parameters<typeof refExists>[0]["loc"], type: "PY" | "DPL") =>
        refExists({ loc, type }),
    };
    const errors = (await validateFlow(rev, ctx)).filter((r) => r.severity === Severity.ERROR);
    if (errors.length === 0) return null;
    const shown = errors
      .slice(0, 3)
      .map((e) => `${e.nodeId}: ${e.errorMessage ?? e.errorCode}`)
      .join("; ");
    return errors.length > 3 ? `${shown}; and ${errors.length - 3} more` : shown;
  };
}
