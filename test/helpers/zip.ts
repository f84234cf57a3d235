import { execFileSync } from "node:child_process";

export interface ZipEntrySpec {
  name: string;
  content?: string;
  /** Store as a symbolic link pointing at `content`. */
  symlink?: boolean;
  /** Store with the executable bits (0755), as a wheel's scripts are. */
  executable?: boolean;
}

/**
 * Builds a zip with Python's zipfile, which (unlike JS zip writers) will write the hostile
 * entries the importer must reject: `../` names and links.
 */
export function makeZip(entries: ZipEntrySpec[]): Buffer {
  const script = `
import io, json, sys, zipfile
entries = json.load(sys.stdin)
buf = io.BytesIO()
with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
    for e in entries:
        info = zipfile.ZipInfo(e["name"])
        info.compress_type = zipfile.ZIP_DEFLATED
        if e.get("symlink"):
            info.external_attr = (0o120777 << 16)
        else:
            info.external_attr = ((0o100755 if e.get("executable") else 0o100644) << 16)
        z.writestr(info, e.get("content", ""))
sys.stdout.buffer.write(buf.getvalue())
`;
  return execFileSync("/usr/bin/python3", ["-c", script], { input: JSON.stringify(entries) });
}
