import { Worker } from "node:worker_threads";
import { createTurns } from "../turns.ts";
import type { MonitorMethods } from "./kysely-monitor.ts";
import type { Scope } from "./model.ts";
import type { ReadAnswer, ReadCall } from "./sqlite-reader-worker.ts";

interface Job {
  owner: Scope;
  call: Omit<ReadCall, "id">;
  resolve(value: unknown): void;
  reject(err: Error): void;
}

/** listFlows of every scope (an operator's call) takes its turns as a tenant of its own. */
const EVERY_SCOPE: Scope = { app: "", space: "" };

/**
 * Monitoring's reads of the SQLite store, on a thread with its own connection (docs/security.md,
 * "Monitoring reads"). node:sqlite answers on the calling thread: a text search over a flow of a
 * million runs held the event loop, and so every tenant's requests, for up to a second. Calls
 * wait here and take turns between tenants (src/turns.ts), one at a time on the thread; WAL lets
 * it read beside the service's writes, and a read sees every commit made before it was called.
 * The thread starts with the first call, or before it with warm(), and a new one replaces it
 * should it end.
 */
export function createSqliteReader(
  file: string,
): MonitorMethods & { warm(): void; stop(): Promise<void> } {
  const turns = createTurns<Job>();
  let worker: Worker | undefined;
  let running: (Job & { id: number }) | undefined;
  let ids = 0;
  let stopped = false;
  const ending = new Map<Worker, Promise<void>>();

  const settle = (answer: ReadAnswer | Error) => {
    const job = running;
    if (!job) return;
    running = undefined;
    turns.settle(job.owner);
    if (answer instanceof Error) job.reject(answer);
    else if ("error" in answer) job.reject(new Error(answer.error));
    else job.resolve(answer.value);
    pump();
  };
  const start = (): Worker => {
    const w = new Worker(new URL("./sqlite-reader-worker.ts", import.meta.url), {
      workerData: { file },
    });
    // Every thread started, until it has ended: one that failed may still hold the file open, and
    // the store is closed only once none does.
    const exit = new Promise<void>((resolve) => w.once("exit", () => resolve()));
    ending.set(w, exit);
    void exit.then(() => ending.delete(w));
    w.on("message", (answer: ReadAnswer) => {
      if (answer.id === running?.id) settle(answer);
    });
    w.on("error", (err) => {
      if (worker === w) worker = undefined;
      settle(new Error(`monitoring read failed: ${err.message}`));
    });
    w.on("exit", (code) => {
      if (worker !== w) return;
      worker = undefined;
      settle(new Error(`monitoring reader ended (exit code ${code})`));
    });
    return w;
  };
  function pump(): void {
    // Once stopped, stop() holds the thread ref'd until it ends: a process with nothing else to
    // do would otherwise exit while the connection is still open and close() never resolve.
    if (stopped || running) return;
    const job = turns.take();
    if (!job) {
      worker?.unref(); // an idle reader never keeps the process alive
      return;
    }
    worker ??= start();
    worker.ref();
    running = { ...job, id: ++ids };
    worker.postMessage({ ...job.call, id: running.id } satisfies ReadCall);
  }
  const read = <T>(owner: Scope, method: ReadCall["method"], args: unknown[]) =>
    new Promise<T>((resolve, reject) => {
      if (stopped) return reject(new Error("the store is closed"));
      turns.add(owner, {
        owner,
        call: { method, args },
        resolve: resolve as Job["resolve"],
        reject,
      });
      pump();
    });

  return {
    monitorRuns: (scope, elementId, query) => read(scope, "monitorRuns", [scope, elementId, query]),
    monitorFlows: (scope) => read(scope, "monitorFlows", [scope]),
    listFlows: (scope) => read(scope ?? EVERY_SCOPE, "listFlows", [scope]),
    warm() {
      if (stopped || worker) return;
      worker = start();
      if (!running) worker.unref();
    },
    async stop() {
      stopped = true;
      for (const job of turns.drain()) job.reject(new Error("the store is closed"));
      // Taken after the running call, if any, which is answered first.
      worker?.postMessage({ stop: true });
      for (const w of ending.keys()) w.ref();
      await Promise.all(ending.values());
    },
  };
}
