import { isIP } from "node:net";
import { Agent, buildConnector } from "undici";
import { checkedLookup, type Resolve } from "./guarded-post.ts";
import { isPrivateAddress } from "./private-address.ts";

/**
 * The fetch of flow http nodes (docs/flow-graph.md, "http"). With private addresses allowed, the
 * platform's own fetch. Without, every connection it makes (the first and each redirect's) goes
 * through a connector that refuses a loopback, private, link-local or reserved address
 * (src/private-address.ts): an address literal before connecting, a name by the one resolution
 * it connects with, so a name whose answer changes between a check and the connection (DNS
 * rebinding) cannot reach such an address either.
 */
export function outboundFetch(o: {
  allowPrivate: boolean;
  /** The error a refused address fails with. */
  refuse: (host: string) => Error;
  resolve?: Resolve;
  /** Which addresses are refused; tests narrow it to reach a loopback server as if public. */
  blocked?: (address: string) => boolean;
}): typeof fetch {
  if (o.allowPrivate) return globalThis.fetch;
  const blocked = o.blocked ?? isPrivateAddress;
  const connect = buildConnector({ lookup: checkedLookup({ ...o, blocked }) });
  const dispatcher = new Agent({
    connect(opts, callback) {
      const host = opts.hostname.replace(/^\[|\]$/g, "");
      if (isIP(host) !== 0 && blocked(host)) {
        callback(o.refuse(host), null);
        return;
      }
      connect(opts, callback);
    },
  });
  return (input, init) => globalThis.fetch(input, { ...init, dispatcher } as RequestInit);
}
