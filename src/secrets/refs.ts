/**
 * `${secret.NAME}` references inside flow configs (docs/secrets.md): where they may appear and how
 * a text splits around them. Pure: nothing here reads a value.
 */
import type { JsonPath } from "../flows/schema-issues.ts";

/**
 * A secret's name: usable as an environment variable name as it is, and at most 100 characters,
 * the longest path parameter the HTTP server accepts (`/secret/{name}`).
 */
export const SECRET_NAME_PATTERN = "^[A-Za-z_][A-Za-z0-9_]{0,99}$";
const SECRET_NAME = new RegExp(SECRET_NAME_PATTERN);
const REF = /\$\{secret\.([^}]*)\}/g;

export const isSecretName = (name: string): boolean => SECRET_NAME.test(name);

export type TextPart = { literal: string } | { secret: string };

/** The text cut into literal pieces and references, in order; a text without any is one piece. */
export function splitSecretRefs(text: string): TextPart[] {
  const parts: TextPart[] = [];
  let at = 0;
  for (const m of text.matchAll(REF)) {
    if (m.index > at) parts.push({ literal: text.slice(at, m.index) });
    parts.push({ secret: m[1] ?? "" });
    at = m.index + m[0].length;
  }
  if (at < text.length || parts.length === 0) parts.push({ literal: text.slice(at) });
  return parts;
}

/** The names a text references (malformed names included: the validator reports them). */
export function secretNamesIn(text: string): string[] {
  return [...text.matchAll(REF)].map((m) => m[1] ?? "");
}

/** A reference found in a vertex's config: the field (relative to `config`) and the name. */
export interface ConfigSecretRef {
  path: JsonPath;
  name: string;
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** Fields that may hold references: an http node's url and header values, a script node's env. */
export function secretRefsOfConfig(type: unknown, config: unknown): ConfigSecretRef[] {
  if (!isRecord(config)) return [];
  const out: ConfigSecretRef[] = [];
  const scan = (text: unknown, path: JsonPath) => {
    if (typeof text !== "string") return;
    for (const name of secretNamesIn(text)) out.push({ path, name });
  };
  if (type === "http") {
    scan(config.url, ["url"]);
    if (isRecord(config.headers))
      for (const [k, v] of Object.entries(config.headers)) scan(v, ["headers", k]);
  }
  if (type === "script" && isRecord(config.env))
    for (const [k, v] of Object.entries(config.env)) scan(v, ["env", k]);
  return out;
}

/** Every secret name a stored graph references (the delete check). */
export function secretNamesOfGraph(flow: unknown): Set<string> {
  const names = new Set<string>();
  const vertexes = isRecord(flow) && Array.isArray(flow.vertexes) ? flow.vertexes : [];
  for (const v of vertexes) {
    if (!isRecord(v)) continue;
    for (const ref of secretRefsOfConfig(v.type, v.config)) names.add(ref.name);
  }
  return names;
}
