import { CliError, Exit, request } from "./client.ts";
import { type Command, str } from "./command.ts";

/** `sluice rerun RUN_ID` and `sluice resume RUN_ID` (docs/cli.md, docs/dataflow-service.md). */
function again(kind: "rerun" | "resume"): Command {
  return {
    name: kind,
    usage: `${kind} <runId> [--sync] [--timeout S]`,
    options: { sync: { type: "boolean", default: false }, timeout: { type: "string" } },
    async run({ positionals, values, conn, ui }) {
      const runId = positionals[0];
      if (!runId) throw new CliError(Exit.USAGE, `${kind}: give the run ID`);
      const timeoutS = str(values.timeout) === undefined ? undefined : Number(values.timeout);
      if (timeoutS !== undefined && !(timeoutS >= 0 && Number.isInteger(timeoutS)))
        throw new CliError(Exit.USAGE, "--timeout must be whole seconds");
      const sync = values.sync === true;
      const url = `${conn.dataflowPrefix}/run/${encodeURIComponent(runId)}/${kind}`;
      const body = { sync, ...(timeoutS !== undefined ? { timeout: timeoutS } : {}) };
      const a = await ui.spin(`${kind === "rerun" ? "re-running" : "resuming"} ${runId}`, () =>
        request<unknown>(conn, "POST", url, { body }),
      );
      const id = a.headers.get("x-run-id") ?? (typeof a.data === "string" ? a.data : "");
      if (!sync) {
        ui.out(ui.json ? JSON.stringify({ id, [`${kind}Of`]: runId }) : id);
        return Exit.OK;
      }
      if (ui.json) ui.out(JSON.stringify({ id, status: "SUCCESS", result: a.data }));
      else {
        ui.err(`run ${id} ${ui.status("SUCCESS")} (${kind} of ${runId})`);
        ui.out(JSON.stringify(a.data, null, 2));
      }
      return Exit.OK;
    },
  };
}

export const rerun = again("rerun");
export const resume = again("resume");
