import { type Static, Type } from "typebox";
import { badRequest } from "../errors.ts";
import { parseOnList, webhookUrlProblem } from "../webhooks/targets.ts";
import { WEBHOOK_ON, type WebhookTarget } from "../webhooks/types.ts";

/** TypeBox schemas of completion webhooks (docs/webhooks.md). */

const On = Type.Union(
  WEBHOOK_ON.map((v) => Type.Literal(v)),
  { description: "a run end a webhook is called for; ANY: every end" },
);

/** The per-call webhook of the run and run-sync bodies (flow runs, internal script runs). */
export const CallbackFields = {
  callbackUrl: Type.Optional(
    Type.String({ minLength: 1, description: "http(s) URL POSTed when this run ends" }),
  ),
  callbackOn: Type.Optional(Type.Array(On, { minItems: 1, description: "default [ANY]" })),
};

/** The same for an external script call, whose body is the parameter: in the query string. */
export const CallbackQueryFields = {
  callbackUrl: Type.Optional(Type.String({ minLength: 1 })),
  callbackOn: Type.Optional(
    Type.String({ description: "comma-separated: SUCCESS, FAILURE, CANCELED, ANY" }),
  ),
};

export const SigningSecret = Type.Object({
  secret: Type.String({ description: "HMAC-SHA256 key of the Sluice-Signature header" }),
});

/** `webhookDeliveries` items of GET /monitor/run (beyond the interface, docs/webhooks.md). */
export const WebhookDeliverySchema = Type.Object({
  id: Type.String(),
  url: Type.String(),
  event: Type.String({ description: "the run's end status reported" }),
  status: Type.Union([Type.Literal("PENDING"), Type.Literal("DELIVERED"), Type.Literal("FAILED")]),
  attempts: Type.Array(
    Type.Object({
      at: Type.Integer({ description: "epoch ms the attempt started" }),
      ms: Type.Integer(),
      httpStatus: Type.Optional(Type.Integer()),
      error: Type.Optional(Type.String()),
    }),
  ),
  nextAttemptAt: Type.Optional(Type.Integer()),
});

type BodyCallback = { callbackUrl?: string | undefined; callbackOn?: WebhookTarget["on"] };
type QueryCallback = Static<Type.TObject<typeof CallbackQueryFields>>;

/** The call's webhook, checked: a 400 naming the field for a URL that is not http(s). */
export function callbackOf(
  fields: BodyCallback | QueryCallback,
  at: "body" | "querystring",
): WebhookTarget | undefined {
  const { callbackUrl, callbackOn } = fields;
  if (callbackUrl === undefined) {
    if (callbackOn !== undefined) throw badRequest(`${at}.callbackOn needs ${at}.callbackUrl`);
    return undefined;
  }
  const problem = webhookUrlProblem(callbackUrl);
  if (problem) throw badRequest(`${at}.callbackUrl ${problem}`);
  if (callbackOn === undefined) return { url: callbackUrl, on: ["ANY"] };
  if (Array.isArray(callbackOn)) return { url: callbackUrl, on: callbackOn };
  const on = parseOnList(callbackOn);
  if ("unknown" in on)
    throw badRequest(`${at}.callbackOn: "${on.unknown}" is not one of ${WEBHOOK_ON.join(", ")}`);
  return { url: callbackUrl, on };
}
