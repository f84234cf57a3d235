/**
 * A thread of an expression process (expr-worker.ts) that ends the process once the service that
 * started it is gone. The process's own thread may be inside one native step (a regular
 * expression) for as long as that takes, and never see its IPC channel close.
 */
import { workerData } from "node:worker_threads";

const parent = (workerData as { parent: number }).parent;
// The real timer: this thread has no clock to be given, and its period is no logic to test.
setInterval(() => {
  if (process.ppid !== parent) process.kill(process.pid, "SIGKILL");
}, 1000);
