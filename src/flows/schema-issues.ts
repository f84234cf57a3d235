/** TypeBox schema errors as JSON paths (for validation results that point into the request). */
import type { TSchema } from "typebox";
import { Compile } from "typebox/compile";

export type JsonPath = (string | number)[];
export interface PathIssue {
  path: JsonPath;
  message: string;
}

type Validator = ReturnType<typeof Compile>;
const compiled = new WeakMap<TSchema, Validator>();

/** `/a/0/b` → ["a", 0, "b"]; JSON pointer escapes (~1, ~0) undone. */
export function pointerToPath(pointer: string): JsonPath {
  if (pointer === "") return [];
  return pointer
    .slice(1)
    .split("/")
    .map((seg) => seg.replace(/~1/g, "/").replace(/~0/g, "~"))
    .map((seg) => (/^(0|[1-9]\d*)$/.test(seg) ? Number(seg) : seg));
}

/**
 * Issues of `value` against `schema`, one per offending path. A missing required property is
 * reported at the property's own path, which is where a user has to add it.
 */
export function schemaIssues(schema: TSchema, value: unknown): PathIssue[] {
  let v = compiled.get(schema);
  if (!v) {
    v = Compile(schema);
    compiled.set(schema, v);
  }
  if (v.Check(value)) return [];
  const issues: PathIssue[] = [];
  const seen = new Set<string>();
  const errors = [...v.Errors(value)];
  const oneOf = literalChoices(errors);
  for (const e of errors) {
    const base = pointerToPath(e.instancePath);
    const choices = oneOf.get(e.instancePath);
    if (choices !== undefined) {
      // A value outside a list of literals (an http method, a trigger's type): which ones may be.
      const key = JSON.stringify(base);
      if (!seen.has(key)) issues.push({ path: base, message: `must be one of ${choices}` });
      seen.add(key);
      continue;
    }
    const params = e.params as { requiredProperties?: string[]; additionalProperties?: string[] };
    // "schema is false" duplicates the additionalProperties error that names the keys.
    if (e.keyword === "boolean") continue;
    const paths =
      e.keyword === "required" && params.requiredProperties
        ? params.requiredProperties.map((p) => ({ path: [...base, p], message: "is required" }))
        : e.keyword === "additionalProperties" && params.additionalProperties
          ? params.additionalProperties.map((p) => ({
              path: [...base, p],
              message: "is not allowed",
            }))
          : [{ path: base, message: e.message }];
    for (const issue of paths) {
      const key = JSON.stringify(issue.path);
      if (seen.has(key)) continue;
      seen.add(key);
      issues.push(issue);
    }
  }
  return issues;
}

type SchemaError = { keyword: string; schemaPath: string; instancePath: string; params: unknown };

/**
 * The paths whose value failed an `anyOf` of literals only (`Type.Union` of `Type.Literal`), with
 * the literals as text: TypeBox says `must be equal to constant` once per literal, naming none.
 */
function literalChoices(errors: readonly SchemaError[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const any of errors) {
    if (any.keyword !== "anyOf") continue;
    const prefix = `${any.schemaPath}/anyOf/`;
    const branches = new Set<string>();
    const literals = new Map<string, unknown>();
    for (const e of errors) {
      if (e.instancePath !== any.instancePath || !e.schemaPath.startsWith(prefix)) continue;
      const branch = e.schemaPath.slice(prefix.length).split("/")[0] ?? "";
      branches.add(branch);
      const allowed = (e.params as { allowedValue?: unknown } | null)?.allowedValue;
      if (e.keyword === "const" && e.schemaPath === prefix + branch) literals.set(branch, allowed);
    }
    if (branches.size === 0 || literals.size !== branches.size) continue;
    const shown = [...literals.values()].map((l) =>
      typeof l === "string" ? l : JSON.stringify(l),
    );
    out.set(any.instancePath, shown.join(", "));
  }
  return out;
}

/**
 * Keys of `value` that `schema` does not name, where it names its keys (an object schema with
 * `properties` and no pattern or additional ones), followed through named properties and array
 * items; a union, a record or a free-form value (an http body, a JSON Schema) is not looked into.
 */
export function unreadFields(schema: TSchema, value: unknown, at: JsonPath = []): JsonPath[] {
  const s = schema as {
    properties?: Record<string, TSchema>;
    patternProperties?: unknown;
    additionalProperties?: unknown;
    items?: TSchema;
  };
  if (Array.isArray(value))
    return s.items ? value.flatMap((v, i) => unreadFields(s.items as TSchema, v, [...at, i])) : [];
  if (typeof value !== "object" || value === null || s.properties === undefined) return [];
  if (s.patternProperties !== undefined || s.additionalProperties !== undefined) return [];
  const out: JsonPath[] = [];
  for (const [k, v] of Object.entries(value)) {
    const known = Object.hasOwn(s.properties, k) ? s.properties[k] : undefined;
    if (known === undefined) out.push([...at, k]);
    else out.push(...unreadFields(known, v, [...at, k]));
  }
  return out;
}
