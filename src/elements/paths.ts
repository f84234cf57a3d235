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
