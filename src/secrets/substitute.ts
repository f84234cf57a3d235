import { splitSecretRefs } from "./refs.ts";

/** Where a node gets secret values at execution: the run's resolver (secrets.ts). */
export interface SecretValues {
  values(names: readonly string[]): Promise<Map<string, string>>;
  /** Every value handed out so far (a text cut before the run's masking is masked with them). */
  handedOut(): string[];
}

/**
 * A config text with its `${secret.NAME}` references replaced by the values, and each literal
 * piece between them through `render` (an http node's `{{…}}` templates). Only the literal pieces
 * are rendered: a value rendered from the input that spells `${secret.X}` stays that text, and a
 * secret's value is never read as a template. A text without references is `render(text)` as is.
 */
export async function substituteSecrets(
  text: string,
  secrets: SecretValues | undefined,
  render: (literal: string) => Promise<unknown> = async (literal) => literal,
): Promise<unknown> {
  const parts = splitSecretRefs(text);
  const only = parts.length === 1 ? parts[0] : undefined;
  if (only && "literal" in only) return render(only.literal);
  if (!secrets) throw new Error("secrets are not available: SECRETS_KEY is not set");
  const values = await secrets.values(parts.flatMap((p) => ("secret" in p ? [p.secret] : [])));
  let out = "";
  for (const p of parts) {
    if ("secret" in p) out += values.get(p.secret) ?? "";
    else {
      const v = await render(p.literal);
      out += typeof v === "string" ? v : JSON.stringify(v);
    }
  }
  return out;
}
