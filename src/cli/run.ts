import fs from "node:fs/promises";
import { CliError, type Connection, Exit, request } from "./client.ts";
import { type Command, LOCATOR_OPTIONS, locator, str } from "./command.ts";
import type { Ui } from "./ui.ts";

/** `--param '{"a":1}'` or `--param @file.json` (`@-` reads stdin). */
async function readParam(raw: string | undefined): Promise<unknown> {
  if (raw === undefined) return undefined;
  let text = raw;
  if (raw.startsWith("@")) {
    const file = raw.slice(1);
    try {
      text =
        file === "-"
          ? await new Response(process.stdin as unknown as ReadableStream).text()
          : await fs.readFile(file, "utf8");
    } catch (err) {
      throw new CliError(
        Exit.USAGE,
        `--param: cannot read ${file}: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
  }
  try {
    return JSON.parse(text);
  } catch {
    throw new CliError(Exit.USAGE, "--param must be JSON or @file");
  }
}

/**
 * Polls a result endpoint with server-side waits (each call blocks up to 30 s, so this is not a
 * busy loop) until the run ends or the overall --timeout passes.
 */
async function waitFor(
  conn: Connection,
  ui: Ui,
  id: string,
  resultPath: string,
  notFinished: number,
  timeoutS: number | undefined,
) {
  const start = Date.now();
  return ui.spin(`waiting for ${id}`, async (update) => {
    for (;;) {
      const elapsed = (Date.now() - start) / 1000;
      const left = timeoutS === undefined ? 30 : Math.min(30, Math.ceil(timeoutS - elapsed));
      try {
        return await request<unknown>(conn, "GET", `${resultPath}?timeout=${Math.max(0, left)}`);
      } catch (err) {
        if (!(err instanceof CliError) || err.code !== notFinished) throw err;
        if (timeoutS !== undefined && (Date.now() - start) / 1000 >= timeoutS) throw err;
        update(`waiting for ${id} (${Math.round((Date.now() - start) / 1000)} s)`);
      }
    }
  });
}

/** `sluice run <element>`: start a flow run (or, with --type PY, a script task). */
export const run: Command = {
  name: "run",
  usage:
    "run <element> [--param JSON|@file] [--sync] [--wait] [--timeout S] [--path P] [--type DPL|PY]",
  options: {
    ...LOCATOR_OPTIONS,
    param: { type: "string" },
    sync: { type: "boolean", default: false },
    wait: { type: "boolean", default: false },
    timeout: { type: "string" },
  },
  async run({ positionals, values, conn, ui }) {
    const element = positionals[0];
    if (!element) throw new CliError(Exit.USAGE, "run: give the element name");
    const parameter = await readParam(str(values.param));
    const timeoutS = str(values.timeout) === undefined ? undefined : Number(values.timeout);
    if (timeoutS !== undefined && !(timeoutS >= 0))
      throw new CliError(Exit.USAGE, "--timeout must be seconds");
    const loc = locator(element, values);
    const py = loc.elementType === "PY";
    let id: string;
    let result: unknown;
    let waited = false;
    if (values.sync === true) {
      waited = true;
      if (py) {
        const q = new URLSearchParams({
          ...(loc.path ? { path: loc.path } : {}),
          ...(loc.folderId ? { folderId: loc.folderId } : {}),
        });
        if (timeoutS !== undefined) q.set("timeout", String(timeoutS));
        const url = `${conn.scriptPrefix}/external/${encodeURIComponent(element)}/run-sync?${q}`;
        const a = await ui.spin(`running ${element}`, () =>
          request<unknown>(conn, "POST", url, { body: parameter ?? {}, raw: true }),
        );
        id = a.headers.get("x-task-id") ?? "";
        result = a.data;
      } else {
        const body = {
          ...loc,
          parameter,
          ...(timeoutS !== undefined ? { timeout: timeoutS } : {}),
        };
        const a = await ui.spin(`running ${element}`, () =>
          request<unknown>(conn, "POST", `${conn.dataflowPrefix}/run-sync`, { body }),
        );
        id = a.headers.get("x-run-id") ?? "";
        result = a.data;
      }
    } else {
      if (py) {
        const q = new URLSearchParams({
          ...(loc.path ? { path: loc.path } : {}),
          ...(loc.folderId ? { folderId: loc.folderId } : {}),
        });
        const url = `${conn.scriptPrefix}/external/${encodeURIComponent(element)}/run?${q}`;
        id = (await request<string>(conn, "POST", url, { body: parameter ?? {} })).data;
      } else {
        id = (
          await request<string>(conn, "POST", `${conn.dataflowPrefix}/run`, {
            body: { ...loc, parameter },
          })
        ).data;
      }
      if (values.wait === true) {
        waited = true;
        const path = py
          ? `${conn.scriptPrefix}/script/result/${id}`
          : `${conn.dataflowPrefix}/run/${id}/result`;
        result = (await waitFor(conn, ui, id, path, py ? 28030004 : 28020003, timeoutS)).data;
      }
    }
    if (ui.json) ui.out(JSON.stringify(waited ? { id, status: "SUCCESS", result } : { id }));
    else if (waited) {
      ui.err(`${py ? "task" : "run"} ${id} ${ui.status("SUCCESS")}`);
      ui.out(JSON.stringify(result, null, 2));
    } else ui.out(id);
    return Exit.OK;
  },
};
