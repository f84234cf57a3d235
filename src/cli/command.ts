import type { Connection } from "./client.ts";
import type { Ui } from "./ui.ts";

export type OptionSpec = Record<
  string,
  { type: "string" | "boolean"; short?: string; multiple?: boolean; default?: string | boolean }
>;

export interface CommandContext {
  positionals: string[];
  values: Record<string, string | boolean | string[] | undefined>;
  conn: Connection;
  ui: Ui;
}

/** One CLI command (one file each); index.ts parses flags and handles errors and exit codes. */
export interface Command {
  name: string;
  usage: string;
  options: OptionSpec;
  run(ctx: CommandContext): Promise<number>;
}

export const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);

/** The element locator flags every element command shares. */
export const LOCATOR_OPTIONS: OptionSpec = {
  path: { type: "string" },
  "folder-id": { type: "string" },
  type: { type: "string" },
};

export function locator(name: string, values: CommandContext["values"]): Record<string, string> {
  const out: Record<string, string> = { elementName: name };
  const path = str(values.path);
  const folderId = str(values["folder-id"]);
  const type = str(values.type);
  if (path !== undefined) out.path = path;
  if (folderId !== undefined) out.folderId = folderId;
  if (type !== undefined) out.elementType = type.toUpperCase();
  return out;
}
