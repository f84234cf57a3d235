/**
 * The forms of docs/errors.md ("How fields are read") as the OpenAPI document states them. Only
 * copies of the route schemas are changed: request-forms.ts reads a route's own schema to decide
 * whether a null is dropped (a type that includes "null" keeps it), so the schemas the server
 * validates with must stay as they are.
 *
 * - JSON bodies: every optional property also accepts `null` (OpenAPI 3.1: "null" added to its
 *   type, or `anyOf` with `{type: "null"}`); declared booleans also accept their text forms.
 * - Query strings and multipart forms: booleans accept true/false/1/0 in any letter case, and an
 *   optional parameter's empty value is the parameter left out.
 * - A body that is optional (free-form, no type) is not required, and says that an empty JSON
 *   body is no body.
 */

type Json = Record<string, unknown>;

/** true, false, 1 or 0 in any letter case (textBoolean in request-forms.ts). */
export const TEXT_BOOLEAN_PATTERN = "^(?:[Tt][Rr][Uu][Ee]|[Ff][Aa][Ll][Ss][Ee]|[01])$";
const TEXT_BOOLEAN_NOTE = "Also as text: true, false, 1 or 0 in any letter case.";
const EMPTY_NOTE = "An empty value is the same as leaving the parameter out.";
const OPTIONAL_BODY_NOTE =
  "Optional: no body, and an empty body sent as `application/json`, are the same.";
const REQUIRED_BODY_NOTE =
  "An optional field sent as `null` is the field left out. No body, an empty one or `null` is the 400 `body is required`.";

function isRecord(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function note(schema: Json, text: string): void {
  const given = typeof schema.description === "string" ? schema.description.trim() : "";
  if (given === "") schema.description = text;
  else schema.description = `${given}${/[.!?]$/.test(given) ? "" : "."} ${text}`;
}

/** A boolean also given as text: its type gains "string", restricted to the text forms. */
function acceptTextBoolean(schema: Json): void {
  if (schema.type !== "boolean") return;
  schema.type = ["boolean", "string"];
  schema.pattern = TEXT_BOOLEAN_PATTERN;
  note(schema, TEXT_BOOLEAN_NOTE);
}

/** The schema that also accepts null: in its type where it has one plain type, else anyOf. */
function orNull(schema: Json): Json {
  const constrained = "enum" in schema || "const" in schema || "$ref" in schema;
  if (typeof schema.type === "string" && !constrained)
    return schema.type === "null" ? schema : { ...schema, type: [schema.type, "null"] };
  if (Array.isArray(schema.type) && !constrained)
    return schema.type.includes("null") ? schema : { ...schema, type: [...schema.type, "null"] };
  if (Array.isArray(schema.anyOf) && schema.type === undefined && !constrained) {
    const hasNull = schema.anyOf.some((s) => isRecord(s) && s.type === "null");
    return hasNull ? schema : { ...schema, anyOf: [...schema.anyOf, { type: "null" }] };
  }
  // No type and no constraint: free-form, null included already.
  if (schema.type === undefined && !constrained && !Array.isArray(schema.oneOf)) return schema;
  return { anyOf: [schema, { type: "null" }] };
}

/** Through a JSON body schema: optional properties nullable, declared booleans also text. */
function walkBody(schema: Json): void {
  if (isRecord(schema.items)) walkBody(schema.items);
  for (const key of ["anyOf", "oneOf", "allOf"]) {
    const list = schema[key];
    if (Array.isArray(list)) for (const s of list) if (isRecord(s)) walkBody(s);
  }
  const props = schema.properties;
  if (!isRecord(props)) return;
  const required = Array.isArray(schema.required) ? schema.required : [];
  for (const [key, prop] of Object.entries(props)) {
    if (!isRecord(prop)) continue;
    walkBody(prop);
    acceptTextBoolean(prop);
    if (!required.includes(key)) props[key] = orNull(prop);
  }
}

/** A copy of a JSON body schema as the document states it. */
export function documentedBody(schema: unknown): unknown {
  if (!isRecord(schema)) return schema;
  const copy = structuredClone(schema);
  walkBody(copy);
  return copy;
}

/** A copy of a query string or multipart form schema as the document states it. */
export function documentedTextFields(schema: unknown): unknown {
  if (!isRecord(schema) || !isRecord(schema.properties)) return schema;
  const copy = structuredClone(schema) as Json & { properties: Record<string, Json> };
  const required = Array.isArray(copy.required) ? copy.required : [];
  for (const [key, prop] of Object.entries(copy.properties)) {
    acceptTextBoolean(prop);
    if (!required.includes(key)) note(prop, EMPTY_NOTE);
  }
  return copy;
}

/**
 * The whole document's request bodies: a free-form JSON body (no type) is optional, which
 * @fastify/swagger cannot say (it marks every body required); each body says how its empty
 * form is read.
 */
export function documentBodies(doc: Json): Json {
  for (const item of Object.values(isRecord(doc.paths) ? doc.paths : {})) {
    if (!isRecord(item)) continue;
    for (const op of Object.values(item)) {
      const body = isRecord(op) ? op.requestBody : undefined;
      if (!isRecord(body) || !isRecord(body.content)) continue;
      const json = body.content["application/json"];
      if (!isRecord(json) || !isRecord(json.schema)) continue;
      const optional = json.schema.type === undefined && json.schema.anyOf === undefined;
      if (optional) body.required = false;
      note(body, optional ? OPTIONAL_BODY_NOTE : REQUIRED_BODY_NOTE);
    }
  }
  return doc;
}
