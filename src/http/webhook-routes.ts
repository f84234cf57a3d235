import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import type { Webhooks } from "../webhooks/index.ts";
import { scopeOf } from "./context.ts";
import { Envelope, ok } from "./envelope.ts";
import { SigningSecret } from "./webhook-schemas.ts";

/**
 * The space's webhook signing secret (docs/webhooks.md, "Verifying a delivery"): read (made on
 * first use) and rotated. Scoped like every flow endpoint: a space sees only its own.
 */
export async function webhookRoutes(
  fastify: FastifyInstance,
  opts: { webhooks: Pick<Webhooks, "secret" | "rotateSecret"> },
): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { webhooks } = opts;
  const schema = { response: { 200: Envelope(SigningSecret) } };

  app.get("/webhook/secret", { config: { access: "context" }, schema }, async (req) =>
    ok({ secret: await webhooks.secret(scopeOf(req)) }),
  );

  app.post(
    "/webhook/secret/rotate",
    { config: { access: "context", bodyOptional: true }, schema },
    async (req) => ok({ secret: await webhooks.rotateSecret(scopeOf(req)) }),
  );
}
