import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { startProcess } from "../test/helpers/process.ts";
import { HttpClient } from "./http-client.ts";

/** Shared bench plumbing: a real server process on loopback and a closed-loop load generator. */

export interface Figures {
  concurrency: number;
  count: number;
  p50: number;
  p99: number;
  perSecond: number;
  /** Busy CPU of the whole machine (all processes, user + system) per call, in ms. */
  cpuMs: number;
}

/**
 * Busy CPU time of the whole machine so far, in ms, from /proc/stat (user, nice, system, irq,
 * softirq; not idle, iowait or steal). Steadier than throughput on a shared VM: it counts the
 * work a call costs, whatever the host lets the VM run at that moment.
 */
export function machineBusyMs(): number {
  const line = fs.readFileSync("/proc/stat", "utf8").split("\n", 1)[0] ?? "";
  const [user, nice, system, , , irq, softirq] = line.split(/\s+/).slice(1).map(Number);
  const tick = 1000 / 100; // USER_HZ is 100 on Linux
  return ((user ?? 0) + (nice ?? 0) + (system ?? 0) + (irq ?? 0) + (softirq ?? 0)) * tick;
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}

/** Runs `count` calls of `fn` with `concurrency` callers in a closed loop; latencies in ms. */
export async function load(
  concurrency: number,
  count: number,
  fn: (i: number) => Promise<void>,
): Promise<Figures> {
  const latencies: number[] = [];
  let next = 0;
  const busy0 = machineBusyMs();
  const started = performance.now();
  const worker = async () => {
    while (next < count) {
      const i = next++;
      const t0 = performance.now();
      await fn(i);
      latencies.push(performance.now() - t0);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const elapsed = (performance.now() - started) / 1000;
  const cpuMs = (machineBusyMs() - busy0) / count;
  latencies.sort((a, b) => a - b);
  return {
    concurrency,
    count,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    perSecond: count / elapsed,
    cpuMs,
  };
}

export function row(label: string, f: Figures): string {
  return `${label.padEnd(34)} c=${String(f.concurrency).padStart(2)}  n=${String(f.count).padStart(5)}  p50=${f.p50.toFixed(2).padStart(7)} ms  p99=${f.p99.toFixed(2).padStart(7)} ms  ${f.perSecond.toFixed(0).padStart(6)}/s  cpu ${f.cpuMs.toFixed(2)} ms/call`;
}

export async function startBenchServer(env: Record<string, string> = {}) {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-bench-"));
  const server = await startProcess({ DATA_DIR: dataDir, LOG_LEVEL: "error", ...env });
  return {
    url: server.url,
    pid: server.child.pid as number,
    async stop() {
      server.child.kill("SIGTERM");
      await new Promise((r) => server.child.once("exit", r));
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export const HEADERS = {
  app: "bench",
  space: "s1",
  user: "bench",
  "content-type": "application/json",
};

// A raw-socket keep-alive client (bench/http-client.ts): on a 2-core machine the load generator
// takes CPU from the server it measures, and this one takes far less than node:http or fetch.
const client = new HttpClient();

export interface HttpReply {
  status: number;
  headers: Record<string, string>;
  json: unknown;
}

export async function httpJson(
  method: string,
  url: string,
  body?: string,
  headers: Record<string, string> = HEADERS,
): Promise<HttpReply> {
  const res = await client.request(method, url, body, headers);
  return { status: res.status, headers: res.headers, json: JSON.parse(res.body.toString("utf8")) };
}

export function postJson(
  url: string,
  body: unknown,
  headers: Record<string, string> = HEADERS,
): Promise<HttpReply> {
  return httpJson("POST", url, JSON.stringify(body), headers);
}

export async function uploadScript(
  base: string,
  name: string,
  code: string,
  folder = "/bench",
): Promise<void> {
  const form = new FormData();
  form.append("path", folder);
  form.append("batchFile", new Blob([code]), `${name}.py`);
  const res = await fetch(`${base}/script/file/batch-upload`, {
    method: "POST",
    body: form,
    headers: { app: HEADERS.app, space: HEADERS.space, user: HEADERS.user },
  });
  const body = (await res.json()) as { data: { status: number }[] };
  if (body.data[0]?.status !== 0)
    throw new Error(`upload of ${name} failed: ${JSON.stringify(body)}`);
}
