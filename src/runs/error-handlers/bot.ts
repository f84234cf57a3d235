import { lookup } from "node:dns/promises";
import { isIP } from "node:net";
import type { Language } from "../../errors.ts";
import { readBody } from "../../fetch-body.ts";
import { isPrivateAddress } from "../../private-address.ts";
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

export async function checkAddress(url: URL, language: Language): Promise<void> {
  const host = url.hostname.replace(/^\[|\]$/g, "");
  const addresses = isIP(host) ? [host] : (await lookup(host, { all: true })).map((a) => a.address);
  if (addresses.some(isPrivateAddress))
    throw new PermanentHandlerError(t(language, "privateAddress", { host }));
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
      const url = new URL(cfg.webhookUrl);
      if (!opts.allowPrivate) await checkAddress(url, language);
      let res: Response;
      let body: string;
      try {
        res = await fetch(url, {
          method: "POST",
          headers: { "content-type": "application/json; charset=utf-8" },
          body: JSON.stringify(botPayload(kind, event, language)),
          signal: AbortSignal.timeout(opts.timeoutMs),
          redirect: "error",
        });
        // Only the head is ever shown; an endless answer must not be buffered whole.
        body = (await readBody(res, 64 * 1024, { truncate: true })).slice(0, 500);
      } catch (err) {
        const reason = err instanceof Error ? err.message : String(err);
        throw new Error(t(language, "unreachable", { reason }));
      }
      if (!res.ok) throw new Error(t(language, "httpStatus", { status: res.status, body }));
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
