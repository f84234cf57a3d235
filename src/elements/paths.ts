/** Folder path and element name rules (docs/dataflow-service.md). Pure. */

/** `/` or `/seg/seg`: no trailing slash, no empty, `.` or `..` segments. Returns an error text or null. */
export function checkFolderPath(path: string): string | null {
  if (path === "/") return null;
  if (!path.startsWith("/")) return "must start with /";
  if (path.endsWith("/")) return "must not end with /";
  for (const seg of path.slice(1).split("/")) {
    if (seg === "") return "must not contain empty segments";
    if (seg === "." || seg === "..") return "must not contain . or .. segments";
  }
  return null;
}

/**
 * How deep and long a path may be for the folders a write creates (docs/dataflow-service.md,
 * "Folders"): each folder row keeps its whole path, so n new levels store about n²/2 characters.
 * A folder that exists is found at any length; only creating one is bounded.
 */
export const MAX_FOLDER_LEVELS = 32;
export const MAX_FOLDER_PATH = 1024;

/** Why the folders of `path` (a valid path) may not be created, or null. */
export function checkNewFolderPath(path: string): string | null {
  // Code points, as element names count them; a string over twice the bound is over in any count.
  if (path.length > 2 * MAX_FOLDER_PATH || [...path].length > MAX_FOLDER_PATH)
    return `must be at most ${MAX_FOLDER_PATH} characters to create its folders`;
  if (path.split("/").length - 1 > MAX_FOLDER_LEVELS)
    return `must have at most ${MAX_FOLDER_LEVELS} levels to create its folders`;
  return null;
}

/**
 * The one form names and folder paths are kept and compared in (docs/dataflow-service.md,
 * "Names"): Unicode NFC. macOS writes file names decomposed (`e` + U+0301), other systems and
 * keyboards composed (U+00E9); without this the two were different names, and a decomposed one
 * was refused (a combining mark is not a letter).
 */
export const nfc = (text: string): string => text.normalize("NFC");

const NAME = /^[\p{L}\p{N}_.-]{1,128}$/u;

export function checkElementName(name: string): string | null {
  if (name.includes("/")) return "must not contain /";
  if ([...name].length > 128) return "must be at most 128 characters";
  if (!NAME.test(name)) return "must be 1–128 letters, digits, _ - or .";
  return null;
}

export function joinPath(folder: string, name: string): string {
  return folder === "/" ? `/${name}` : `${folder}/${name}`;
}
