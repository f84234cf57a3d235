import type { Logger } from "pino";
import type { Clock } from "../clock.ts";
import { ErrorCode, SluiceError } from "../errors.ts";
import type { Scope } from "../store/types.ts";
import { decryptWith, encryptValue, type KeyRing, SecretUnreadable } from "./crypto.ts";
import { secretNamesOfGraph } from "./refs.ts";
import type { SecretInfo, SecretStore } from "./secret-store.ts";

/**
 * Secrets per (app, space) (docs/secrets.md). Values go in encrypted and come out only through a
 * resolver, to the run that uses them; nothing here logs or answers a value.
 */
export interface Secrets {
  put(scope: Scope, name: string, value: string): Promise<SecretInfo>;
  list(scope: Scope): Promise<SecretInfo[]>;
  /** Refused while a flow of the scope whose release is approved references it. */
  remove(scope: Scope, name: string): Promise<void>;
  /** Whether the scope has the secret (deploy validation; false when secrets are off). */
  exists(scope: Scope, name: string): Promise<boolean>;
  /** The values one run or task may read, remembered for masking what it records. */
  resolver(scope: Scope): SecretResolver;
}

/** What deploy validation asks of the secrets. */
export type SecretLookup = Pick<Secrets, "exists">;

export interface SecretResolver {
  /** Every name's value; an unknown name (or secrets off) is an error naming it, never a value. */
  values(names: readonly string[]): Promise<Map<string, string>>;
  /** Every value handed out so far: what the run's records are masked with. */
  handedOut(): string[];
}

/** The associated data of a stored value: the row it belongs to (crypto.ts). */
const aadOf = (r: { app: string; space: string; name: string }) =>
  `secret\u0000${r.app}\u0000${r.space}\u0000${r.name}`;
const CHECK_AAD = "sluice-key-check";
const CHECK_TEXT = "sluice secrets key check v1";

const unavailable = () => new SluiceError(ErrorCode.SECRETS_UNAVAILABLE);

export async function createSecrets(deps: {
  config: { secrets: { key: Buffer | undefined; previousKey: Buffer | undefined } };
  store: SecretStore;
  clock: Clock;
  logger: Logger;
}): Promise<Secrets> {
  const { store, clock } = deps;
  const { key, previousKey } = deps.config.secrets;
  const ring: KeyRing | undefined = key && { current: key, previous: previousKey };
  if (ring) await checkKeys(store, ring, deps.logger);
  const need = (): KeyRing => {
    if (!ring) throw unavailable();
    return ring;
  };

  return {
    async put(scope, name, value) {
      const encrypted = encryptValue(need().current, value, aadOf({ ...scope, name }));
      return store.put(scope, name, encrypted, clock.now());
    },
    async list(scope) {
      need();
      return store.list(scope);
    },
    async remove(scope, name) {
      need();
      const users = (await store.liveFlows(scope))
        .filter((f) => secretNamesOfGraph(parseJson(f.flow)).has(name))
        .map((f) => f.name);
      if (users.length > 0)
        throw new SluiceError(ErrorCode.SECRET_IN_USE, [name, users.join(", ")]);
      if (!(await store.remove(scope, name)))
        throw new SluiceError(ErrorCode.SECRET_NOT_FOUND, [name]);
    },
    async exists(scope, name) {
      if (!ring) return false;
      return (await store.encrypted(scope, [name])).has(name);
    },
    resolver: (scope) => createResolver(store, ring, scope),
  };
}

function createResolver(
  store: SecretStore,
  ring: KeyRing | undefined,
  scope: Scope,
): SecretResolver {
  // One read per name and run: every node of a run sees the same value, and the run's records
  // are masked with each value it was given.
  const given = new Map<string, string>();
  return {
    async values(names) {
      const out = new Map<string, string>();
      const missing = [...new Set(names)].filter((n) => !given.has(n));
      if (missing.length > 0) {
        if (!ring) throw new Error("secrets are not available: SECRETS_KEY is not set");
        const stored = await store.encrypted(scope, missing);
        for (const name of missing)
          given.set(name, await open(store, ring, scope, name, stored.get(name)));
      }
      for (const name of names) out.set(name, given.get(name) ?? "");
      return out;
    },
    handedOut: () => [...given.values()],
  };
}

/** One stored value, opened; one the previous key opened is re-encrypted with the current one. */
async function open(
  store: SecretStore,
  ring: KeyRing,
  scope: Scope,
  name: string,
  text: string | undefined,
): Promise<string> {
  if (text === undefined) throw new Error(`secret ${name} does not exist in this space`);
  const row = { ...scope, name, value: text };
  let opened: { value: string; rotated: boolean };
  try {
    opened = decryptWith(ring, text, aadOf(row));
  } catch (err) {
    if (!(err instanceof SecretUnreadable)) throw err;
    throw new Error(`secret ${name} cannot be decrypted with the configured keys`);
  }
  // Written with the previous key by a process not yet restarted: re-encrypted on use.
  if (opened.rotated) {
    const value = encryptValue(ring.current, opened.value, aadOf(row));
    await store.rewrite({ ...row, value }, text);
  }
  return opened.value;
}

/**
 * At start: the stored key check must open with SECRETS_KEY (or, rotating, with
 * SECRETS_KEY_PREVIOUS), else the start is refused; a rotation re-encrypts every value with the
 * new key and then the check. Messages name the variables, never a key or a value.
 */
async function checkKeys(store: SecretStore, ring: KeyRing, logger: Logger): Promise<void> {
  let check = await store.keyCheck();
  if (check === undefined) {
    // Another process starting now may write its check first (the insert does nothing then):
    // what is stored afterwards is checked like any check, so its key wins and ours is refused.
    await store.setKeyCheck(encryptValue(ring.current, CHECK_TEXT, CHECK_AAD), undefined);
    check = await store.keyCheck();
    if (check === undefined) throw new Error("the secrets key check could not be stored");
  }
  let opened: { value: string; rotated: boolean } | undefined;
  try {
    opened = decryptWith(ring, check, CHECK_AAD);
  } catch (err) {
    if (!(err instanceof SecretUnreadable)) throw err;
  }
  if (opened?.value !== CHECK_TEXT) {
    throw new Error(
      "SECRETS_KEY does not match the key the stored secrets were encrypted with: start with " +
        "that key, or rotate by giving it as SECRETS_KEY_PREVIOUS and the new key as SECRETS_KEY " +
        "(docs/secrets.md)",
    );
  }
  if (!ring.previous) return;
  let rotated = 0;
  for (const row of await store.all()) {
    try {
      const v = decryptWith(ring, row.value, aadOf(row));
      if (!v.rotated) continue;
      await store.rewrite(
        { ...row, value: encryptValue(ring.current, v.value, aadOf(row)) },
        row.value,
      );
      rotated++;
    } catch (err) {
      if (!(err instanceof SecretUnreadable)) throw err;
      logger.error(
        { app: row.app, space: row.space, secret: row.name },
        "a stored secret opens with neither SECRETS_KEY nor SECRETS_KEY_PREVIOUS; it stays unreadable until set again",
      );
    }
  }
  if (opened.rotated)
    await store.setKeyCheck(encryptValue(ring.current, CHECK_TEXT, CHECK_AAD), check);
  if (rotated > 0 || opened.rotated)
    logger.info({ secrets: rotated }, "secrets re-encrypted with the new SECRETS_KEY");
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}
