import { isSecretName, secretRefsOfConfig } from "../secrets/refs.ts";
import type { JsonPath } from "./schema-issues.ts";
import type { ValidationContext } from "./validation-codes.ts";

/**
 * `${secret.NAME}` references of one schema-valid vertex (docs/secrets.md): a malformed name, or
 * (when the context can look secrets up) one the scope does not have, at the field that holds it.
 */
export async function secretIssues(
  type: string,
  config: Record<string, unknown>,
  ctx: ValidationContext,
): Promise<{ path: JsonPath; message: string }[]> {
  const out: { path: JsonPath; message: string }[] = [];
  for (const ref of secretRefsOfConfig(type, config)) {
    if (!isSecretName(ref.name))
      out.push({ path: ref.path, message: `malformed secret reference \${secret.${ref.name}}` });
    else if (ctx.secretExists && !(await ctx.secretExists(ref.name)))
      out.push({ path: ref.path, message: `secret ${ref.name} does not exist in this space` });
  }
  return out;
}
