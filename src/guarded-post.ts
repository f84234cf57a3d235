import dns from "node:dns";
import http from "node:http";
import https from "node:https";
import { isIP, type LookupFunction } from "node:net";
import { isPrivateAddress } from "./private-address.ts";

/** The one name resolution an outbound call makes; replaceable in tests. */
export type Resolve = (host: string) => Promise<dns.LookupAddress[]>;

const systemResolve: Resolve = (host) => dns.promises.lookup(host, { all: true });

export interface GuardedPost {
  url: URL;
  headers: Record<string, string>;
  body: string;
  /** Ends the whole exchange: connecting, sending and reading the answer. */
  signal: AbortSignal;
  /** False: loopback, private, link-local and reserved addresses are refused (src/private-address.ts). */
  allowPrivate: boolean;
  /** The answer is read this far and no further. */
  maxAnswerBytes: number;
  /** The error a refused address fails with (the caller's own type and language). */
  refuse: (host: string) => Error;
  resolve?: Resolve;
}

export interface PostAnswer {
  status: number;
  /** The first `maxAnswerBytes` of the answer, as text. */
  body: string;
}

/**
 * Resolves the name once and connects to what was checked: a name whose answer changes between
 * a check and the connection (DNS rebinding) cannot reach a private address. Node calls `lookup`
 * for a name only; an address literal is checked before the request.
 */
export function checkedLookup(
  o: Pick<GuardedPost, "refuse" | "resolve"> & { blocked?: (address: string) => boolean },
): LookupFunction {
  const resolve = o.resolve ?? systemResolve;
  const blocked = o.blocked ?? isPrivateAddress;
  return (hostname, options, callback) => {
    resolve(hostname).then(
      (found) => {
        const usable = found.filter((a) => !options.family || a.family === options.family);
        if (usable.length === 0 || usable.some((a) => blocked(a.address)))
          return callback(o.refuse(hostname), "", 0);
        if (options.all) return callback(null, usable);
        const first = usable[0] as dns.LookupAddress;
        callback(null, first.address, first.family);
      },
      (err: NodeJS.ErrnoException) => callback(err, "", 0),
    );
  };
}

/**
 * One POST, no redirect followed (a 3xx is answered as it is), for the outbound calls of error
 * handlers' bots and completion webhooks (docs/webhooks.md, docs/error-handlers.md).
 */
export function postGuarded(o: GuardedPost): Promise<PostAnswer> {
  const host = o.url.hostname.replace(/^\[|\]$/g, "");
  if (!o.allowPrivate && isIP(host) && isPrivateAddress(host))
    return Promise.reject(o.refuse(host));
  const send = o.url.protocol === "https:" ? https.request : http.request;
  return new Promise<PostAnswer>((resolve, reject) => {
    const req = send(o.url, {
      method: "POST",
      headers: { ...o.headers, "content-length": String(Buffer.byteLength(o.body)) },
      signal: o.signal,
      ...(o.allowPrivate ? {} : { lookup: checkedLookup(o) }),
    });
    req.on("error", reject);
    req.on("response", (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      const done = () => {
        resolve({
          status: res.statusCode ?? 0,
          body: Buffer.concat(chunks).toString("utf8"),
        });
        res.destroy();
      };
      res.on("error", reject);
      res.on("data", (chunk: Buffer) => {
        const room = o.maxAnswerBytes - size;
        chunks.push(chunk.subarray(0, Math.max(0, room)));
        size += chunk.length;
        if (size >= o.maxAnswerBytes) done();
      });
      res.on("end", done);
    });
    req.end(o.body);
  });
}
