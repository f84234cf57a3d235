import fs from "node:fs/promises";
import path from "node:path";
import { CliError, Exit, request } from "./client.ts";
import { type Command, str } from "./command.ts";

interface UploadItem {
  filePath: string;
  status: number;
  message: string;
}

const STATUS = ["imported", "skipped", "rejected", "too large"];

/** `sluice upload <files…> --path P`: .py files and .zip packages become PY elements. */
export const upload: Command = {
  name: "upload",
  usage: "upload <file.py|file.zip>... (--path P | --folder-id F) [--overwrite]",
  options: {
    path: { type: "string" },
    "folder-id": { type: "string" },
    overwrite: { type: "boolean", default: false },
  },
  async run({ positionals, values, conn, ui }) {
    if (positionals.length === 0)
      throw new CliError(Exit.USAGE, "upload: give one or more .py or .zip files");
    const target = str(values.path);
    const folderId = str(values["folder-id"]);
    if ((target === undefined) === (folderId === undefined))
      throw new CliError(Exit.USAGE, "upload: give exactly one of --path and --folder-id");
    const form = new FormData();
    if (target !== undefined) form.append("path", target);
    if (folderId !== undefined) form.append("folderId", folderId);
    form.append("overwrite", values.overwrite === true ? "true" : "false");
    let bytes = 0;
    await ui.spin("reading files", async (update) => {
      for (const [i, file] of positionals.entries()) {
        let content: Buffer;
        try {
          content = await fs.readFile(file);
        } catch (err) {
          throw new CliError(
            Exit.USAGE,
            `upload: cannot read ${file}: ${err instanceof Error ? err.message : String(err)}`,
          );
        }
        bytes += content.length;
        form.append("batchFile", new Blob([new Uint8Array(content)]), path.basename(file));
        update(`reading files ${i + 1}/${positionals.length} (${(bytes / 1024).toFixed(0)} KiB)`);
      }
    });
    const label = `uploading ${positionals.length} file${positionals.length === 1 ? "" : "s"} (${(bytes / 1024).toFixed(0)} KiB)`;
    const { data: items } = await ui.spin(label, () =>
      request<UploadItem[]>(conn, "POST", `${conn.scriptPrefix}/file/batch-upload`, { form }),
    );
    if (ui.json) ui.out(JSON.stringify(items));
    else {
      const rows = items.map((it) => [
        it.filePath,
        it.status === 0
          ? ui.color.green(STATUS[0] ?? "")
          : ui.color.red(STATUS[it.status] ?? String(it.status)),
        it.message,
      ]);
      ui.out(ui.table(["element", "result", "message"], rows));
    }
    // Skipped (exists) is not a failure; rejected or too large is.
    return items.some((it) => it.status >= 2) ? Exit.FAILED : Exit.OK;
  },
};
