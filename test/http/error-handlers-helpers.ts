import http from "node:http";
import type { AddressInfo } from "node:net";
import { SMTPServer } from "smtp-server";

export interface Mail {
  from: string;
  to: string[];
  raw: string;
}

/** A real SMTP server on loopback (no TLS, no auth) keeping every message it accepts. */
export async function startSmtp(): Promise<{ url: string; mails: Mail[]; close(): Promise<void> }> {
  const mails: Mail[] = [];
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ["STARTTLS", "AUTH"],
    logger: false,
    onData(stream, session, done) {
      let raw = "";
      stream.on("data", (c: Buffer) => (raw += c.toString("utf8")));
      stream.on("end", () => {
        mails.push({
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : "",
          to: session.envelope.rcptTo.map((r) => r.address),
          raw,
        });
        done();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.server.address() as AddressInfo;
  return {
    url: `smtp://127.0.0.1:${port}`,
    mails,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

export interface Hit {
  path: string;
  body: Record<string, unknown>;
  at: number;
}

/** A webhook receiver on loopback: `/status/<code>/...` answers that status, anything else 200. */
export async function startReceiver(): Promise<{ url: string; hits: Hit[]; close(): void }> {
  const hits: Hit[] = [];
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString("utf8")));
    req.on("end", () => {
      hits.push({ path: req.url ?? "", body: JSON.parse(body || "null"), at: Date.now() });
      const code = /^\/status\/(\d{3})/.exec(req.url ?? "")?.[1];
      res.statusCode = code ? Number(code) : 200;
      res.setHeader("content-type", "application/json");
      res.end(
        req.url?.startsWith("/dingtalk-refuse")
          ? '{"errcode":310000,"errmsg":"keywords not in content"}'
          : '{"errcode":0}',
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    hits,
    close: () => server.close(),
  };
}

/** Unfolds quoted-printable soft breaks and decodes the body text of a simple mail. */
export function mailText(raw: string): string {
  return raw
    .replace(/=\r?\n/g, "")
    .replace(/=([0-9A-F]{2})/g, (_, h: string) => String.fromCharCode(Number.parseInt(h, 16)));
}
