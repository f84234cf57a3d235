import net from "node:net";

/** What came back for one raw HTTP/1.1 request. */
export interface RawAnswer {
  /** No status line within the time bound. */
  timedOut: boolean;
  /** The server closed the connection before a complete answer. */
  closedEarly: boolean;
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

/**
 * Sends exactly `head` + `body` on a fresh connection (nothing is fixed up: lying lengths,
 * odd header bytes and broken framing reach the server as written) and reads one answer.
 * Clients like fetch refuse to send much of what a fuzzer needs, hence the raw socket.
 */
export function rawRequest(
  port: number,
  head: string,
  body: Buffer,
  timeoutMs: number,
): Promise<RawAnswer> {
  return new Promise((resolve) => {
    const sock = net.connect(port, "127.0.0.1");
    const chunks: Buffer[] = [];
    let done = false;
    const finish = (timedOut: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.destroy();
      resolve({ timedOut, ...parseAnswer(Buffer.concat(chunks)) });
    };
    const timer = setTimeout(() => finish(true), timeoutMs);
    sock.on("data", (d: Buffer) => {
      chunks.push(d);
      if (parseAnswer(Buffer.concat(chunks)).closedEarly === false) finish(false);
    });
    // A reset after the answer was sent is the server's right (it may close on unread data).
    sock.on("error", () => finish(false));
    sock.on("close", () => finish(false));
    sock.write(head);
    // No half-close: a server may treat it as the client giving up on the answer.
    sock.write(body);
  });
}

function parseAnswer(buf: Buffer): Omit<RawAnswer, "timedOut"> {
  const empty = { closedEarly: true, status: 0, headers: {}, body: Buffer.alloc(0) };
  const end = buf.indexOf("\r\n\r\n");
  if (end < 0) return empty;
  const lines = buf.subarray(0, end).toString("latin1").split("\r\n");
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? "")?.[1] ?? 0);
  const headers: Record<string, string> = {};
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(":");
    if (colon > 0) headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
  }
  const rest = buf.subarray(end + 4);
  if (headers["transfer-encoding"]?.toLowerCase() === "chunked") {
    const body = dechunk(rest);
    return body ? { closedEarly: false, status, headers, body } : { ...empty, status, headers };
  }
  const length = Number(headers["content-length"] ?? 0);
  if (rest.length < length) return { ...empty, status, headers };
  return { closedEarly: false, status, headers, body: rest.subarray(0, length) };
}

function dechunk(buf: Buffer): Buffer | null {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const eol = buf.indexOf("\r\n", at);
    if (eol < 0) return null;
    const size = Number.parseInt(buf.subarray(at, eol).toString("latin1"), 16);
    if (Number.isNaN(size)) return null;
    if (size === 0) return Buffer.concat(parts);
    if (buf.length < eol + 2 + size + 2) return null;
    parts.push(buf.subarray(eol + 2, eol + 2 + size));
    at = eol + 2 + size + 2;
  }
}
