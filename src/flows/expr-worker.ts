/**
 * An expression process (expr-pool.ts): runs the jobs it is sent one at a time, in order, and
 * answers each. Everything a tenant's expression can do to a process happens here, where the
 * service can stop it (docs/security.md, "Flow expressions").
 */
import { Worker } from "node:worker_threads";
import { errorText } from "../errors.ts";
import { createEvaluator } from "./expr.ts";
import { type Job, runJob } from "./expr-jobs.ts";
import { tooLarge } from "./expr-size.ts";

const send = process.send?.bind(process);
if (send === undefined) throw new Error("expr-worker.ts runs as a child of the service (IPC)");
const [timeoutMs, depth, maxChars] = process.argv.slice(2).map(Number) as [number, number, number];
const ev = createEvaluator({ timeoutMs, depth });

// Without the service there is nobody to answer: a parent that died (even SIGKILL) closes the
// channel, and this process goes with it.
process.on("disconnect", () => process.exit(0));
// A job in one native step (a regular expression) keeps this thread from ever seeing that event,
// and the service that would have killed it is gone: a thread of its own watches the parent.
new Worker(new URL("./expr-parent-watch.ts", import.meta.url), {
  workerData: { parent: process.ppid },
}).unref();

/**
 * The value goes back as JSON text, measured here: a value that refers to one part many times is
 * small in memory and enormous once written out, and the service must never be the one to find
 * out. Writing it out is this process's time, under the service's watch.
 */
async function answer(job: Job) {
  let value: unknown;
  try {
    value = await runJob(ev, job);
  } catch (err) {
    return { ok: false, message: errorText(err) };
  }
  try {
    const json = JSON.stringify(value);
    if (json !== undefined && json.length > maxChars)
      return {
        ok: false,
        message: tooLarge(
          `the value of the node's expressions is ${json.length} characters as JSON,`,
          maxChars,
        ).message,
      };
    return { ok: true, json };
  } catch (err) {
    // A JSONata function refers to its own scope: it is not data.
    return {
      ok: false,
      message: `the value of the node's expressions is not JSON data: ${errorText(err)}`,
    };
  }
}

// One job at a time: the pool times the oldest unanswered job as the one running. An answer is
// written out by this process's event loop, which the next job (another tenant's, sent ahead)
// may hold for good in a native step: it starts once the answer is all written.
let chain = Promise.resolve();
process.on("message", (m: { id: number; job: Job }) => {
  chain = chain.then(async () => {
    const a = await answer(m.job);
    await new Promise<void>((written) =>
      send({ id: m.id, answer: a }, undefined, {}, () => written()),
    );
  });
});
// Jobs are timed from here on: loading this process is not their time.
send({ ready: true });
