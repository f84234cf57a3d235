import fs from "node:fs/promises";
import { CliError, Exit, request } from "./client.ts";
import { type Command, str } from "./command.ts";
import { writeWhole } from "./write-whole.ts";

interface Item {
  elementType: string;
  path: string;
  elementName: string;
  versions?: number[];
  reason?: string;
}
type Report = Record<"created" | "updated" | "skipped" | "conflicts", Item[]> & { dryRun: boolean };

const where = (i: Item) => `${i.path === "/" ? "" : i.path}/${i.elementName}`;

/** `sluice export (--path P | --folder-id F | NAME...) [--all-revisions] [-o FILE]`. */
export const exportCmd: Command = {
  name: "export",
  usage: "export (--path P | --folder-id F | <flow>...) [--all-revisions] [-o FILE]",
  options: {
    path: { type: "string" },
    "folder-id": { type: "string" },
    "all-revisions": { type: "boolean", default: false },
    output: { type: "string", short: "o" },
  },
  async run({ positionals, values, conn, ui }) {
    const path = str(values.path);
    const folderId = str(values["folder-id"]);
    if ([path, folderId, positionals.length > 0 ? true : undefined].filter(Boolean).length !== 1)
      throw new CliError(Exit.USAGE, "export: give exactly one of --path, --folder-id or names");
    const body = {
      ...(path !== undefined ? { path } : {}),
      ...(folderId !== undefined ? { folderId } : {}),
      ...(positionals.length > 0 ? { elements: positionals.map((n) => ({ elementName: n })) } : {}),
      allRevisions: values["all-revisions"] === true,
    };
    const { data } = await request<{
      flows: { revisions: unknown[] }[];
      scripts: unknown[];
    }>(conn, "POST", `${conn.dataflowPrefix}/export`, { body });
    const file = str(values.output);
    const counts = {
      flows: data.flows.length,
      revisions: data.flows.reduce((n, f) => n + f.revisions.length, 0),
      scripts: data.scripts.length,
    };
    if (file === undefined) {
      ui.out(JSON.stringify(data, null, ui.json ? undefined : 2));
      return Exit.OK;
    }
    await writeWhole(file, `${JSON.stringify(data, null, 2)}\n`);
    if (ui.json) ui.out(JSON.stringify({ file, ...counts }));
    else
      ui.err(
        `exported ${counts.flows} flows (${counts.revisions} revisions) and ${counts.scripts} scripts to ${file}`,
      );
    return Exit.OK;
  },
};

/** `sluice import FILE [--dry-run]`: exit 1 when the plan has conflicts (nothing written). */
export const importCmd: Command = {
  name: "import",
  usage: "import <file> [--dry-run]",
  options: { "dry-run": { type: "boolean", default: false } },
  async run({ positionals, values, conn, ui }) {
    const file = positionals[0];
    if (!file) throw new CliError(Exit.USAGE, "import: give the export file");
    let bundle: unknown;
    try {
      bundle = JSON.parse(await fs.readFile(file, "utf8"));
    } catch (err) {
      const why = err instanceof Error ? err.message : String(err);
      throw new CliError(Exit.USAGE, `import: cannot read ${file} as JSON: ${why}`);
    }
    const dryRun = values["dry-run"] === true;
    const { data } = await request<Report>(conn, "POST", `${conn.dataflowPrefix}/import`, {
      body: { bundle, dryRun },
    });
    if (ui.json) ui.out(JSON.stringify(data));
    else {
      const { green, yellow, red } = ui.color;
      const paint = { created: green, updated: green, skipped: yellow, conflicts: red };
      const rows: string[][] = [];
      for (const k of ["created", "updated", "skipped", "conflicts"] as const)
        for (const i of data[k])
          rows.push([
            paint[k](k),
            i.elementType,
            where(i),
            i.versions?.join(",") ?? "",
            i.reason ?? "",
          ]);
      ui.out(ui.table(["outcome", "type", "element", "revisions", "reason"], rows));
      const n = (k: keyof Report) => (data[k] as Item[]).length;
      ui.err(
        `${dryRun ? "dry run, nothing written: " : ""}${n("created")} created, ${n("updated")} updated, ${n("skipped")} skipped, ${n("conflicts")} conflicts`,
      );
    }
    return data.conflicts.length > 0 ? Exit.FAILED : Exit.OK;
  },
};
