import { CliError, Exit, request } from "./client.ts";
import type { Command } from "./command.ts";
import { fmtDuration, fmtTime } from "./ui.ts";

interface NodeLog {
  nodeId: string;
  nodeType: string;
  status: string;
  startTime?: number;
  endTime?: number;
  error?: string;
  stdout?: string;
  stderr?: string;
  reusedFrom?: string;
  traceback?: { text: string };
}

interface RunDetail {
  run: {
    runId: string;
    runStatus: string;
    elementName?: string;
    startTime?: number;
    duration?: number;
    summary?: string;
    rerunOf?: { runId: string; kind: string };
  };
  elementType: string;
  error?: string;
  nodes: NodeLog[];
  stdout?: string;
  stderr?: string;
  /** A failed task: where it raised, in the user's own files (docs/live-progress.md). */
  traceback?: { text: string };
  /** Script tasks: the environment of the version it ran (null: none). */
  environment?: { hash: string; packages: string[] } | null;
}

const indent = (text: string) => text.replace(/\n$/, "").replace(/^/gm, "    ");

/** `sluice logs <runId>`: status, each node's times and error, and every stdout/stderr. */
export const logs: Command = {
  name: "logs",
  usage: "logs <runId|taskId>",
  options: {},
  async run({ positionals, conn, ui }) {
    const id = positionals[0];
    if (!id) throw new CliError(Exit.USAGE, "logs: give the run or task ID");
    const { data } = await request<RunDetail>(
      conn,
      "GET",
      `${conn.dataflowPrefix}/monitor/run-detail?runId=${encodeURIComponent(id)}`,
    );
    if (ui.json) {
      ui.out(JSON.stringify(data));
      return Exit.OK;
    }
    const r = data.run;
    const c = ui.color;
    ui.out(
      `${c.bold(r.elementName ?? "")} ${r.runId} ${ui.status(r.runStatus)} ${fmtTime(r.startTime)} ${fmtDuration(r.duration)}`,
    );
    if (r.summary) ui.out(c.dim(r.summary));
    if (r.rerunOf)
      ui.out(c.dim(`${r.rerunOf.kind === "resume" ? "resumes" : "re-runs"} ${r.rerunOf.runId}`));
    for (const n of data.nodes) {
      const took =
        n.startTime !== undefined && n.endTime !== undefined
          ? fmtDuration(n.endTime - n.startTime)
          : "";
      const reused = n.reusedFrom ? c.dim(` reused from ${n.reusedFrom}`) : "";
      ui.out(`  ${c.bold(n.nodeId)} (${n.nodeType}) ${ui.status(n.status)} ${took}${reused}`);
      if (n.error) ui.out(c.red(indent(n.traceback?.text || n.error)));
      if (n.stdout) ui.out(indent(n.stdout));
      if (n.stderr) ui.out(c.yellow(indent(n.stderr)));
    }
    if (data.elementType === "PY") {
      if (data.environment)
        ui.out(
          c.dim(`environment ${data.environment.hash}: ${data.environment.packages.join(" ")}`),
        );
      if (data.stdout) ui.out(`  ${c.bold("stdout")}\n${indent(data.stdout)}`);
      if (data.stderr) ui.out(`  ${c.bold("stderr")}\n${c.yellow(indent(data.stderr))}`);
    }
    // Headed, so that it does not read as the end of stdout; a traceback names the file and line.
    if (data.error && data.nodes.length === 0)
      ui.out(`  ${c.bold("error")}\n${c.red(indent(data.traceback?.text || data.error))}`);
    return Exit.OK;
  },
};
