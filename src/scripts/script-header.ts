import { MAX_RETENTION_DAYS } from "../runs/retention-rules.ts";
import { isSecretName } from "../secrets/refs.ts";
import type { ScriptSource } from "./runner-types.ts";
import { inspectZip } from "./zip-inspect.ts";

/**
 * What a PY element declares about itself in comment lines of its module (a package: of its
 * entry module), docs/script-service.md, "Declarations":
 *   # sluice-secrets: A, B               the secrets it reads (docs/secrets.md)
 *   # sluice-max-concurrent-runs: 2      its tasks executing at once (docs/run-limits.md)
 *   # sluice-retention-days: 30          how long its task records are kept (docs/retention.md)
 */
export interface ScriptHeader {
  /** Declared secret names as written (an invalid one is a `problem`, and kept: see below). */
  secrets: string[];
  /** Absent: no limit. */
  maxConcurrentRuns?: number;
  /** Days its finished tasks are kept; 0: for good; absent: RUN_RETENTION_DAYS. */
  retentionDays?: number;
  /** A declaration that cannot be honoured: the upload is refused with it. */
  problem?: string;
}

const SECRETS = /^#\s*sluice-secrets:(.*)$/gm;
const LIMIT = /^#\s*sluice-max-concurrent-runs:(.*)$/gm;
const RETENTION = /^#\s*sluice-retention-days:(.*)$/gm;

/** The declarations of one module's text. */
export function parseHeader(text: string): ScriptHeader {
  const secrets: string[] = [];
  for (const m of text.matchAll(SECRETS)) {
    for (const n of (m[1] ?? "").split(/[,\s]+/)) if (n !== "") secrets.push(n);
  }
  const header: ScriptHeader = { secrets: [...new Set(secrets)] };
  const limit = declaredNumber(text, LIMIT, "sluice-max-concurrent-runs", 1, 999_999);
  if (typeof limit === "number") header.maxConcurrentRuns = limit;
  const days = declaredNumber(text, RETENTION, "sluice-retention-days", 0, MAX_RETENTION_DAYS);
  if (typeof days === "number") header.retentionDays = days;
  // Kept in `secrets` all the same: a version stored before this check fails its task naming it.
  const badName = header.secrets.find((n) => !isSecretName(n));
  const badSecret =
    badName === undefined
      ? undefined
      : `sluice-secrets: "${badName}" is not a secret name (letters, digits and _, not starting with a digit, at most 100 characters)`;
  const problem = [badSecret, limit, days].find((v) => typeof v === "string");
  if (problem !== undefined) header.problem = problem;
  return header;
}

/** A whole-number declaration: absent, its value, or the problem with it (a string). */
function declaredNumber(
  text: string,
  pattern: RegExp,
  name: string,
  min: number,
  max: number,
): number | string | undefined {
  const values = [...text.matchAll(pattern)].map((m) => (m[1] ?? "").trim());
  if (values.length === 0) return undefined;
  if (values.length > 1) return `${name} is declared more than once`;
  const value = values[0] as string;
  const n = /^(0|[1-9][0-9]{0,8})$/.test(value) ? Number(value) : Number.NaN;
  if (Number.isNaN(n) || n < min || n > max)
    return `${name} must be a whole number from ${min} to ${max}, got "${value}"`;
  return n;
}

/**
 * A stored version's bytes never change, and the version caches (src/store/script-cache.ts) hand
 * out the same buffer for it, so each is read once however many tasks it runs.
 */
const parsed = new WeakMap<Uint8Array, Promise<ScriptHeader>>();

/** The declarations of a module, or of a package's entry module. */
export function scriptHeader(
  source: Pick<ScriptSource, "kind" | "content">,
): Promise<ScriptHeader> {
  const hit = parsed.get(source.content);
  if (hit) return hit;
  const header = readHeader(source);
  parsed.set(source.content, header);
  return header;
}

async function readHeader(source: Pick<ScriptSource, "kind" | "content">): Promise<ScriptHeader> {
  if (source.kind === "module") return parseHeader(Buffer.from(source.content).toString());
  // Stored packages passed the upload's zip limits already.
  const unbounded = {
    zipEntries: Number.POSITIVE_INFINITY,
    zipUncompressedBytes: Number.POSITIVE_INFINITY,
  };
  const zip = await inspectZip(Buffer.from(source.content), unbounded);
  const main = zip.ok ? zip.pyFiles.find((f) => f.name === zip.entry) : undefined;
  return main ? parseHeader(main.source.toString()) : { secrets: [] };
}
