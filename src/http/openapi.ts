import swagger from "@fastify/swagger";
import swaggerUi from "@fastify/swagger-ui";
import type { FastifyInstance, FastifySchema, RouteOptions } from "fastify";
import type { Config } from "../config.ts";
import { IDEMPOTENCY_HEADER_DOC, IDEMPOTENT_OPERATIONS } from "./idempotency.ts";
import { OPERATIONS } from "./openapi-catalog.ts";
import { errorCatalog } from "./openapi-errors.ts";
import { documentBodies, documentedBody, documentedTextFields } from "./openapi-forms.ts";
import { contextHeaders, responseHeaders } from "./openapi-headers.ts";

export interface RouteRecord {
  method: string;
  url: string;
  hidden: boolean;
}

declare module "fastify" {
  interface FastifyInstance {
    routeList: RouteRecord[];
  }
}

/** The multipart form of POST /file/batch-upload: the route reads parts itself, so no body schema validates it. */
const UPLOAD_FORM = {
  type: "object",
  required: ["batchFile"],
  properties: {
    batchFile: {
      type: "array",
      items: { type: "string", format: "binary" },
      description: "One part per .py or .zip file.",
    },
    folderId: { type: "string", description: "Target folder (one of folderId and path)." },
    path: { type: "string", description: "Target folder path, created when missing." },
    overwrite: { type: "boolean", description: "Replace same-named elements (default false)." },
  },
};

/** `METHOD /path` with the service prefix removed and `:param` written `{param}`, as OPERATIONS keys it. */
export function operationKey(config: Config, method: string, url: string): string {
  let path = url.replace(/:(\w+)/g, "{$1}");
  for (const prefix of [config.dataflowPrefix, config.scriptPrefix]) {
    if (prefix && path.startsWith(`${prefix}/`)) path = path.slice(prefix.length);
  }
  return `${method} ${path}`;
}

/**
 * Registers @fastify/swagger (before any route, so its onRoute hook sees them all) and the
 * swagger-ui page at /docs, which serves its own assets: no CDN. The document is generated from
 * the routes' TypeBox schemas; this only adds what schemas cannot say (headers, summaries, codes).
 */
export async function registerOpenApi(app: FastifyInstance, config: Config): Promise<void> {
  // Every route as registered, hidden or not: the test checks the document against this list.
  const routes: RouteRecord[] = [];
  app.decorate("routeList", routes);
  app.addHook("onRoute", (r) => {
    for (const method of [r.method].flat())
      routes.push({ method, url: r.url, hidden: r.schema?.hide === true });
  });
  const catalog = errorCatalog();
  await app.register(swagger, {
    openapi: {
      openapi: "3.1.0",
      info: {
        title: "Sluice",
        version: "3.0",
        description: [
          "Data-flow service (`" +
            config.dataflowPrefix +
            "`) and script service (`" +
            config.scriptPrefix +
            "`).",
          "Every envelope answer, success or failure, is HTTP 200 with `{status, code, message, data}`.",
          `Auth mode of this server: \`${config.auth.mode}\`.`,
          "Integers in JSON bodies and in a script's return value must lie within ±(2^53 − 1): a " +
            "larger one (a 64-bit ID) is a 400 naming the field (a task's result: 28030001), " +
            "since it would not be kept exactly; send such IDs as strings.",
          "",
          "### Error codes",
          catalog.markdown,
        ].join("\n"),
      },
      tags: [
        { name: "runs", description: "Data-flow runs (endpoints 1–5)" },
        { name: "monitor", description: "Monitoring (6–8)" },
        { name: "flows", description: "Flow lifecycle (9–14)" },
        { name: "scripts", description: "Script service (15–21)" },
        { name: "secrets", description: "Secrets referenced by flows and scripts" },
        {
          name: "webhooks",
          description: "Completion webhooks: the signing secret (docs/webhooks.md)",
        },
        { name: "operations", description: "Health, readiness, metrics" },
      ],
      // token and session are plain parameters of each operation (not security schemes), so they
      // are listed beside app/space/user where a reader looks for them.
      components: {
        schemas: { ErrorCode: catalog.schema },
      },
    },
    transformObject: (documents) =>
      "openapiObject" in documents
        ? (documentBodies(
            documents.openapiObject as Record<string, unknown>,
          ) as typeof documents.openapiObject)
        : documents.swaggerObject,
    transform: ({
      schema,
      url,
      route,
    }: {
      schema: FastifySchema;
      url: string;
      route: RouteOptions;
    }) => ({
      schema: documented(config, schema, url, route),
      url,
    }),
  });
  await app.register(swaggerUi, {
    routePrefix: "/docs",
    uiConfig: { docExpansion: "list", deepLinking: true },
  });
  app.get("/openapi.json", { schema: { hide: true } }, async () => app.swagger());
}

/** One operation's schema with what schemas cannot say: tag, summary, context headers, codes. */
function documented(
  config: Config,
  schema: FastifySchema,
  url: string,
  route: RouteOptions,
): FastifySchema {
  const signature = config.auth.mode === "signature";
  const key = operationKey(config, route.method.toString(), url);
  const doc = OPERATIONS[key];
  const out: Record<string, unknown> = { ...schema };
  if (doc) {
    out.tags = [doc.tag];
    out.summary = doc.summary;
    if (doc.description) out.description = doc.description;
  }
  const access = route.config?.access;
  const headers = contextHeaders(access, signature);
  if (headers) {
    out.headers = IDEMPOTENT_OPERATIONS.has(key)
      ? withProperty(headers.schema, "Idempotency-Key", IDEMPOTENCY_HEADER_DOC)
      : headers.schema;
    if (headers.cookie)
      out.cookies = {
        type: "object",
        properties: {
          session: {
            type: "string",
            description: "Signed session cookie (alternative to the context headers).",
          },
        },
      };
  }
  // What request-forms.ts accepts beyond the schemas (null, text booleans, empty values), said
  // on copies: the route schemas themselves stay as the server validates them.
  if (schema?.body) out.body = documentedBody(schema.body);
  if (schema?.querystring) out.querystring = documentedTextFields(schema.querystring);
  if (key.endsWith("/file/batch-upload")) out.body = documentedTextFields(UPLOAD_FORM);
  const response = (schema?.response ?? {}) as Record<string, Record<string, unknown>>;
  const ok = response["200"];
  if (ok)
    out.response = {
      ...response,
      200: {
        ...ok,
        description: "Success or failure envelope (HTTP 200 either way).",
        headers: responseHeaders(key),
      },
    };
  return out as FastifySchema;
}

/** `schema` (an object schema) with one more optional property. */
function withProperty(
  schema: Record<string, unknown>,
  name: string,
  property: unknown,
): Record<string, unknown> {
  const properties = (schema.properties ?? {}) as Record<string, unknown>;
  return { ...schema, properties: { ...properties, [name]: property } };
}
