import type { DatabaseSync } from "node:sqlite";
import { Worker } from "node:worker_threads";

/**
 * Moves WAL checkpoints off the event loop. The main connection stops checkpointing by itself
 * (`wal_autocheckpoint = 0`) and a worker thread with its own connection runs a passive
 * checkpoint every `intervalMs`, which never blocks writers. Measured with insertRun on this VM:
 * p99 4.8 ms and max 14 ms with automatic checkpoints (every ~110 run inserts one commit copies
 * and fsyncs 1000 pages), about 0.3 ms with this. Should the worker fail, the main connection
 * checkpoints automatically again.
 */
export function startCheckpointer(
  raw: DatabaseSync,
  file: string,
  intervalMs = 100,
): { stop(): Promise<void> } {
  raw.exec("PRAGMA wal_autocheckpoint = 0; PRAGMA journal_size_limit = 67108864;");
  const worker = new Worker(new URL("./sqlite-checkpoint-worker.ts", import.meta.url), {
    workerData: { file, intervalMs },
  });
  worker.unref(); // never what keeps a running process alive (stop() refs it until it ends)
  let stopped = false;
  let exited = false;
  const exit = new Promise<void>((resolve) => worker.once("exit", () => resolve()));
  const fallBack = () => {
    if (!stopped && raw.isOpen) raw.exec("PRAGMA wal_autocheckpoint = 1000;");
  };
  worker.on("error", fallBack);
  worker.on("exit", () => {
    exited = true;
    fallBack();
  });
  return {
    /**
     * Resolves once the worker has closed its connection and ended. Until then the file is still
     * open: not waiting for this let the worker's connection, closing last, run SQLite's
     * close-time checkpoint under an exclusive lock while a restarted store opened the same file,
     * whose first statement then failed with "database is locked".
     */
    stop() {
      if (!stopped && !exited) {
        // Ref'd while stopping so that a process shutting down waits for the connection to close.
        worker.ref();
        worker.postMessage({ stop: true });
      }
      stopped = true;
      return exit; // already resolved if the worker had ended by itself
    },
  };
}
