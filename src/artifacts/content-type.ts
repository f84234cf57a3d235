import path from "node:path";

/**
 * The content type of an artifact, guessed from its extension only: the bytes are never sniffed,
 * and downloads say `nosniff`, so a file named `.txt` is shown as text whatever it holds.
 */
const TYPES: Record<string, string> = {
  ".txt": "text/plain; charset=utf-8",
  ".log": "text/plain; charset=utf-8",
  ".md": "text/markdown; charset=utf-8",
  ".csv": "text/csv; charset=utf-8",
  ".tsv": "text/tab-separated-values; charset=utf-8",
  ".json": "application/json",
  ".jsonl": "application/x-ndjson",
  ".ndjson": "application/x-ndjson",
  ".xml": "application/xml",
  ".yaml": "application/yaml",
  ".yml": "application/yaml",
  ".html": "text/html; charset=utf-8",
  ".htm": "text/html; charset=utf-8",
  ".pdf": "application/pdf",
  ".png": "image/png",
  ".jpg": "image/jpeg",
  ".jpeg": "image/jpeg",
  ".gif": "image/gif",
  ".svg": "image/svg+xml",
  ".webp": "image/webp",
  ".zip": "application/zip",
  ".gz": "application/gzip",
  ".tar": "application/x-tar",
  ".parquet": "application/vnd.apache.parquet",
  ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
  ".py": "text/x-python; charset=utf-8",
};

export const DEFAULT_CONTENT_TYPE = "application/octet-stream";

export function contentTypeOf(name: string): string {
  return TYPES[path.posix.extname(name).toLowerCase()] ?? DEFAULT_CONTENT_TYPE;
}
