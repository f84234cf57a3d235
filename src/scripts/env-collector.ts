import type { Clock, TimerHandle } from "../clock.ts";
import type { ScriptEnvStore } from "../store/kysely-script-envs.ts";
import type { Logger } from "./python-runner-sandbox.ts";
import type { ScriptEnvs } from "./script-envs.ts";

export interface EnvCollector {
  stop(): void;
}

/**
 * Removes unused environments every `everyMs` (SCRIPT_ENV_GC_MS) on this node, on top of the pass
 * after each upload (docs/script-dependencies.md, "Caching"): a node that takes no uploads (a
 * worker) still frees what others' overwrites left unused.
 */
export function startEnvCollector(deps: {
  envs: ScriptEnvs;
  store: ScriptEnvStore;
  clock: Clock;
  everyMs: number;
  logger: Logger;
}): EnvCollector {
  let timer: TimerHandle | undefined;
  let stopped = false;
  const tick = () => {
    deps.envs
      .collect(deps.store)
      .catch((err: unknown) => deps.logger.warn({ err }, "could not remove unused environments"))
      .finally(() => {
        if (!stopped) schedule();
      });
  };
  const schedule = () => {
    timer = deps.clock.setTimeout(tick, deps.everyMs);
    timer.unref?.();
  };
  schedule();
  return {
    stop() {
      stopped = true;
      if (timer) deps.clock.clearTimeout(timer);
    },
  };
}
