import { hostname } from "node:os";
import type { Logger } from "pino";
import { systemClock, type Clock } from "./clock.ts";
import type { Config } from "./config.ts";
import { createFlowLifecycle, type FlowLifecycle } from "./flows/lifecycle.ts";
import { createLocalQueue } from "./queue/local-queue.ts";
import type { RunQueue } from "./queue/types.ts";
import { createFlowRuns, type FlowRuns } from "./runs/flow-runs.ts";
import { createRunEvents, type RunEvents } from "./runs/run-events.ts";
import { createPythonRunner } from "./scripts/python-runner.ts";
import type { ScriptRunner } from "./scripts/runner-types.ts";
import { createTaskService, type TaskService } from "./scripts/task-service.ts";
import { openStore, type OpenedStore } from "./store/open-store.ts";

export interface Services {
  config: Config;
  clock: Clock;
  logger: Logger;
  store: OpenedStore;
  runner: ScriptRunner;
  events: RunEvents;
  queue: RunQueue;
  tasks: TaskService;
  lifecycle: FlowLifecycle;
  flows: FlowRuns;
  close(): Promise<void>;
}

/**
 * Builds every long-lived part from the configuration, in dependency order. main.ts and the
 * integration tests both use it, so the tests exercise the real wiring.
 */
export async function createServices(opts: { config: Config; logger: Logger; clock?: Clock }): Promise<Services> {
  const { config, logger } = opts;
  const clock = opts.clock ?? systemClock;
  const nodeId = `${hostname()}:${process.pid}`;
  const store = await openStore(config);
  const runner = await createPythonRunner({ config, logger });
  const events = createRunEvents({ clock });
  const queue = createLocalQueue({
    bound: config.limits.queuedRuns,
    concurrency: { flow: config.limits.flowRunsAtOnce, script: config.python.concurrency },
  });
  const tasks = createTaskService({ config, store, runner, queue, events, clock, logger, nodeId });

  const lifecycle = createFlowLifecycle({ store, clock, config });
  const flows = createFlowRuns({ config, store, runner, queue, events, clock, logger, nodeId });

  const recoveredTasks = await tasks.recover();
  const recoveredRuns = await flows.recover();
  if (recoveredTasks.failed || recoveredTasks.requeued || recoveredRuns.failed || recoveredRuns.requeued) {
    logger.info({ tasks: recoveredTasks, flows: recoveredRuns }, "recovered unfinished runs");
  }
  await queue.start((job) => (job.kind === "script" ? tasks.execute(job.runId) : flows.execute(job.runId)));

  return {
    config,
    clock,
    logger,
    store,
    runner,
    events,
    queue,
    tasks,
    lifecycle,
    flows,
    async close() {
      await queue.stop();
      await runner.close();
      await store.close();
    },
  };
}
