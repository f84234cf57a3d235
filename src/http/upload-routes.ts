import multipart from "@fastify/multipart";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { Type } from "typebox";
import type { Clock } from "../clock.ts";
import type { Config } from "../config.ts";
import { targetFolder } from "../elements/locator.ts";
import { badRequest, SluiceError } from "../errors.ts";
import type { DataDisk } from "../runs/run-disk.ts";
import { importScripts, type UploadFile } from "../scripts/importer.ts";
import type { ScriptEnvs } from "../scripts/script-envs.ts";
import type { SyntaxChecker } from "../scripts/syntax-check.ts";
import type { Store } from "../store/types.ts";
import type { StoredQuota } from "../stored-quota.ts";
import { scopeOf } from "./context.ts";
import { Envelope, ok } from "./envelope.ts";
import { formBoolean, formFields } from "./request-forms.ts";
import { UploadItem } from "./script-schemas.ts";

/** POST /file/batch-upload (endpoint 21): .py and .zip files become PY elements. */
export async function uploadRoutes(
  app: FastifyInstance,
  opts: {
    config: Config;
    store: Store;
    clock: Clock;
    syntax: SyntaxChecker;
    envs?: ScriptEnvs | undefined;
    /** Below its free-space floor, no environment is built (docs/security.md, "Disk"). */
    disk?: Pick<DataDisk, "state"> | undefined;
    /** LIMIT_STORED_BYTES_PER_APP (docs/security.md, "What an app may store"); absent: no bound. */
    stored?: StoredQuota | undefined;
  },
): Promise<void> {
  await app.register(multipart, {
    // An oversize file is one item with status 3, not a failed request: keep reading, mark it truncated.
    throwFileSizeLimit: false,
    limits: {
      fileSize: opts.config.limits.uploadFileBytes,
      files: 1000,
      fields: 20,
      fieldSize: 64 * 1024,
    },
  });

  app.post(
    "/file/batch-upload",
    {
      config: { access: "internal" },
      schema: {
        consumes: ["multipart/form-data"],
        response: { 200: Envelope(Type.Array(UploadItem)) },
      },
    },
    async (req) => {
      if (!req.isMultipart())
        throw badRequest("content-type must be multipart/form-data with batchFile parts");
      const scope = scopeOf(req);
      const files: UploadFile[] = [];
      const fields: Record<string, string> = {};
      try {
        await readParts(req, files, fields);
      } catch (err) {
        throw formError(err);
      }
      // As for every other request (docs/errors.md): PostgreSQL cannot keep U+0000.
      const nul = Object.keys(fields).find((k) => `${k}${fields[k]}`.includes("\0"));
      if (nul !== undefined)
        throw badRequest(
          `form field ${JSON.stringify(nul)} must not contain the NUL character (U+0000)`,
        );
      if (files.some((f) => f.filename.includes("\0")))
        throw badRequest("batchFile file names must not contain the NUL character (U+0000)");
      if (files.length === 0) throw badRequest("batchFile is required");
      const form = formFields(fields);
      const overwrite = parseBool(form.overwrite, "overwrite");
      // Before anything is written, its folders included (docs/security.md, "What an app may store").
      const bytes = files.reduce((n, f) => n + f.bytes.length, 0);
      await opts.stored?.admit(scope.app, bytes, `an upload of ${files.length} file(s)`);
      const folder = await targetFolder(
        opts.store,
        scope,
        { folderId: form.folderId, path: form.path },
        opts.clock.now(),
      );
      return ok(await importScripts(opts, scope, folder, files, overwrite, req.ctx.user));
    },
  );
}

/** Fields may follow the files, so every part is read before anything is imported. */
async function readParts(
  req: FastifyRequest,
  files: UploadFile[],
  fields: Record<string, string>,
): Promise<void> {
  for await (const part of req.parts()) {
    if (part.type === "file") {
      if (part.fieldname !== "batchFile")
        throw badRequest(`unknown file field "${part.fieldname}"; use batchFile`);
      const bytes = await part.toBuffer();
      files.push({ filename: part.filename, bytes, truncated: part.file.truncated });
    } else {
      // Two values for one field: neither is silently the one (a query string's list is a 400 too).
      if (Object.hasOwn(fields, part.fieldname))
        throw badRequest(`form field ${JSON.stringify(part.fieldname)} is given more than once`);
      fields[part.fieldname] = String(part.value);
    }
  }
}

/**
 * The form parser throws plain errors for a body that is not a well-formed form (no closing
 * boundary, a boundary that never appears, a truncated part): the client's fault, a 400 naming
 * the form. Limits (413) and our own errors pass through.
 */
function formError(err: unknown): unknown {
  if (err instanceof SluiceError) return err;
  const status = (err as { statusCode?: unknown }).statusCode;
  if (typeof status === "number" && status < 500) return err;
  const text = err instanceof Error ? err.message : String(err);
  return badRequest(`the multipart/form-data body is malformed: ${text}`);
}

/** A form boolean (docs/errors.md, "How fields are read"); left out or empty is false. */
function parseBool(value: string | undefined, field: string): boolean {
  return formBoolean(value, field) ?? false;
}
