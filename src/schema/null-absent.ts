/**
 * "`null` is absent" (docs/errors.md, "How fields are read"), driven by a JSON Schema: a field the
 * schema declares, holding `null` where its type does not allow `null`, is removed, through
 * declared nested objects, arrays and unions of objects. Values the schema leaves free-form (no
 * declared properties) are kept exactly as sent.
 */
export interface ShapeSchema {
  type?: string | string[];
  properties?: Record<string, ShapeSchema>;
  items?: ShapeSchema;
  anyOf?: ShapeSchema[];
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export function typesOf(schema: ShapeSchema): string[] {
  if (schema.anyOf) return schema.anyOf.flatMap(typesOf);
  if (schema.type === undefined) return [];
  return Array.isArray(schema.type) ? schema.type : [schema.type];
}

/** Declared properties; for a union of objects, each variant's (the first declaration wins). */
function propertiesOf(schema: ShapeSchema): Record<string, ShapeSchema> | undefined {
  if (schema.properties) return schema.properties;
  if (!schema.anyOf) return undefined;
  const merged: Record<string, ShapeSchema> = {};
  for (const variant of schema.anyOf) {
    for (const [key, prop] of Object.entries(propertiesOf(variant) ?? {}))
      if (!(key in merged)) merged[key] = prop;
  }
  return Object.keys(merged).length > 0 ? merged : undefined;
}

function itemsOf(schema: ShapeSchema): ShapeSchema | undefined {
  return schema.items ?? schema.anyOf?.find((v) => v.items)?.items;
}

/**
 * Removes declared nulls from `value` in place and returns it. `onField` may replace a declared
 * field's value (the HTTP layer reads text booleans there); it sees non-null values only.
 */
export function dropDeclaredNulls(
  value: unknown,
  schema: ShapeSchema,
  onField?: (field: unknown, prop: ShapeSchema) => unknown,
): unknown {
  if (Array.isArray(value)) {
    const items = itemsOf(schema);
    return items ? value.map((item) => dropDeclaredNulls(item, items, onField)) : value;
  }
  const properties = isRecord(value) ? propertiesOf(schema) : undefined;
  if (!isRecord(value) || !properties) return value;
  for (const [key, prop] of Object.entries(properties)) {
    if (!Object.hasOwn(value, key)) continue;
    const field = value[key];
    if (field === null && !typesOf(prop).includes("null")) delete value[key];
    else value[key] = dropDeclaredNulls(onField ? onField(field, prop) : field, prop, onField);
  }
  return value;
}
