import fs from "node:fs";
import { buildApp } from "./app.ts";
import { type Config, loadConfig } from "./config.ts";
import { StartupError } from "./errors.ts";
import { heldRequestsWarning, openFilesLimit } from "./http/open-files.ts";
import { createLogger } from "./logger.ts";
import { waitForRunEnd } from "./runs/wait.ts";
import { createServices, type Services } from "./services.ts";

/**
 * `sluice serve`: wires everything, listens, and shuts down gracefully on SIGTERM/SIGINT. What
 * stops the start (a bad setting, an unwritable DATA_DIR, an unreachable database, an address in
 * use) is one line on stderr naming it, and exit status 1 (docs/operations.md, "Start-up").
 */
export async function serve(role?: Config["role"]): Promise<void> {
  try {
    await start(role);
  } catch (err) {
    if (!(err instanceof StartupError)) throw err;
    process.stderr.write(`sluice: cannot start: ${err.message}\n`);
    process.exit(1);
  }
}

async function start(role: Config["role"] | undefined): Promise<void> {
  const config = loadConfig();
  if (role) config.role = role;
  checkDataDir(config.dataDir);
  const logger = createLogger(config.logLevel);
  // Not a way to survive bad input (every stream handles its own errors, and the fuzz suite
  // shows no request gets here: docs/errors.md); a bug that does get here leaves state unknown,
  // so it is logged and the process exits for its supervisor to restart it.
  process.on("uncaughtException", (err, origin) => {
    logger.fatal({ err, origin }, "uncaught exception: exiting");
    process.exit(1);
  });
  const services = await createServices({ config, logger });
  const app = await buildApp(services);

  if (config.auth.mode === "off" && !["127.0.0.1", "::1", "localhost"].includes(config.host)) {
    logger.warn(
      { host: config.host },
      "auth is off and the service listens beyond loopback: anyone who can reach it acts as any app",
    );
  }
  const openFiles = heldRequestsWarning(config.limits.heldRequests, openFilesLimit());
  if (openFiles) logger.warn(openFiles);
  if (config.auth.mode === "signature" && Object.keys(config.auth.appSecrets).length === 0) {
    logger.warn("AUTH_MODE=signature but AUTH_APP_SECRETS is empty: no app token can be valid");
  }

  let closing = false;
  const shutdown = async (signal: string) => {
    if (closing) return;
    closing = true;
    const graceS = config.shutdownGraceS;
    logger.info({ signal, graceS }, "shutting down: no new work, waiting for running tasks");
    // Last resort if something hangs past the deadline: exit non-zero so supervisors notice.
    // The real timer, not the services' clock: it guards the process, whatever the services do.
    setTimeout(() => process.exit(1), (graceS + 15) * 1000).unref();
    app.draining = true;
    // A step that fails (the database gone, say) is logged and the later ones still run, so task
    // processes are killed and files closed; the exit status then says that something failed.
    // Unguarded, the rejection became an uncaught exception that skipped them all.
    let failed = false;
    const step = async (what: string, work: () => Promise<unknown>) => {
      try {
        await work();
      } catch (err) {
        failed = true;
        logger.error({ err }, `shutdown: ${what} failed`);
      }
    };
    const closed = step("closing the HTTP server", () => app.close());
    const deadline = services.clock.now() + graceS * 1000;
    await step("ending this node's runs", () => drain(services, graceS * 1000));
    await step("sending error notifications", () => notificationsSent(services, deadline));
    await closed;
    await step("closing the services", () => services.close());
    process.exit(failed ? 1 : 0);
  };
  process.on("SIGTERM", () => void shutdown("SIGTERM"));
  process.on("SIGINT", () => void shutdown("SIGINT"));

  let address: string;
  try {
    address = await app.listen({ port: config.port, host: config.host });
  } catch (err) {
    await services.close();
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== "EADDRINUSE" && code !== "EACCES" && code !== "EADDRNOTAVAIL") throw err;
    throw new StartupError(
      `cannot listen on HOST "${config.host}" PORT ${config.port}: ${(err as Error).message}`,
    );
  }
  logger.info(
    {
      mode: services.topology.mode,
      role: config.role,
      node: services.nodeId,
      sandbox: services.runner.sandbox,
      cgroup: services.runner.cgroup,
      dataDir: config.dataDir,
    },
    "sluice is ready",
  );
  // Whatever LOG_LEVEL says, one line on stderr once it listens: what a supervisor or a script
  // (the tests among them) waits for instead of asking /health again and again
  // (docs/operations.md, "Start-up").
  // A supervisor may have closed our stderr (EPIPE), or it goes to a full disk (ENOSPC): the write
  // then fails as an 'error' event that would end the service. Whatever stops stderr, there is no
  // one to tell, and the service serves on; the line is dropped.
  process.stderr.on("error", () => {});
  process.stderr.write(`sluice: listening on ${address}\n`);
}

