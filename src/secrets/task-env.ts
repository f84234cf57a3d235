import type { ScriptSource } from "../scripts/runner-types.ts";
import { inspectZip } from "../scripts/zip-inspect.ts";
import { declaredSecrets, isSecretName } from "./refs.ts";
import type { SecretResolver } from "./secrets.ts";

/**
 * The names a PY element declares it reads (docs/secrets.md): `# sluice-secrets: A, B` in the
 * module, or in a package's main.py (stored packages passed the upload's checks already).
 */
export async function declaredSecretsOf(source: ScriptSource): Promise<string[]> {
  if (source.kind === "module") return declaredSecrets(Buffer.from(source.content).toString());
  const unbounded = {
    zipEntries: Number.POSITIVE_INFINITY,
    zipUncompressedBytes: Number.POSITIVE_INFINITY,
  };
  const zip = await inspectZip(Buffer.from(source.content), unbounded);
  const main = zip.ok ? zip.pyFiles.find((f) => f.name === zip.entry) : undefined;
  return main ? declaredSecrets(main.source.toString()) : [];
}

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
  const names = await declaredSecretsOf(source);
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
