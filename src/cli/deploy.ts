import fs from "node:fs/promises";
import path from "node:path";
import { CliError, Exit, request } from "./client.ts";
import { type Command, str } from "./command.ts";

interface ValidationResult {
  errorCode: number;
  nodeId: string;
  nodeType: string;
  errorMessage?: string;
  severity?: number;
  path?: (string | number)[];
}

/**
 * `sluice deploy <flow.json>`: the file is a full deploy request (elementName, revisionName, flow,
 * configure, …) or just a graph `{vertexes, edges}`; flags fill or override the rest.
 */
export const deploy: Command = {
  name: "deploy",
  usage: "deploy <flow.json> [--name N] [--path P] [--revision R] [--activate]",
  options: {
    name: { type: "string" },
    path: { type: "string" },
    "folder-id": { type: "string" },
    revision: { type: "string" },
    activate: { type: "boolean", default: false },
  },
  async run({ positionals, values, conn, ui }) {
    const file = positionals[0];
    if (!file) throw new CliError(Exit.USAGE, "deploy: give the flow file");
    let doc: Record<string, unknown>;
    try {
      doc = JSON.parse(await fs.readFile(file, "utf8")) as Record<string, unknown>;
    } catch (err) {
      throw new CliError(
        Exit.USAGE,
        `deploy: cannot read ${file}: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
    const body: Record<string, unknown> =
      "vertexes" in doc ? { flow: doc, configure: {} } : { ...doc };
    body.elementName =
      str(values.name) ?? body.elementName ?? path.basename(file).replace(/\.json$/i, "");
    body.revisionName = str(values.revision) ?? body.revisionName ?? new Date().toISOString();
    if (str(values.path)) body.path = str(values.path);
    if (str(values["folder-id"])) body.folderId = str(values["folder-id"]);
    if (body.path === undefined && body.folderId === undefined) body.path = "/";
    body.configure ??= {};
    const { data: results } = await ui.spin(`deploying ${String(body.elementName)}`, () =>
      request<ValidationResult[]>(conn, "POST", `${conn.dataflowPrefix}/flow/deploy`, { body }),
    );
    const errors = results.filter((r) => r.severity === 2);
    let status: string | undefined;
    if (errors.length === 0 && values.activate === true) {
      const loc = {
        elementName: body.elementName,
        ...(body.folderId ? { folderId: body.folderId } : { path: body.path }),
      };
      status = (
        await request<string>(conn, "POST", `${conn.dataflowPrefix}/flow/activate`, { body: loc })
      ).data;
    }
    if (ui.json)
      ui.out(
        JSON.stringify({
          elementName: body.elementName,
          deployed: errors.length === 0,
          results,
          status,
        }),
      );
    else {
      for (const r of results) {
        const sev =
          r.severity === 2
            ? ui.color.red("error")
            : r.severity === 1
              ? ui.color.yellow("warning")
              : "note";
        ui.err(
          `${sev} ${r.errorCode} ${r.nodeId} (${r.nodeType}): ${r.errorMessage ?? ""}${r.path ? ` at ${r.path.join(".")}` : ""}`,
        );
      }
      if (errors.length === 0)
        ui.out(`deployed ${String(body.elementName)}${status ? `, ${ui.status(status)}` : ""}`);
      else
        ui.err(
          ui.color.red(`not deployed: ${errors.length} error${errors.length === 1 ? "" : "s"}`),
        );
    }
    return errors.length === 0 ? Exit.OK : Exit.INVALID;
  },
};
