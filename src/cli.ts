import { parseArgs } from "node:util";
import { makeSessionCookie, signToken } from "./auth/tokens.ts";
import { CLIENT_COMMANDS, CLIENT_USAGE, runClientCommand } from "./cli/index.ts";
import { loadConfig } from "./config.ts";
import { StartupError } from "./errors.ts";

const USAGE = `usage: sluice <command>
  serve                                   start the service (default; SLUICE_ROLE=api|worker|all, default all)
  worker                                  execute queued runs only (cluster mode); answers /health
  token --app A --space S --user U [--internal] [--ttl SECONDS]
                                          mint a token header and a session cookie from the configured secrets
  retention [--purge]                     every scope's runs that run retention deletes (docs/retention.md);
                                          --purge deletes them now (reads the store of DATA_DIR / DATABASE_URL)
client commands (talk to a running server; docs/cli.md):
${CLIENT_USAGE}`;

export async function runCli(argv: string[]): Promise<void> {
  try {
    await command(argv);
  } catch (err) {
    // A bad setting read by `token` or `retention`: one line naming it, as `serve` says it.
    if (!(err instanceof StartupError)) throw err;
    process.stderr.write(`sluice: ${err.message}\n`);
    process.exitCode = 1;
  }
}

async function command(argv: string[]): Promise<void> {
  const [command = "serve", ...rest] = argv;
  if (command !== "serve" && command !== "worker") quietWhenOutputCloses();
  switch (command) {
    case "serve": {
      const { serve } = await import("./main.ts");
      await serve();
      return;
    }
    case "worker": {
      const { serve } = await import("./main.ts");
      await serve("worker");
      return;
    }
    case "token":
      process.stdout.write(mintToken(rest, process.env));
      return;
    case "retention": {
      const { retentionCommand } = await import("./cli/retention.ts");
      process.stdout.write(await retentionCommand(rest, process.env));
      return;
    }
    default: {
      const client = CLIENT_COMMANDS[command];
      if (client) {
        process.exitCode = await runClientCommand(client, rest, process.env);
        return;
      }
      if (["help", "--help", "-h"].includes(command)) {
        process.stdout.write(`${USAGE}\n`);
        return;
      }
      process.stderr.write(`${USAGE}\n`);
      process.exitCode = 2;
    }
  }
}

/**
 * A reader that goes away early (`sluice logs <id> | head`) makes the next write fail with EPIPE,
 * an 'error' event on stdout or stderr that would end the command with a stack trace. The rest
 * of the output is dropped instead and the command ends with its own exit code (docs/cli.md).
 */
function quietWhenOutputCloses(): void {
  for (const stream of [process.stdout, process.stderr]) {
    stream.on("error", (err: NodeJS.ErrnoException) => {
      if (err.code !== "EPIPE" && err.code !== "ERR_STREAM_DESTROYED") throw err;
    });
  }
}

export function mintToken(
  args: string[],
  env: Record<string, string | undefined>,
  nowS = Math.floor(Date.now() / 1000),
): string {
  const { values } = parseArgs({
    args,
    options: {
      app: { type: "string" },
      space: { type: "string" },
      user: { type: "string", default: "" },
      internal: { type: "boolean", default: false },
      ttl: { type: "string" },
    },
  });
  if (!values.app || !values.space) throw new Error("token: --app and --space are required");
  const config = loadConfig(env);
  const id = { app: values.app, space: values.space, user: values.user ?? "" };
  const secret = values.internal
    ? config.auth.internalSecret
    : Object.hasOwn(config.auth.appSecrets, values.app)
      ? config.auth.appSecrets[values.app]
      : undefined;
  const lines: string[] = [];
  if (secret) lines.push(`token: ${signToken(secret, id, nowS)}`);
  else
    lines.push(
      `token: (no ${values.internal ? "AUTH_INTERNAL_SECRET" : `secret for app ${values.app} in AUTH_APP_SECRETS`})`,
    );
  if (config.auth.sessionSecret) {
    const ttl = Number(values.ttl ?? 8 * 3600);
    lines.push(`cookie: session=${makeSessionCookie(config.auth.sessionSecret, id, nowS + ttl)}`);
  } else {
    lines.push("cookie: (no AUTH_SESSION_SECRET)");
  }
  return `${lines.join("\n")}\n`;
}
