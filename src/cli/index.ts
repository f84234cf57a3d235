import { parseArgs } from "node:util";
import { activate, deactivate } from "./activate.ts";
import { artifacts } from "./artifacts.ts";
import { exportCmd, importCmd } from "./bundle.ts";
import { CliError, CONNECTION_OPTIONS, connect, Exit } from "./client.ts";
import type { Command } from "./command.ts";
import { deploy } from "./deploy.ts";
import { env } from "./env.ts";
import { logs } from "./logs.ts";
import { rerun, resume } from "./rerun.ts";
import { run } from "./run.ts";
import { runs } from "./runs.ts";
import { createUi } from "./ui.ts";
import { upload } from "./upload.ts";

export const CLIENT_COMMANDS: Record<string, Command> = Object.fromEntries(
  [
    deploy,
    activate,
    deactivate,
    run,
    rerun,
    resume,
    upload,
    runs,
    logs,
    env,
    artifacts,
    exportCmd,
    importCmd,
  ].map((c) => [c.name, c]),
);

export const CLIENT_USAGE = `${Object.values(CLIENT_COMMANDS)
  .map((c) => `  ${c.usage}`)
  .join("\n")}

connection (flags win over the environment):
  --url SLUICE_URL (http://127.0.0.1:8080)   --app SLUICE_APP   --space SLUICE_SPACE   --user SLUICE_USER
  --token SLUICE_TOKEN   --cookie SLUICE_COOKIE (session cookie)   --json (machine output)
exit codes: 0 ok, 1 failed, 2 usage/bad request, 3 server unreachable, 4 unauthorized,
  5 not found, 6 not finished/timed out, 7 canceled, 8 deploy validation errors`;

/** Runs one client command; answers its exit code (never throws). */
export async function runClientCommand(
  command: Command,
  args: string[],
  env: Record<string, string | undefined>,
): Promise<number> {
  let json = args.includes("--json");
  const ui0 = createUi(json);
  try {
    const { values, positionals } = parseArgs({
      args,
      options: { ...CONNECTION_OPTIONS, ...command.options },
      allowPositionals: true,
      strict: true,
    });
    json = values.json === true;
    const ui = createUi(json);
    if (values.help === true) {
      ui.out(`usage: sluice ${command.usage}\n${CLIENT_USAGE.split("\n\n")[1] ?? ""}`);
      return Exit.OK;
    }
    return await command.run({ positionals, values, conn: connect(values, env), ui });
  } catch (err) {
    const e =
      err instanceof CliError
        ? err
        : err instanceof TypeError && "code" in err && String(err.code).startsWith("ERR_PARSE_ARGS")
          ? new CliError(Exit.USAGE, `${err.message}\nusage: sluice ${command.usage}`)
          : new CliError(Exit.FAILED, err instanceof Error ? err.message : String(err));
    // A failed run's ID stays at hand: `sluice logs "$(sluice run … --json | jq -r .id)"`.
    const id = e.runId ? { id: e.runId } : {};
    const error = { exit: e.exit, code: e.code ?? null, message: e.message };
    if (json) ui0.out(JSON.stringify({ ...id, error }));
    else {
      ui0.err(`${ui0.color.red("error")}: ${e.message}`);
      if (e.runId) ui0.err(`details: sluice logs ${e.runId}`);
    }
    return e.exit;
  }
}
