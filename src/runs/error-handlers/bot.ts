import type { Language } from "../../errors.ts";
import { postGuarded } from "../../guarded-post.ts";
import { describe, t, title } from "./messages.ts";
import { type FailureEvent, type Handler, PermanentHandlerError } from "./types.ts";

export type BotKind = "generic" | "slack" | "dingtalk" | "feishu";

export interface BotHandlerConfig {
  webhookUrl: string;
  kind?: BotKind | undefined;
}

/** The body each kind of incoming webhook expects (docs/flow-graph.md). */
export function botPayload(kind: BotKind, event: FailureEvent, language: Language): unknown {
  const text = `${title(event, language)}\n${describe(event, language)}`;
  switch (kind) {
    case "slack":
      return { text };
    case "dingtalk":
      return { msgtype: "text", text: { content: text } };
    case "feishu":
      return { msg_type: "text", content: { text } };
    default:
      return event;
  }
}

/**
 * POSTs the event to a chat bot or any HTTP receiver. DingTalk and Feishu answer HTTP 200 with an
 * error code in the body when they refuse a message, so that body is checked too.
 */
export function botHandler(
  cfg: BotHandlerConfig,
  opts: { allowPrivate: boolean; timeoutMs: number },
): Handler {
  const kind = cfg.kind ?? "generic";
  return {
    kind: "bot",
    async deliver({ event, language }) {
      let status: number;
      let body: string;
      try {
        const answer = await postGuarded({
          url: new URL(cfg.webhookUrl),
          headers: { "content-type": "application/json; charset=utf-8" },
          body: JSON.stringify(botPayload(kind, event, language)),
          signal: AbortSignal.timeout(opts.timeoutMs),
          allowPrivate: opts.allowPrivate,
          // Only the head is ever shown; an endless answer must not be buffered whole.
          maxAnswerBytes: 64 * 1024,
          refuse: (host) => new PermanentHandlerError(t(language, "privateAddress", { host })),
        });
        status = answer.status;
        body = answer.body.slice(0, 500);
      } catch (err) {
        if (err instanceof PermanentHandlerError) throw err;
        const reason = err instanceof Error ? err.message : String(err);
        throw new Error(t(language, "unreachable", { reason }));
      }
      if (status < 200 || status >= 300)
        throw new Error(t(language, "httpStatus", { status, body }));
      if ((kind === "dingtalk" || kind === "feishu") && refused(body)) {
        throw new Error(t(language, "refused", { body }));
      }
      return undefined;
    },
  };
}

/** DingTalk `errcode`, Feishu `code` or `StatusCode`: non-zero means the message was refused. */
function refused(body: string): boolean {
  try {
    const j = JSON.parse(body) as Record<string, unknown>;
    return [j.errcode, j.code, j.StatusCode].some((c) => typeof c === "number" && c !== 0);
  } catch {
    return false;
  }
}
