import nodemailer, { type Transporter } from "nodemailer";
import { describe, t, title } from "./messages.ts";
import { type Handler, PermanentHandlerError } from "./types.ts";

export interface EmailHandlerConfig {
  to: string[];
  subject?: string | undefined;
}

/** One SMTP transport per SMTP_URL for the whole process (nodemailer pools nothing by default). */
const transports = new Map<string, Transporter>();

/**
 * Every wait of a mail bounded like a bot's post (WEBHOOK_TIMEOUT_MS): mails and bots share the
 * notification slots (docs/error-handlers.md), and nodemailer's own defaults (two minutes to
 * connect, ten of silence) would let a stalled SMTP server hold them all.
 */
function transportFor(smtpUrl: string, timeoutMs: number): Transporter {
  let tr = transports.get(smtpUrl);
  if (!tr) {
    tr = nodemailer.createTransport({
      url: smtpUrl,
      connectionTimeout: timeoutMs,
      greetingTimeout: timeoutMs,
      socketTimeout: timeoutMs,
    });
    transports.set(smtpUrl, tr);
  }
  return tr;
}

/** E-mail to every address through SMTP_URL (docs/flow-graph.md); the subject defaults to the event title. */
export function emailHandler(
  cfg: EmailHandlerConfig,
  smtp: { url: string | undefined; from: string; timeoutMs: number },
): Handler {
  return {
    kind: "email",
    async deliver({ event, language }) {
      if (!smtp.url) throw new PermanentHandlerError(t(language, "noSmtp"));
      try {
        await transportFor(smtp.url, smtp.timeoutMs).sendMail({
          from: smtp.from,
          to: cfg.to,
          subject: cfg.subject ?? title(event, language),
          text: `${title(event, language)}\n\n${describe(event, language)}\n`,
          headers: { "X-Sluice-Run-Id": event.runId, "X-Sluice-Event": event.event },
        });
      } catch (err) {
        const reason = err instanceof Error ? err.message : String(err);
        throw new Error(t(language, "smtpFailed", { reason }));
      }
      return undefined;
    },
  };
}
