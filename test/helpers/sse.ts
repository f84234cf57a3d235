/** A Server-Sent Events client for tests: every message kept, and waits for one that matches. */
export interface SseMessage {
  event: string;
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary JSON.
  data: any;
  id?: number;
}

export interface SseClient {
  status: number;
  contentType: string | null;
  messages: SseMessage[];
  /** Resolves with the first message (kept or to come) that matches; rejects after `ms`. */
  next(match: (m: SseMessage) => boolean, ms?: number): Promise<SseMessage>;
  /** Resolves when the server ended the stream. */
  closed: Promise<void>;
  abort(): void;
}

export async function openSse(url: string, headers: Record<string, string>): Promise<SseClient> {
  const ctl = new AbortController();
  const res = await fetch(url, { headers, signal: ctl.signal });
  const messages: SseMessage[] = [];
  const waiters: { match: (m: SseMessage) => boolean; resolve: (m: SseMessage) => void }[] = [];
  const closed = (async () => {
    if (!res.body) return;
    const decoder = new TextDecoder();
    let buf = "";
    try {
      for await (const chunk of res.body) {
        buf += decoder.decode(chunk, { stream: true });
        for (let end = buf.indexOf("\n\n"); end >= 0; end = buf.indexOf("\n\n")) {
          const block = buf.slice(0, end);
          buf = buf.slice(end + 2);
          const m = parse(block);
          if (!m) continue;
          messages.push(m);
          for (const w of [...waiters])
            if (w.match(m)) {
              waiters.splice(waiters.indexOf(w), 1);
              w.resolve(m);
            }
        }
      }
    } catch {
      // aborted by the test
    }
  })();
  return {
    status: res.status,
    contentType: res.headers.get("content-type"),
    messages,
    closed,
    abort: () => ctl.abort(),
    next(match, ms = 60_000) {
      const seen = messages.find(match);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const t = setTimeout(
          () => reject(new Error(`no matching event in ${ms} ms: ${JSON.stringify(messages)}`)),
          ms,
        );
        waiters.push({
          match,
          resolve: (m) => {
            clearTimeout(t);
            resolve(m);
          },
        });
      });
    },
  };
}

function parse(block: string): SseMessage | undefined {
  let event = "message";
  let data = "";
  let id: number | undefined;
  for (const line of block.split("\n")) {
    if (line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = line.slice(0, colon);
    const value = line.slice(colon + 1).replace(/^ /, "");
    if (field === "event") event = value;
    else if (field === "data") data += value;
    else if (field === "id") id = Number(value);
  }
  if (!data) return undefined;
  return { event, data: JSON.parse(data), ...(id !== undefined ? { id } : {}) };
}
