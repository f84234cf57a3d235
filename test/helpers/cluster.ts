import assert from "node:assert/strict";
import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { DF } from "./flows.ts";
import { startPostgres } from "./pg.ts";
import { killHard, startProcess } from "./process.ts";
import { scopeHeaders } from "./server.ts";
import { type PgRuns, pgRuns } from "./wait.ts";

/**
 * A cluster of real `sluice` processes for a test file (docs/cluster.md): a fresh database in the
 * test process's throwaway PostgreSQL, API and worker processes on it, each with a data directory
 * of its own, and one `stop` that kills them all and removes what they left.
 */

/** A started `sluice` process. */
export type Proc = Awaited<ReturnType<typeof startProcess>>;

/**
 * What a process is started as: `api` is `sluice serve` with `SLUICE_ROLE=api`, `worker` is
 * `sluice worker`, `all` is `sluice serve` taking both parts.
 */
export type Role = "api" | "worker" | "all";

/** Heartbeats every 200 ms, a node taken for dead 2 s after its last (docs/cluster.md). */
export const HEARTBEAT_MS = 200;
export const HEARTBEAT_TIMEOUT_MS = 2000;
/** The environment of nodes that beat so, with one prefork zygote each. */
export const QUICK_NODES = {
  HEARTBEAT_MS: String(HEARTBEAT_MS),
  HEARTBEAT_TIMEOUT_MS: String(HEARTBEAT_TIMEOUT_MS),
  SCRIPT_PREFORK: "1",
};

/** The test scope's headers, for a JSON body. */
export const H = { ...scopeHeaders(), "content-type": "application/json" };

/** The envelope every endpoint answers (docs/errors.md). */
export interface Envelope {
  status: boolean;
  code: number;
  data: unknown;
  message: string;
}

/** POSTs `body` as JSON with the test scope's headers; the envelope answered. */
export async function post(url: string, body: unknown): Promise<Envelope> {
  const res = await fetch(url, { method: "POST", headers: H, body: JSON.stringify(body) });
  return (await res.json()) as Envelope;
}

/** POSTs to `proc`'s `/dataflow-3-0{p}`, with an `Idempotency-Key` when given; and the run's ID. */
export async function postTo(
  proc: Proc,
  p: string,
  body: unknown,
  key?: string,
): Promise<Envelope & { runId: string | null }> {
  const res = await fetch(`${proc.url}${DF}${p}`, {
    method: "POST",
    headers: key ? { ...H, "idempotency-key": key } : H,
    body: JSON.stringify(body),
  });
  const json = (await res.json()) as Envelope;
  return { ...json, runId: res.headers.get("x-run-id") };
}

/** Deploys `flow` as `elementName` through the API at `url` and activates it. */
export async function deployFlow(
  url: string,
  elementName: string,
  flow: unknown,
  configure: unknown = {},
  revisionName = "r",
): Promise<void> {
  const d = await post(`${url}${DF}/flow/deploy`, {
    elementName,
    revisionName,
    path: "/c",
    flow,
    configure,
  });
  assert.equal(d.status, true, JSON.stringify(d));
  const a = await post(`${url}${DF}/flow/activate`, { elementName });
  assert.equal(a.data, "APPROVED", JSON.stringify(a));
}

/** input → an http node calling `url` (`{{name}}` and the like filled from the run parameter). */
export function httpCallFlow(url: string, method = "GET") {
  return {
    vertexes: [
      { id: "in", type: "input" },
      { id: "call", type: "http", config: { method, url } },
    ],
    edges: [{ source: "in", target: "call" }],
  };
}

/** `NODE_OPTIONS` that move the process's wall clock by `ms` (its monotonic clock is untouched). */
export const skewed = (ms: number) =>
  `--import=data:text/javascript,${encodeURIComponent(
    `const n = Date.now.bind(Date); Date.now = () => n() + (${ms});`,
  )}`;

/** An HTTP server on loopback, for the flows' http nodes to call. */
export interface Loopback {
  url: string;
  close(): void;
}

