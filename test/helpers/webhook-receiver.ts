import { createHmac, timingSafeEqual } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { type Condition, condition } from "./wait.ts";

/** One POST the receiver got, and the status it answered. */
export interface Received {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary JSON.
  json: any;
  answered: number;
  /** Epoch ms the whole request had arrived. */
  at: number;
}

/**
 * A webhook receiver on loopback for tests and the bench: records every POST; `answer` decides
 * each status (default 200). Whoever waits awaits `changed` through `cond`, never a sleep.
 */
export interface Receiver {
  url: string;
  received: Received[];
  cond: Condition;
  /** Decides the status of the next request from its path and delivery's attempt number. */
  answer: (path: string, attempt: number) => number;
  /** The successful (2xx) requests of each delivery ID. */
  successes(): Map<string, number>;
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const cond = condition();
  const r: Receiver = {
    url: "",
    received: [],
    cond,
    answer: () => 200,
    successes() {
      const out = new Map<string, number>();
      for (const x of r.received)
        if (x.answered < 300 && x.headers["sluice-delivery"] !== undefined) {
          const id = String(x.headers["sluice-delivery"]);
          out.set(id, (out.get(id) ?? 0) + 1);
        }
      return out;
    },
    close: () => new Promise<void>((done) => server.close(() => done())),
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      const path = (req.url ?? "/").split("?")[0] ?? "/";
      const answered = r.answer(path, Number(req.headers["sluice-attempt"] ?? 0));
      let json: unknown = null;
      try {
        json = JSON.parse(body);
      } catch {}
      r.received.push({ path, headers: req.headers, body, json, answered, at: Date.now() });
      res.statusCode = answered;
      res.end(answered < 300 ? "ok" : "not now");
      cond.changed();
    });
  });
  server.keepAliveTimeout = 100;
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  r.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return r;
}

/** The five lines of docs/webhooks.md, "Verifying a delivery", as a receiver writes them. */
export function verified(secret: string, header: string, rawBody: string, nowS: number): boolean {
  const { t, v1 } = Object.fromEntries(header.split(",").map((kv) => kv.split("=")));
  const mac = createHmac("sha256", secret).update(`${t}.${rawBody}`).digest();
  const given = Buffer.from(v1 ?? "", "hex");
  return (
    given.length === mac.length && timingSafeEqual(given, mac) && Math.abs(nowS - Number(t)) < 300
  );
}
