import net from "node:net";

/**
 * A minimal keep-alive HTTP/1.1 client for the benches: raw sockets, one request at a time per
 * connection, responses parsed just enough (status, headers, content-length or chunked body).
 * On a 2-core machine the load generator takes CPU from the server it measures; this one costs a
 * fraction of node:http's per call, so the figures say more about the server. Every response is
 * still read whole and handed back for checking.
 */

export interface RawReply {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

interface Pending {
  resolve: (r: RawReply) => void;
  reject: (e: Error) => void;
}

class Connection {
  readonly #sock: net.Socket;
  #buf: Buffer = Buffer.alloc(0);
  #pending: Pending | undefined;
  #dead: Error | undefined;

  constructor(host: string, port: number) {
    this.#sock = net.connect({ host, port, noDelay: true });
    this.#sock.on("data", (d: Buffer) => {
      this.#buf = this.#buf.length ? Buffer.concat([this.#buf, d]) : d;
      this.#parse();
    });
    const fail = (e: Error) => {
      this.#dead = e;
      this.#pending?.reject(e);
      this.#pending = undefined;
    };
    this.#sock.on("error", fail);
    this.#sock.on("close", () => fail(new Error("connection closed")));
  }

  get usable(): boolean {
    return this.#dead === undefined;
  }

  send(head: string, body: Buffer | undefined): Promise<RawReply> {
    if (this.#dead) return Promise.reject(this.#dead);
    return new Promise((resolve, reject) => {
      this.#pending = { resolve, reject };
      this.#sock.write(body ? Buffer.concat([Buffer.from(head), body]) : head);
    });
  }

  #parse(): void {
    const end = this.#buf.indexOf("\r\n\r\n");
    if (end < 0 || !this.#pending) return;
    const lines = this.#buf.subarray(0, end).toString("latin1").split("\r\n");
    const status = Number(lines[0]?.split(" ")[1]);
    const headers: Record<string, string> = {};
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(":");
      headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
    }
    let body: Buffer;
    let rest: number;
    if (headers["transfer-encoding"] === "chunked") {
      const parts: Buffer[] = [];
      let at = end + 4;
      for (;;) {
        const nl = this.#buf.indexOf("\r\n", at);
        if (nl < 0) return;
        const size = Number.parseInt(this.#buf.subarray(at, nl).toString("latin1"), 16);
        if (this.#buf.length < nl + 2 + size + 2) return;
        if (size === 0) {
          rest = nl + 4;
          break;
        }
        parts.push(this.#buf.subarray(nl + 2, nl + 2 + size));
        at = nl + 2 + size + 2;
      }
      body = Buffer.concat(parts);
    } else {
      const length = Number(headers["content-length"] ?? 0);
      if (this.#buf.length < end + 4 + length) return;
      body = this.#buf.subarray(end + 4, end + 4 + length);
      rest = end + 4 + length;
    }
    this.#buf = this.#buf.subarray(rest);
    const p = this.#pending;
    this.#pending = undefined;
    p.resolve({ status, headers, body });
  }
}

/** A pool of keep-alive connections to one host, grown to the callers' concurrency. */
export class HttpClient {
  readonly #idle = new Map<string, Connection[]>();

  async request(
    method: string,
    url: string,
    body: string | undefined,
    headers: Record<string, string>,
  ): Promise<RawReply> {
    const u = new URL(url);
    const bytes = body === undefined ? undefined : Buffer.from(body);
    let head = `${method} ${u.pathname}${u.search} HTTP/1.1\r\nhost: ${u.host}\r\n`;
    for (const [k, v] of Object.entries(headers)) head += `${k}: ${v}\r\n`;
    head += `content-length: ${bytes?.length ?? 0}\r\n\r\n`;
    const idle = this.#idle.get(u.host) ?? [];
    this.#idle.set(u.host, idle);
    let conn = idle.pop();
    while (conn && !conn.usable) conn = idle.pop();
    conn ??= new Connection(u.hostname, Number(u.port || 80));
    const reply = await conn.send(head, bytes);
    if (reply.headers.connection !== "close") idle.push(conn);
    return reply;
  }
}