/** Starts a `Loopback` answering with `handler`. */
export async function listenLoopback(handler: http.RequestListener): Promise<Loopback> {
  const server = http.createServer(handler);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => server.close(),
  };
}

/** A request a flow's http node made, held unanswered: its response, and when it closed. */
export interface HeldRequest {
  res: http.ServerResponse;
  closed: Promise<void>;
}

/**
 * A `Loopback` that holds every request, by its path's name: `${url}/{{name}}` in a flow's http
 * node keeps each run executing until the test answers `held.get(name).res`, or the node gives up.
 */
export interface HeldRequests extends Loopback {
  held: Map<string, HeldRequest>;
  /** Starts a run of `elementName` with `{ name }` through `api`; its ID once its request is held. */
  run(api: Proc, name: string, elementName?: string): Promise<string>;
  /** Ends every held request, then closes the server. */
  close(): void;
}

export async function holdRequests(): Promise<HeldRequests> {
  const held = new Map<string, HeldRequest>();
  const arrived = new Map<string, () => void>();
  const server = await listenLoopback((req, res) => {
    const name = decodeURIComponent(req.url?.slice(1) ?? "");
    const closed = new Promise<void>((r) => res.once("close", () => r()));
    held.set(name, { res, closed });
    arrived.get(name)?.();
  });
  return {
    url: server.url,
    held,
    async run(api, name, elementName = "held") {
      const came = new Promise<void>((r) => arrived.set(name, r));
      const r = await post(`${api.url}${DF}/run`, { elementName, parameter: { name } });
      assert.equal(r.status, true, JSON.stringify(r));
      await came;
      return r.data as string;
    },
    close() {
      for (const h of held.values()) h.res.destroy();
      server.close();
    },
  };
}

export interface Cluster {
  databaseUrl: string;
  /** The API processes asked for at the start, in order. */
  apis: Proc[];
  /** The worker processes asked for at the start, in order. */
  workers: Proc[];
  /** Every process started so far, those started with `start` included. */
  procs: Proc[];
  /** Starts one more process on the database: `extra` is added to the cluster's environment. */
  start(role: Role, extra?: Record<string, string>): Promise<Proc>;
  /** The run records, awaited through PostgreSQL's notifications (opened once, on first call). */
  runs(): Promise<PgRuns>;
  /** Kills every process (stopped ones too), closes `runs`, removes the data directories. */
  stop(): Promise<void>;
}

/**
 * A fresh database, then `apis` API processes and `workers` worker processes started one after
 * the other, each with `env` (heartbeats, prefork and the like) and a data directory of its own.
 */
export async function startCluster(
  opts: { env?: Record<string, string>; apis?: number; workers?: number } = {},
): Promise<Cluster> {
  const databaseUrl = await (await startPostgres()).createDatabase();
  const procs: Proc[] = [];
  const dataDirs: string[] = [];
  let runs: Promise<PgRuns> | undefined;

  const start = async (role: Role, extra: Record<string, string> = {}) => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-cluster-"));
    dataDirs.push(dataDir);
    const env = { DATA_DIR: dataDir, DATABASE_URL: databaseUrl, ...opts.env, ...extra };
    const p =
      role === "worker"
        ? await startProcess(env, "worker")
        : await startProcess(role === "api" ? { ...env, SLUICE_ROLE: "api" } : env, "serve");
    procs.push(p);
    return p;
  };

  const apis: Proc[] = [];
  for (let i = 0; i < (opts.apis ?? 0); i++) apis.push(await start("api"));
  const workers: Proc[] = [];
  for (let i = 0; i < (opts.workers ?? 0); i++) workers.push(await start("worker"));

  return {
    databaseUrl,
    apis,
    workers,
    procs,
    start,
    runs: () => {
      runs ??= pgRuns(databaseUrl);
      return runs;
    },
    async stop() {
      for (const p of procs) {
        // A test may have stopped it (SIGSTOP); continued, it dies as any other.
        p.child.kill("SIGCONT");
        await killHard(p.child);
      }
      await (await runs)?.close();
      for (const d of dataDirs) fs.rmSync(d, { recursive: true, force: true });
    },
  };
}
