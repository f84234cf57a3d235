import { BlockList, isIP } from "node:net";

/**
 * Addresses an outbound call refuses when private addresses are not allowed (error handlers' bots
 * and completion webhooks, `WEBHOOK_ALLOW_PRIVATE=false`): loopback, private, shared, link-local
 * (cloud metadata), benchmark, multicast and reserved ranges of both families.
 */
const blocked = new BlockList();
for (const [net, bits] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["224.0.0.0", 4],
  ["240.0.0.0", 4],
] as const)
  blocked.addSubnet(net, bits, "ipv4");
for (const [net, bits] of [
  ["::", 127],
  ["fc00::", 7],
  ["fe80::", 10],
  ["fec0::", 10],
  ["ff00::", 8],
] as const)
  blocked.addSubnet(net, bits, "ipv6");

/** The eight 16-bit groups of an IPv6 address (a dotted IPv4 tail counts as two). */
function groups(ip: string): number[] {
  const [head = "", tail] = ip.split("::", 2);
  const part = (s: string): number[] =>
    s === ""
      ? []
      : s.split(":").flatMap((g) => {
          if (!g.includes(".")) return [Number.parseInt(g, 16)];
          const [a = 0, b = 0, c = 0, d = 0] = g.split(".").map(Number);
          return [(a << 8) | b, (c << 8) | d];
        });
  const h = part(head);
  const t = tail === undefined ? [] : part(tail);
  return [...h, ...new Array<number>(8 - h.length - t.length).fill(0), ...t];
}

const dotted = (hi: number, lo: number): string => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;

/**
 * The IPv4 address an IPv6 one carries, where the packet would reach it: IPv4-mapped
 * (`::ffff:a.b.c.d`, which `new URL` writes `::ffff:7f00:1`), IPv4-compatible, SIIT
 * (`::ffff:0:a.b.c.d`), NAT64 (`64:ff9b::/96`) and 6to4 (`2002::/16`).
 */
function embeddedV4(ip: string): string | undefined {
  const g = groups(ip);
  const zeros = (n: number) => g.slice(0, n).every((x) => x === 0);
  if (g[0] === 0x2002) return dotted(g[1] ?? 0, g[2] ?? 0);
  const v4 = dotted(g[6] ?? 0, g[7] ?? 0);
  if (zeros(5) && (g[5] === 0 || g[5] === 0xffff)) return v4;
  if (zeros(4) && g[4] === 0xffff && g[5] === 0) return v4;
  if (g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((x) => x === 0)) return v4;
  return undefined;
}

/** Whether an IP address (either family) is one a private-address rule refuses. */
export function isPrivateAddress(address: string): boolean {
  // A zone (`fe80::1%eth0`) names an interface, not another address.
  const ip = address.split("%")[0] ?? address;
  const family = isIP(ip);
  if (family === 4) return blocked.check(ip, "ipv4");
  if (family !== 6) return false;
  if (blocked.check(ip, "ipv6")) return true;
  const v4 = embeddedV4(ip);
  return v4 !== undefined && blocked.check(v4, "ipv4");
}
