import type { FastifyRequest } from "fastify";
import { badRequest, type ErrorCodeValue, SluiceError } from "../errors.ts";
import { fingerprint, type Idempotency, type Settled } from "../runs/idempotency.ts";
import type { Run, ScopeFilter } from "../store/types.ts";
import { scopeOf } from "./context.ts";
import { type HeldQuota, heldWait } from "./held-quota.ts";

/**
 * The `Idempotency-Key` header of the start endpoints (docs/idempotency.md): how it is read, and
 * how a route starts its run through it. The rules themselves live in runs/idempotency.ts.
 */

/** The operations that honour the header (OpenAPI keys, the service prefix removed). */
export const IDEMPOTENT_OPERATIONS: ReadonlySet<string> = new Set([
  "POST /run",
  "POST /run-sync",
  "POST /external/{elementName}/run",
  "POST /external/{elementName}/run-sync",
  "POST /script/run",
  "POST /script/run-sync",
]);

export const IDEMPOTENCY_HEADER_DOC = {
  type: "string",
  minLength: 1,
  maxLength: 255,
  pattern: "^[\\x20-\\x7E]+$",
  description:
    "Optional. A retry with the same key and the same request answers the first call's run instead of starting another (within IDEMPOTENCY_WINDOW_SECONDS, default 24 h; per app, space and endpoint). The same key with a different request is a 400. 1–255 printable ASCII characters.",
} as const;

const KEY = /^[\x20-\x7e]{1,255}$/;

/**
 * The request's key: undefined when absent or empty (an empty header is an unset one, as for the
 * scope headers); anything but 1–255 printable ASCII characters is a 400 naming the header.
 */
export function idempotencyKeyOf(req: FastifyRequest): string | undefined {
  const raw = req.headers["idempotency-key"];
  if (Array.isArray(raw)) throw badRequest("header Idempotency-Key is given more than once");
  if (raw === undefined || raw === "") return undefined;
  if (!KEY.test(raw))
    throw badRequest(
      "header Idempotency-Key must be 1 to 255 printable ASCII characters (space to ~)",
    );
  return raw;
}

/**
 * Starts through `start` once per key: without a key, simply starts. `request` is what the run is
 * made of (element, parameter, run options, user): its fingerprint tells a retry from a new
 * request under a reused key. Wait options (`timeout`, `terminateOnTimeout`) are not part of it.
 */
export function startOnce<T>(
  idempotency: Idempotency,
  req: FastifyRequest,
  endpoint: string,
  request: unknown,
  start: (runId: string | undefined) => Promise<T>,
): Promise<Settled<T>> {
  const key = idempotencyKeyOf(req);
  if (key === undefined) return start(undefined).then((value) => ({ first: true, value }));
  const call = { scope: scopeOf(req), endpoint, key, fingerprint: fingerprint(request) };
  return idempotency.once(call, start);
}

/** The run ID a start answers, whether this call started it or an earlier one did. */
export function startedId(settled: Settled<string>): string {
  return settled.first ? settled.value : settled.runId;
}

/**
 * A run-sync retried with its key: the earlier call's run, awaited as the first call awaits it,
 * up to this call's own `timeout` (absent or 0: until the end, bounded by MAX_WAIT_S). A run
 * deleted since answers `notFound` (28020002 or 28030003) naming it in the message and `header`.
 * The wait is one of the caller's waiting requests (`held`, docs/live-progress.md#bounds).
 */
export async function awaitRetried(
  settled: Extract<Settled<unknown>, { first: false }>,
  waitForEnd: (
    scope: ScopeFilter,
    runId: string,
    timeoutS: number,
    gone: AbortSignal,
  ) => Promise<Run | undefined>,
  held: { quota: HeldQuota; req: FastifyRequest },
  timeoutS: number | undefined,
  notFound: { code: ErrorCodeValue; header: "x-run-id" | "x-task-id" },
): Promise<Run> {
  const waitS = timeoutS && timeoutS > 0 ? timeoutS : Number.POSITIVE_INFINITY;
  const scope = held.req.ctx.scope;
  const run =
    settled.run &&
    (await heldWait(held.quota, held.req, (gone) => waitForEnd(scope, settled.runId, waitS, gone)));
  if (!run)
    throw new SluiceError(notFound.code, [settled.runId], { [notFound.header]: settled.runId });
  return run;
}
