/** The headers of the OpenAPI document: the request's context headers and the response headers. */
import type { Access } from "./context.ts";

const str = { type: "string" } as const;

/** Header parameters by access kind (docs/auth.md). `required` reflects a request without a session cookie. */
export function contextHeaders(
  access: Access | undefined,
  signature: boolean,
): { schema: Record<string, unknown>; cookie: boolean } | null {
  if (!access) return null;
  const needed =
    access === "context" ||
    access === "internal" ||
    access === "external" ||
    (access === "contextEnv" && signature);
  const when = needed
    ? "Required unless a valid `session` cookie supplies the scope."
    : "Optional; when given, lookups are limited to this scope.";
  const properties: Record<string, unknown> = {
    app: { ...str, description: `Application ID (scope). ${when}` },
    space: { ...str, description: `Space ID (scope). ${when}` },
    user: { ...str, description: "Acting user: recorded as run initiator and release user." },
    language: {
      ...str,
      description: "`zh-cn` for Chinese messages and descriptions; default English.",
    },
    token: {
      ...str,
      description:
        access === "internal"
          ? "Signature mode: `<unixSeconds>.<hex HMAC-SHA256(internalSecret, app\\nspace\\nuser\\nunixSeconds)>`."
          : "Signature mode: `<unixSeconds>.<hex HMAC-SHA256(appSecret, app\\nspace\\nuser\\nunixSeconds)>`.",
    },
  };
  // "required" as the API pages of docs/ say it; the session-cookie alternative is in the descriptions.
  const required = !needed
    ? []
    : access === "context"
      ? ["app", "space", "user"]
      : ["app", "space"];
  return { schema: { type: "object", properties, required }, cookie: access !== "internal" };
}

/** Response headers by operation (docs/errors.md). */
export function responseHeaders(key: string): Record<string, unknown> {
  const runId = {
    "x-run-id": { ...str, description: "ID of the run this response starts or concerns." },
  };
  const taskId = {
    "x-task-id": { ...str, description: "ID of the script task this response starts or concerns." },
  };
  const taskStatus = {
    "x-task-status": {
      ...str,
      description: "Task status: SUCCESS, FAILURE, STARTED, QUEUED or CANCELED.",
    },
  };
  const requestId = {
    "x-request-id": {
      ...str,
      description:
        "The request's ID (echoed when the caller sent one); it is in every log line of the request.",
    },
  };
  if (
    [
      "POST /run",
      "GET /run/{runId}/result",
      "POST /run-sync",
      "POST /run/{runId}/rerun",
      "POST /run/{runId}/resume",
    ].includes(key)
  )
    return { ...requestId, ...runId };
  if (["POST /external/{elementName}/run", "POST /script/run"].includes(key))
    return { ...requestId, ...taskId };
  if (
    key.startsWith("POST /external/") ||
    key === "POST /script/run-sync" ||
    key.startsWith("GET /script/")
  ) {
    return { ...requestId, ...taskId, ...taskStatus };
  }
  return requestId;
}
