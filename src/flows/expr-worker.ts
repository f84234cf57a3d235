/**
 * An expression process (expr-pool.ts): runs the jobs it is sent one at a time, in order, and
 * answers each. Everything a tenant's expression can do to a process happens here, where the
 * service can stop it (docs/security.md, "Flow expressions").
 */
import { createEvaluator } from "./expr.ts";
import { answerJob, type Job } from "./expr-jobs.ts";

const send = process.send?.bind(process);
if (send === undefined) throw new Error("expr-worker.ts runs as a child of the service (IPC)");
const timeoutMs = Number(process.argv[2]);
const ev = createEvaluator({ timeoutMs, depth: Number(process.argv[3]) });

// Without the service there is nobody to answer: a parent that died (even SIGKILL) closes the
// channel, and this process goes with it.
process.on("disconnect", () => process.exit(0));

// One job at a time: the pool times the oldest unanswered job as the one running.
let chain = Promise.resolve();
process.on("message", (m: { id: number; job: Job }) => {
  chain = chain.then(async () => {
    const answer = await answerJob(ev, m.job);
    try {
      send({ id: m.id, answer });
    } catch (err) {
      // A value that is not data (a JSONata function, say) cannot leave this process.
      const what =
        err instanceof Error && err.name === "DataCloneError" ? "a function?" : String(err);
      send({
        id: m.id,
        answer: { ok: false, message: `the expression's value is not JSON data (${what})` },
      });
    }
  });
});
// Jobs are timed from here on: loading this process is not their time.
send({ ready: true });
