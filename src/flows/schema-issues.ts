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
  for (const e of v.Errors(value)) {
    const base = pointerToPath(e.instancePath);
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
