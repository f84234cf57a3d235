/** The `code` catalog of the OpenAPI document: every code of src/errors.ts with its meaning. */
import { ErrorCode, type ErrorCodeValue } from "../errors.ts";

const MEANINGS: Record<ErrorCodeValue, string> = {
  400: "request validation failed; the message names the field",
  401: "UNAUTHORIZED: missing, invalid or expired token or cookie",
  403: "a valid caller without the right to this action",
  404: "no such endpoint",
  413: "body or upload larger than the configured limit",
  429: "too many requests: the queue bound, a stopping service, the space's open event streams (LIMIT_LIVE_STREAMS), the waiting requests of the app or node (LIMIT_HELD_REQUESTS_PER_APP, LIMIT_HELD_REQUESTS), or the bytes of artifact downloads in flight (ARTIFACT_DOWNLOAD_BYTES_PER_APP, ARTIFACT_DOWNLOAD_BYTES)",
  999999: "generic business failure; the message names the cause",
  28010001: "element does not exist",
  28010002: "element name not unique: supply path or folderId",
  28010003: "folder does not exist",
  28010004: "flow revision does not exist (or its element belongs to another scope)",
  28010005:
    "deploy refused: the flow keeps as many revisions as LIMIT_REVISIONS_PER_FLOW allows and none may be removed",
  28010006:
    "element refused: the app holds as many elements (flows and scripts, all its spaces) as LIMIT_ELEMENTS_PER_APP allows; nothing stored",
  28010007:
    "release change refused: the app's active cron schedules would pass LIMIT_SCHEDULES_PER_APP; nothing changed",
  28010008:
    "refused: the app stores as many bytes (runs, revisions, script versions, all its spaces) as LIMIT_STORED_BYTES_PER_APP allows; nothing stored",
  28020001: "flow not runnable: no approved and enabled release",
  28020002: "run does not exist",
  28020003: "run not finished yet",
  28020004: "run ended in FAILURE",
  28020005: "run was CANCELED",
  28020006: "wait elapsed for a synchronous run; the run goes on",
  28020007:
    "run cannot be re-run (it has not finished, or its revision or a script version it ran was removed)",
  28020008:
    "run cannot be resumed (not a FAILURE flow run, its node outputs were not kept, or its revision or a script version it ran was removed)",
  28030001: "script run failure",
  28030002: "script timeout",
  28030003: "task does not exist",
  28030004: "task not finished yet",
  28030005: "task was CANCELED",
  28030006: "script version does not exist (or its element belongs to another scope)",
  28040001: "import refused: it conflicts with what the installation holds; nothing was written",
  28060001: "secret does not exist in this scope",
  28060002: "secret is referenced by flows whose release is live: deactivate or change them first",
  28060003: "secrets are not available: the service runs without SECRETS_KEY",
  28090001: "the run kept no file of that name (docs/artifacts.md)",
};

/** The `code` field's catalog, built from src/errors.ts so the two cannot drift apart. */
export function errorCatalog(): { schema: Record<string, unknown>; markdown: string } {
  const entries = Object.entries(ErrorCode).map(([name, code]) => ({
    name,
    code,
    meaning: MEANINGS[code],
  }));
  const markdown = [
    "| code | name | meaning |",
    "|---|---|---|",
    ...entries.map((e) => `| ${e.code} | ${e.name} | ${e.meaning} |`),
  ].join("\n");
  const schema = {
    type: "integer",
    description: `Error code of a failure envelope (success: 0).\n\n${markdown}`,
    enum: [0, ...entries.map((e) => e.code)],
    "x-enum-varnames": ["OK", ...entries.map((e) => e.name)],
    "x-enum-descriptions": ["success", ...entries.map((e) => e.meaning)],
  };
  return { schema, markdown };
}
