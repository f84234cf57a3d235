import { CliError, Exit, request } from "./client.ts";
import { type Command, str } from "./command.ts";

interface VersionAnswer {
  element: { elementName: string; path: string };
  version: number;
  env: { hash: string; packages: string[]; declared: string[] } | null;
}

/**
 * `sluice env <element> [--version N]`: the environment a PY element's version runs in
 * (docs/script-dependencies.md), from POST /script/element/version: its hash, then one
 * `name==version` line per installed package, as pip freeze prints them.
 */
export const env: Command = {
  name: "env",
  usage: "env <element> [--path P | --folder-id F] [--version N]",
  options: {
    path: { type: "string" },
    "folder-id": { type: "string" },
    version: { type: "string" },
  },
  async run({ positionals, values, conn, ui }) {
    const element = positionals[0];
    if (!element) throw new CliError(Exit.USAGE, "env: give the script element name");
    const body: Record<string, unknown> = { elementName: element, elementType: "PY" };
    if (str(values.path) !== undefined) body.path = str(values.path);
    if (str(values["folder-id"]) !== undefined) body.folderId = str(values["folder-id"]);
    const version = str(values.version);
    if (version !== undefined) {
      if (!/^[1-9]\d*$/.test(version))
        throw new CliError(Exit.USAGE, "env: --version must be a version number (1, 2, …)");
      body.version = Number(version);
    }
    const { data } = await request<VersionAnswer>(
      conn,
      "POST",
      `${conn.scriptPrefix}/script/element/version`,
      { body },
    );
    const { elementName, path } = data.element;
    if (ui.json) {
      ui.out(JSON.stringify({ elementName, path, version: data.version, env: data.env }));
      return Exit.OK;
    }
    const c = ui.color;
    const where = `${path === "/" ? "" : path}/${elementName} v${data.version}`;
    if (!data.env) {
      ui.out(`${c.bold(where)}: no dependencies declared, no environment`);
      return Exit.OK;
    }
    ui.out(`${c.bold(where)}: environment ${data.env.hash}`);
    ui.out(c.dim(`declared: ${data.env.declared.join(", ")}`));
    for (const p of data.env.packages) ui.out(p);
    return Exit.OK;
  },
};