/**
 * DATA_DIR is created if missing and must be a directory this process can write (both modes keep
 * tasks' working directories there); otherwise the start stops naming it.
 */
function checkDataDir(dir: string): void {
  try {
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    if (!fs.statSync(dir).isDirectory()) throw new Error("not a directory");
    fs.accessSync(dir, fs.constants.W_OK | fs.constants.X_OK);
  } catch (err) {
    throw new StartupError(
      `DATA_DIR "${dir}" is not a directory this process can write: ${(err as Error).message}`,
    );
  }
}

/**
 * Stop taking queued work, wait up to `graceMs` for this node's runs to end, then fail the rest
 * with a message saying why (waiters are woken; queued runs stay QUEUED and are picked up again
 * at the next start, or by another node in cluster mode).
 */
async function drain(services: Services, graceMs: number): Promise<void> {
  // Both settle before either failure is thrown, so neither is left unheard.
  const settled = await Promise.allSettled([
    failUnfinished(services, graceMs),
    services.queue.stop(),
  ]);
  const failures: unknown[] = settled.flatMap((r) => (r.status === "rejected" ? [r.reason] : []));
  if (failures.length > 1) throw new AggregateError(failures, "ending runs and stopping the queue");
  if (failures.length === 1) throw failures[0];
}

/**
 * Error-handler notifications under way (docs/error-handlers.md), a retry's backoff included, are
 * given what is left of the grace period before the process exits; any still unsent then are
 * logged with their count and stay owed in the store, for the next start or another node.
 */
async function notificationsSent(services: Services, deadline: number): Promise<void> {
  const { errorHandlers, clock, logger } = services;
  let expire = (_: false) => {};
  const expired = new Promise<false>((resolve) => (expire = resolve));
  const timer = clock.setTimeout(() => expire(false), Math.max(0, deadline - clock.now()));
  const sent = await Promise.race([errorHandlers.idle().then(() => true), expired]);
  clock.clearTimeout(timer);
  if (!sent) {
    logger.warn(
      { runs: errorHandlers.pending() },
      "shut down with error-handler notifications not sent",
    );
  }
}

async function failUnfinished(services: Services, graceMs: number): Promise<void> {
  const { store, clock, events, runner, nodeId, logger } = services;
  // Each run's end event wakes its wait (no polling); what is still unfinished at the deadline is
  // read once more, since a run may have started here while the others were awaited.
  const running = await store.unfinishedRuns(["STARTED"], nodeId);
  await Promise.all(
    running.map((run) => waitForRunEnd({ store, events, clock }, null, run.id, graceMs)),
  );
  const left = await store.unfinishedRuns(["STARTED"], nodeId);
  for (const run of left) {
    const message = `the service shut down before this ${run.elementType === "PY" ? "task" : "run"} ended (grace period ${graceMs / 1000}s)`;
    const end = {
      status: "FAILURE" as const,
      endTime: clock.now(),
      summary: message,
      error: message,
    };
    if (await store.endRun(run.id, end)) {
      events.notify(run.id);
      if (run.elementType === "PY") runner.kill(run.id, "terminate");
    }
  }
  if (left.length > 0) {
    logger.warn({ failed: left.length }, "failed runs unfinished at the deadline");
  }
}
