import type { ScriptSource } from "../scripts/runner-types.ts";
import { scriptHeader } from "../scripts/script-header.ts";
import { isSecretName } from "./refs.ts";
import type { SecretResolver } from "./secrets.ts";

/**
 * What one Python task is given besides its parameter: its element's declared secrets as
 * variables named like them, then `env` (a script node's, secrets already resolved), and every
 * secret value of the run to mask in its outcome.
 */
export async function taskSecrets(
  source: ScriptSource,
  resolver: SecretResolver | undefined,
  env: Record<string, string> | undefined,
): Promise<{ env?: Record<string, string>; mask?: readonly string[] }> {
  const names = (await scriptHeader(source)).secrets;
  const bad = names.find((n) => !isSecretName(n));
  if (bad !== undefined)
    throw new Error(`script ${source.name} declares an invalid secret name: ${bad}`);
  if (names.length > 0 && !resolver)
    throw new Error("secrets are not available: SECRETS_KEY is not set");
  const declared = resolver && names.length > 0 ? await resolver.values(names) : new Map();
  if (declared.size === 0 && env === undefined)
    return resolver ? { mask: resolver.handedOut() } : {};
  return {
    env: { ...Object.fromEntries(declared), ...env },
    ...(resolver ? { mask: resolver.handedOut() } : {}),
  };
}
