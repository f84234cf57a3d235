/**
 * Artifact names (docs/artifacts.md): a file's path relative to the run's working directory,
 * segments joined by `/`. A name is what a client writes to disk, so nothing in it may climb
 * out of a folder or mean something else on another system.
 */

/** The longest name accepted, in UTF-8 bytes. */
export const MAX_NAME_BYTES = 1024;

/** Why `name` is not an artifact name, or undefined when it is one. */
export function nameProblem(name: string): string | undefined {
  if (name === "") return "is empty";
  if (Buffer.byteLength(name) > MAX_NAME_BYTES) return `is longer than ${MAX_NAME_BYTES} bytes`;
  if (name.startsWith("/")) return "is an absolute path";
  // Control characters (NUL included; C1 too, U+009B is a terminal's CSI) would break headers
  // and terminals; `\` and U+FFFD (a file name that was not UTF-8) mean another path elsewhere.
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it refuses.
  if (/[\u0000-\u001f\u007f-\u009f\\\ufffd]/.test(name))
    return "contains a control character, \\ or U+FFFD";
  for (const seg of name.split("/")) {
    if (seg === "") return "contains an empty path segment";
    if (seg === "." || seg === "..") return `contains a "${seg}" path segment`;
  }
  return undefined;
}

/**
 * `name` as a listing of what was not kept shows it: each control character written `\xNN`, so
 * a name a script chose cannot drive the terminal or page of whoever reads the list.
 */
export function shownName(name: string): string {
  return name.replace(CONTROLS, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`);
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it escapes.
const CONTROLS = /[\u0000-\u001f\u007f-\u009f]/g;
