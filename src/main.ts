import { buildApp } from "./app.ts";
import { type Config, loadConfig } from "./config.ts";
import { createLogger } from "./logger.ts";
import { createServices } from "./services.ts";

/** `sluice serve`: wires everything, listens, and shuts down gracefully on SIGTERM/SIGINT. */
export async function serve(role?: Config["role"]): Promise<void> {
  const config = loadConfig();
  if (role) config.role = role;
  const logger = createLogger(config.logLevel);
  const services = await createServices({ config, logger });
  const app = await buildApp(services);

  if (config.auth.mode === "off" && !["127.0.0.1", "::1", "localhost"].includes(config.host)) {
    logger.warn({ host: config.host }, "auth is off and the service listens beyond loopback: anyone who can reach it acts as any app");
  }
  if (config.auth.mode === "signature" && Object.keys(config.auth.appSecrets).length === 0) {
    logger.warn("AUTH_MODE=signature but AUTH_APP_SECRETS is empty: no app token can be valid");
  }

  let closing = false;
  const shutdown = async (signal: string) => {
    if (closing) return;
    closing = true;
    logger.info({ signal }, "shutting down");
    await app.close();
    await services.close();
    process.exit(0);
  };
  process.on("SIGTERM", () => void shutdown("SIGTERM"));
  process.on("SIGINT", () => void shutdown("SIGINT"));

  await app.listen({ port: config.port, host: config.host });
  logger.info(
    { mode: config.mode, role: config.role, node: services.nodeId, sandbox: services.runner.sandbox, dataDir: config.dataDir },
    "sluice is ready",
  );
}

if (import.meta.main) {
  const { runCli } = await import("./cli.ts");
  await runCli(process.argv.slice(2));
}
