import { CliError, type Connection, Exit, request } from "./client.ts";
import { type Command, str } from "./command.ts";
import { writeWhole } from "./write-whole.ts";

interface ArtifactList {
  runId: string;
  collected: boolean;
  files: { name: string; nodeId: string | null; size: number; contentType: string }[];
  skipped: { name: string; reason: string }[];
  skippedMore: number;
}

/**
 * `sluice artifacts RUN`: the files a run kept (docs/artifacts.md); `--get NAME` downloads one to
 * stdout, or to `--out FILE`. The output file is the caller's choice, never the artifact's name.
 */
export const artifacts: Command = {
  name: "artifacts",
  usage: "artifacts <runId> [--node NODE] [--get NAME [--out FILE]]",
  options: { get: { type: "string" }, out: { type: "string" }, node: { type: "string" } },
  async run({ positionals, values, conn, ui }) {
    const runId = positionals[0];
    if (!runId) throw new CliError(Exit.USAGE, "artifacts: give the run ID");
    const base = `${conn.dataflowPrefix}/run/${encodeURIComponent(runId)}/artifacts`;
    const name = str(values.get);
    if (name !== undefined) {
      const bytes = await download(conn, `${base}/${encodeURIComponent(name)}`);
      const out = str(values.out);
      if (out === undefined) await writeStdout(bytes);
      else await writeWhole(out, bytes);
      return Exit.OK;
    }
    const node = str(values.node);
    const query = node === undefined ? "" : `?nodeId=${encodeURIComponent(node)}`;
    const { data } = await request<ArtifactList>(conn, "GET", `${base}${query}`);
    if (ui.json) {
      ui.out(JSON.stringify(data));
      return Exit.OK;
    }
    const rows = data.files.map((f) => [f.name, f.nodeId ?? "", String(f.size), f.contentType]);
    if (rows.length > 0) ui.out(ui.table(["name", "node", "bytes", "type"], rows));
    else ui.out(data.collected ? "the run kept no files" : "no files kept (yet)");
    for (const s of data.skipped) ui.out(ui.color.dim(`skipped ${s.name}: ${s.reason}`));
    if (data.skippedMore > 0) ui.out(ui.color.dim(`and ${data.skippedMore} more skipped`));
    return Exit.OK;
  },
};

/** The file's bytes; a failure answers an envelope (no content-disposition), made a CliError. */
async function download(conn: Connection, path: string): Promise<Uint8Array> {
  let res: Response;
  try {
    res = await fetch(conn.url + path, { headers: conn.headers });
  } catch {
    throw new CliError(Exit.UNREACHABLE, `cannot reach ${conn.url}`);
  }
  if (res.headers.get("content-disposition")?.startsWith("attachment"))
    return new Uint8Array(await res.arrayBuffer());
  // Not a file: the envelope of the failure, read through the one request function's rules.
  await request(conn, "GET", path);
  throw new CliError(Exit.FAILED, `GET ${path}: no file in the answer`);
}

function writeStdout(bytes: Uint8Array): Promise<void> {
  return new Promise((resolve, reject) =>
    process.stdout.write(bytes, (err) => (err ? reject(err) : resolve())),
  );
}
