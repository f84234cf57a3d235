/**
 * Checkpoints the WAL of one SQLite database from a thread of its own (see sqlite-checkpointer.ts).
 * A checkpoint copies pages into the database file and fsyncs it: milliseconds that, left to
 * SQLite's automatic checkpoint, would block the event loop inside some unlucky commit.
 */
import { DatabaseSync } from "node:sqlite";
import { parentPort, workerData } from "node:worker_threads";

const { file, intervalMs } = workerData as { file: string; intervalMs: number };
const db = new DatabaseSync(file);
db.exec("PRAGMA busy_timeout = 1000;");
const checkpoint = db.prepare("PRAGMA wal_checkpoint(PASSIVE)");

// The real timer: a worker thread is given no injected clock, and its period is not logic to test.
setInterval(() => {
  try {
    checkpoint.get();
  } catch (err) {
    // Busy now and then is expected; anything else means the main thread must take over.
    // node:sqlite reports it as errcode 5 (or an extended BUSY code), "database is locked".
    if (((err as { errcode?: number }).errcode ?? 0) % 256 !== 5) {
      parentPort?.postMessage({ failed: String(err) });
      db.close(); // the file must not stay open past the worker, whatever the reason it ends
      process.exit(1);
    }
  }
}, intervalMs);

parentPort?.on("message", (m: { stop?: boolean }) => {
  if (!m.stop) return;
  db.close();
  process.exit(0);
});
