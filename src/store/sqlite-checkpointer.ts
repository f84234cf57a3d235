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
): { stop(): void } {
  raw.exec("PRAGMA wal_autocheckpoint = 0; PRAGMA journal_size_limit = 67108864;");
  const worker = new Worker(new URL("./sqlite-checkpoint-worker.ts", import.meta.url), {
    workerData: { file, intervalMs },
  });
  worker.unref(); // never what keeps the process alive
  let stopped = false;
  const fallBack = () => {
    if (!stopped && raw.isOpen) raw.exec("PRAGMA wal_autocheckpoint = 1000;");
  };
  worker.on("error", fallBack);
  worker.on("exit", fallBack);
  return {
    /** The worker closes its connection shortly after; SQLite copes with either closing first. */
    stop() {
      if (stopped) return;
      stopped = true;
      worker.postMessage({ stop: true });
    },
  };
}
