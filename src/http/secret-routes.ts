import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import { badRequest, ErrorCode, SluiceError } from "../errors.ts";
import type { Secrets } from "../secrets/secrets.ts";
import { scopeOf } from "./context.ts";
import { Envelope, ok } from "./envelope.ts";
import { PutSecretBody, SecretInfo, SecretParams } from "./secret-schemas.ts";

/** Secrets of the caller's scope (docs/secrets.md): names and times only, never a value. */
export async function secretRoutes(
  fastify: FastifyInstance,
  opts: { secrets: Secrets },
): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { secrets } = opts;
  const config = { access: "context" as const };

  app.get(
    "/secret",
    { config, schema: { response: { 200: Envelope(Type.Array(SecretInfo)) } } },
    async (req) => ok(await secrets.list(scopeOf(req))),
  );

  app.get(
    "/secret/:name",
    { config, schema: { params: SecretParams, response: { 200: Envelope(SecretInfo) } } },
    async (req) => {
      const found = (await secrets.list(scopeOf(req))).find((s) => s.name === req.params.name);
      if (!found) throw new SluiceError(ErrorCode.SECRET_NOT_FOUND, [req.params.name]);
      return ok(found);
    },
  );

  app.put(
    "/secret/:name",
    {
      config,
      schema: {
        params: SecretParams,
        body: PutSecretBody,
        response: { 200: Envelope(SecretInfo) },
      },
    },
    async (req) => {
      // Stored as UTF-8: a lone surrogate would silently come back as U+FFFD, another value.
      if (!req.body.value.isWellFormed())
        throw badRequest("body.value must be well-formed Unicode (a lone surrogate is not)");
      return ok(await secrets.put(scopeOf(req), req.params.name, req.body.value));
    },
  );

  app.delete(
    "/secret/:name",
    { config, schema: { params: SecretParams, response: { 200: Envelope(Type.Null()) } } },
    async (req) => {
      await secrets.remove(scopeOf(req), req.params.name);
      return ok(null);
    },
  );
}
