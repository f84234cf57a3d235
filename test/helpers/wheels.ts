import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { startServer, type TestServer } from "./server.ts";
import { makeZip } from "./zip.ts";

export interface WheelSpec {
  /** Project name as in METADATA (the wheel's file name uses it with `-` as `_`). */
  name: string;
  version: string;
  /** Files of the wheel besides its dist-info, e.g. `{ "slowmod/__init__.py": "..." }`. */
  files: Record<string, string>;
  requires?: string[];
  /** Written as top_level.txt when given (else the runner reads RECORD). */
  topLevel?: string[];
  /** Of `files`, those stored executable (e.g. `<name>-<version>.data/scripts/x`). */
  executable?: string[];
}

/**
 * Writes a pure-Python wheel into `dir` by hand, without any index or build tool: a zip of the
 * package files and `<name>-<version>.dist-info/` with METADATA, WHEEL and RECORD.
 */
export function writeWheel(dir: string, w: WheelSpec): string {
  const stem = `${w.name.replace(/-/g, "_")}-${w.version}`;
  const info = `${stem}.dist-info`;
  const meta = [
    "Metadata-Version: 2.1",
    `Name: ${w.name}`,
    `Version: ${w.version}`,
    ...(w.requires ?? []).map((r) => `Requires-Dist: ${r}`),
    "",
  ].join("\n");
  const wheel =
    "Wheel-Version: 1.0\nGenerator: sluice-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n";
  const files: Record<string, string> = {
    ...w.files,
    [`${info}/METADATA`]: meta,
    [`${info}/WHEEL`]: wheel,
  };
  if (w.topLevel) files[`${info}/top_level.txt`] = `${w.topLevel.join("\n")}\n`;
  const record = [...Object.keys(files).map((f) => `${f},,`), `${info}/RECORD,,`, ""].join("\n");
  files[`${info}/RECORD`] = record;
  const file = path.join(dir, `${stem}-py3-none-any.whl`);
  writeFileSync(
    file,
    makeZip(
      Object.entries(files).map(([name, content]) => ({
        name,
        content,
        executable: w.executable?.includes(name) ?? false,
      })),
    ),
  );
  return file;
}

/**
 * A test server whose pip finds only `wheels`, written here into a directory of their own;
 * `close` stops the server and removes the directory.
 */
export async function startWithWheels(
  wheels: WheelSpec[],
  env: Record<string, string> = {},
  opts: Parameters<typeof startServer>[1] = {},
): Promise<{ server: TestServer; close: () => Promise<void> }> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "sluice-wheels-"));
  for (const w of wheels) writeWheel(dir, w);
  const server = await startServer({ PIP_NO_INDEX: "1", PIP_FIND_LINKS: dir, ...env }, opts);
  return {
    server,
    async close() {
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
