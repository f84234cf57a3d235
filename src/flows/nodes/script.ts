/** `script`: Python by PY element locator or inline code (prelude prepended), input as parameter. */
import { Type } from "typebox";
import type { Locator } from "../../elements/locator.ts";
import { SECRET_NAME_PATTERN } from "../../secrets/refs.ts";
import { substituteSecrets } from "../../secrets/substitute.ts";
import { joinPrelude, LocatorSchema } from "../graph.ts";
import type { NodeDef } from "./types.ts";

export const scriptNode: NodeDef = {
  type: "script",
  configSchema: Type.Object({
    element: Type.Optional(LocatorSchema),
    code: Type.Optional(Type.String({ minLength: 1 })),
    /** Environment variables of the task; `${secret.NAME}` in a value is a secret (docs/secrets.md). */
    env: Type.Optional(Type.Record(Type.String({ pattern: SECRET_NAME_PATTERN }), Type.String())),
  }),
  check(config) {
    const hasElement = config.element !== undefined;
    const hasCode = config.code !== undefined;
    if (hasElement === hasCode) {
      return [{ path: [], message: "give exactly one of element and code" }];
    }
    const el = config.element as Locator | undefined;
    if (el?.folderId !== undefined && el.path !== undefined) {
      return [{ path: ["element"], message: "folderId and path are mutually exclusive" }];
    }
    return [];
  },
  async run(ctx) {
    const { vertex, config, deps } = ctx;
    const code =
      typeof config.code === "string" ? joinPrelude(ctx.prelude, config.code).code : undefined;
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries((config.env ?? {}) as Record<string, string>))
      env[k] = String(await substituteSecrets(v, deps.secrets));
    const result = await deps.runScript({
      nodeId: vertex.id,
      ...(config.element !== undefined ? { element: config.element as Locator } : {}),
      ...(code !== undefined ? { code } : {}),
      parameter: ctx.input,
      ...(config.env !== undefined ? { env } : {}),
      ...(vertex.timeoutSeconds !== undefined ? { timeoutMs: vertex.timeoutSeconds * 1000 } : {}),
      signal: ctx.signal,
    });
    ctx.log.stdout = (ctx.log.stdout ?? "") + result.stdout;
    ctx.log.stderr = (ctx.log.stderr ?? "") + result.stderr;
    if (!result.ok) {
      if (result.traceback) ctx.log.traceback = result.traceback;
      throw new Error(result.error);
    }
    return result.value;
  },
};
