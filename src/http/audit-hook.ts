import { createHash } from "node:crypto";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import { auditAction, auditTarget, TOKEN_USE } from "../audit/actions.ts";
import type { AuditTrail } from "../audit/audit-trail.ts";
import { oncePerMinute, perMinute } from "../audit/once-per-minute.ts";
import {
  SCHEDULE_ACTIONS,
  type ScheduleDeps,
  type ScheduleSnapshot,
  scheduleChanges,
  snapshotSchedules,
} from "../audit/schedule-changes.ts";
import type { AuditEntry } from "../audit/types.ts";
import type { Clock } from "../clock.ts";
import type { Config } from "../config.ts";
import { ErrorCode } from "../errors.ts";
import { headerText } from "./context.ts";

export interface AuditHookOptions {
  audit: Pick<AuditTrail, "record">;
  config: Pick<Config, "auth" | "dataflowPrefix" | "scriptPrefix">;
  clock: Clock;
  /** Where schedule changes are read from (absent: not recorded). */
  schedules?: ScheduleDeps | undefined;
}

declare module "fastify" {
  interface FastifyRequest {
    /** The flows' live schedules before a flow action (audit-hook.ts). */
    auditSchedules?: ScheduleSnapshot;
  }
}

/** The start of every envelope, as the response schemas serialise it (docs/errors.md). */
const ENVELOPE = /^\{"status":(true|false),"code":(-?\d+|null)/;
/** Actions whose target is read partly from the answer's data. */
const FROM_ANSWER = new Set([
  "upload",
  "deploy",
  "import",
  "terminate",
  "delete",
  "batch-deploy",
  "batch-deactivate",
]);
/**
 * Refused entries one client address may add a minute, whatever token and identity it claims
 * each time: unauthenticated traffic cannot grow the table faster than this.
 */
const REFUSED_PER_ADDRESS = 10;
/** What a claimed (unverified) header may put in an entry. */
const MAX_CLAIMED = 200;

/**
 * The one place every change is recorded (docs/audit.md): an `onSend` hook on every route, so no
 * endpoint can forget it. The entry is written (batched with the others of its event-loop turn)
 * before the answer leaves, so a change the caller saw acknowledged is in the trail.
 */
export const auditHook = fp(
  async (app: FastifyInstance, opts: AuditHookOptions) => {
    const firstUse = oncePerMinute(opts.clock);
    const refusedFrom = perMinute(opts.clock, REFUSED_PER_ADDRESS);
    const { config } = opts;
    const relative = (url: string): string => {
      for (const prefix of [config.dataflowPrefix, config.scriptPrefix])
        if (url.startsWith(`${prefix}/`)) return url.slice(prefix.length);
      return url;
    };
    // The same for every request of a route: worked out once per route and method (a run start,
    // the busiest request, is no change and has nothing else to do here).
    const actions = new Map<string, string | null>();
    const actionOf = (req: FastifyRequest): string | null => {
      const url = req.routeOptions.url;
      if (url === undefined) return null;
      const key = `${req.method} ${url}`;
      let action = actions.get(key);
      if (action === undefined) {
        action = auditAction(req.method, relative(url));
        actions.set(key, action);
      }
      return action;
    };

    app.addHook("preHandler", async (req) => {
      const action = actionOf(req);
      if (opts.schedules && action && SCHEDULE_ACTIONS.has(action) && req.ctx.scope)
        req.auditSchedules = await snapshotSchedules(opts.schedules, req.ctx.scope, req.body);
    });

    app.addHook("onSend", async (req, reply, payload) => {
      const action = actionOf(req);
      const token = req.headers.token;
      const signed = config.auth.mode === "signature" && typeof token === "string" && token !== "";
      if (!action && !signed) return payload;
      const answer = readAnswer(payload, reply.statusCode);
      const entries: Omit<AuditEntry, "id">[] = [];
      if (signed) {
        const use = tokenUse(req, reply, answer, token, opts.clock.now());
        const key = `${use.target.token}\n${use.app}\n${use.space}\n${use.user}\n${use.outcome}`;
        if (firstUse(key) && (use.outcome === "accepted" || refusedFrom(`${use.address}`)))
          entries.push(use);
      }
      if (action) {
        const entry = await changeEntry(req, reply, action, answer, payload, opts);
        // A refused (unauthenticated) attempt is one entry a minute per caller and action.
        if (
          answer.code !== ErrorCode.UNAUTHORIZED ||
          (firstUse(`${entry.address}\n${action}\n${entry.app}\n${entry.space}`) &&
            refusedFrom(`${entry.address}`))
        )
          entries.push(entry);
      }
      await Promise.all(entries.map((e) => opts.audit.record(e)));
      return payload;
    });
  },
  { name: "sluice-audit", dependencies: ["sluice-context"] },
);

interface Answer {
  ok: boolean;
  code: number | null;
}

function readAnswer(payload: unknown, httpStatus: number): Answer {
  const text =
    typeof payload === "string"
      ? payload.slice(0, 64)
      : Buffer.isBuffer(payload)
        ? payload.subarray(0, 64).toString()
        : "";
  const m = ENVELOPE.exec(text);
  if (!m) return { ok: httpStatus < 400, code: null };
  return { ok: m[1] === "true", code: m[2] === "null" ? null : Number(m[2]) };
}

/** Who and where: the verified context when auth passed, else what the caller claimed. */
function who(req: FastifyRequest): Pick<AuditEntry, "app" | "space" | "user" | "address"> {
  const claimed = (name: string) => {
    const v = req.headers[name];
    return typeof v === "string" && v !== "" ? headerText(v).slice(0, MAX_CLAIMED) : null;
  };
  const ctx = req.ctx as FastifyRequest["ctx"] | null;
  return {
    app: ctx?.scope?.app ?? claimed("app") ?? "",
    space: ctx?.scope?.space ?? claimed("space") ?? "",
    user: ctx ? ctx.user : claimed("user"),
    address: req.ip ?? null,
  };
}

function tokenUse(
  req: FastifyRequest,
  reply: FastifyReply,
  answer: Answer,
  token: string,
  now: number,
): Omit<AuditEntry, "id"> {
  const refused = answer.code === ErrorCode.UNAUTHORIZED || reply.statusCode === 401;
  return {
    at: now,
    ...who(req),
    method: req.method,
    route: req.routeOptions.url ?? req.url.split("?")[0] ?? "",
    action: TOKEN_USE,
    // A fingerprint tells uses of one token apart; the token itself is never kept.
    target: { token: createHash("sha256").update(token).digest("hex").slice(0, 16) },
    outcome: refused ? "refused" : "accepted",
    code: answer.code,
    httpStatus: reply.statusCode,
    durationMs: Math.round(reply.elapsedTime),
    requestId: req.id,
  };
}

async function changeEntry(
  req: FastifyRequest,
  reply: FastifyReply,
  action: string,
  answer: Answer,
  payload: unknown,
  opts: AuditHookOptions,
): Promise<Omit<AuditEntry, "id">> {
  const data = FROM_ANSWER.has(action) && answer.ok ? dataOf(payload) : undefined;
  // A secret's PUT body holds its value: it is never handed on (docs/secrets.md).
  const body = action === "secret-put" ? undefined : req.body;
  const target = auditTarget(action, req.params, body, data);
  if (opts.schedules && req.auditSchedules && answer.ok && req.ctx.scope) {
    await opts.schedules.schedules.settled();
    const after = await snapshotSchedules(opts.schedules, req.ctx.scope, req.body);
    const changes = scheduleChanges(req.auditSchedules, after);
    if (changes.length > 0) target.schedules = changes;
  }
  return {
    at: opts.clock.now(),
    ...who(req),
    method: req.method,
    route: req.routeOptions.url ?? "",
    action,
    target,
    ...outcomeOf(action, answer, data),
    httpStatus: reply.statusCode,
    durationMs: Math.round(reply.elapsedTime),
    requestId: req.id,
  };
}

function dataOf(payload: unknown): unknown {
  const text =
    typeof payload === "string" ? payload : Buffer.isBuffer(payload) ? payload.toString() : "";
  try {
    return (JSON.parse(text) as { data?: unknown }).data;
  } catch {
    return undefined;
  }
}

/**
 * A deploy whose graph has errors answers success with the errors as data and deploys nothing
 * (docs/flow-graph.md): the trail records it as the failure it is, with the first error's code.
 */
function outcomeOf(
  action: string,
  answer: Answer,
  data: unknown,
): Pick<AuditEntry, "outcome" | "code"> {
  if (action === "deploy" && Array.isArray(data)) {
    const error = data.find((r: { severity?: unknown }) => r?.severity === 2) as
      | { errorCode?: unknown }
      | undefined;
    if (error) return { outcome: "failure", code: Number(error.errorCode) || null };
  }
  return { outcome: answer.ok ? "success" : "failure", code: answer.code };
}
