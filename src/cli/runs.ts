import { CliError, Exit, request } from "./client.ts";
import { type Command, LOCATOR_OPTIONS, locator, str } from "./command.ts";
import { fmtDuration, fmtTime } from "./ui.ts";

interface RunInfo {
  runId: string;
  triggerType: string;
  runStatus: string;
  duration?: number;
  createTime?: number;
  startTime?: number;
  version?: string;
  runName?: string;
  summary?: string;
}

interface MonitorRunResp {
  totalCount: number;
  totalPage: number;
  runs: RunInfo[];
  queuedCount: number;
  startedCount: number;
  successCount: number;
  failureCount: number;
  canceledCount: number;
}

const list = (v: unknown) =>
  typeof v === "string" && v !== "" ? v.split(",").map((s) => s.trim().toUpperCase()) : undefined;

/** `sluice runs <element>`: the runs of one element as a table, with POST /monitor/runs filters. */
export const runs: Command = {
  name: "runs",
  usage:
    "runs <element> [--status S,S] [--trigger T,T] [--version V,V] [--search Q] [--page N] [--size N] [--asc]",
  options: {
    ...LOCATOR_OPTIONS,
    status: { type: "string" },
    trigger: { type: "string" },
    version: { type: "string" },
    search: { type: "string" },
    page: { type: "string", default: "0" },
    size: { type: "string", default: "20" },
    asc: { type: "boolean", default: false },
  },
  async run({ positionals, values, conn, ui }) {
    const element = positionals[0];
    if (!element) throw new CliError(Exit.USAGE, "runs: give the element name");
    const body: Record<string, unknown> = {
      ...locator(element, values),
      pageNo: Number(values.page),
      pageSize: Number(values.size),
      orderBy: [{ name: "createTime", asc: values.asc === true }],
    };
    if (list(values.status)) body.runStatusFilter = list(values.status);
    if (list(values.trigger)) body.triggerFilter = list(values.trigger);
    if (typeof values.version === "string") body.versionFilter = values.version.split(",");
    if (str(values.search)) body.quickSearch = str(values.search);
    const { data } = await request<MonitorRunResp>(
      conn,
      "POST",
      `${conn.dataflowPrefix}/monitor/runs`,
      { body },
    );
    if (ui.json) {
      ui.out(JSON.stringify(data));
      return Exit.OK;
    }
    const rows = data.runs.map((r) => [
      r.runId,
      ui.status(r.runStatus),
      r.triggerType,
      r.version ?? "",
      fmtTime(r.startTime ?? r.createTime),
      fmtDuration(r.duration),
      (r.summary ?? "").slice(0, 60),
    ]);
    ui.out(
      ui.table(["run", "status", "trigger", "ver", "started (UTC)", "duration", "summary"], rows),
    );
    const c = ui.color;
    ui.out(
      `${data.totalCount} runs, page ${Number(values.page) + 1}/${Math.max(1, data.totalPage)} · ` +
        `${c.green(`${data.successCount} success`)} ${c.red(`${data.failureCount} failure`)} ` +
        `${c.cyan(`${data.startedCount} started`)} ${c.cyan(`${data.queuedCount} queued`)} ${c.yellow(`${data.canceledCount} canceled`)}`,
    );
    return Exit.OK;
  },
};
