import { type Locator, locateElement } from "../elements/locator.ts";
import type { FlowDeps, ScriptResult } from "../flows/executor.ts";
import type { ScriptRunner, ScriptSource, TaskOutcome } from "../scripts/runner-types.ts";
import type { Scope, Store } from "../store/types.ts";

/**
 * A flow's script nodes run as the script service runs tasks: same runner, same conventions,
 * the node input as parameter. All nodes of one run share its working directory.
 */
export function scriptNodeRunner(deps: {
  store: Store;
  runner: ScriptRunner;
  scope: Scope;
  runId: string;
  /** Told of every Python execution's outcome (metrics). */
  onScript?: ((o: TaskOutcome) => void) | undefined;
}): FlowDeps["runScript"] {
  let seq = 0;
  return async (req) => {
    const source =
      req.code !== undefined ? inline(req.nodeId, req.code) : await byElement(deps, req.element);
    const taskId = `${deps.runId}.${req.nodeId}.${seq++}`;
    const onAbort = () => deps.runner.kill(taskId, "terminate");
    req.signal.addEventListener("abort", onAbort, { once: true });
    try {
      const o = await deps.runner.run({
        taskId,
        source,
        parameter: req.parameter,
        workDirName: deps.runId,
        keepWorkDir: true,
        ...(req.timeoutMs !== undefined ? { timeoutMs: req.timeoutMs } : {}),
      });
      deps.onScript?.(o);
      const result: ScriptResult =
        o.status === "SUCCESS"
          ? { ok: true, value: o.value, stdout: o.stdout, stderr: o.stderr }
          : {
              ok: false,
              error: o.error ? `${o.error.type}: ${o.error.message}` : o.status,
              stdout: o.stdout,
              stderr: o.stderr,
            };
      return result;
    } finally {
      req.signal.removeEventListener("abort", onAbort);
    }
  };
}

function inline(nodeId: string, code: string): ScriptSource {
  const name = `node_${nodeId.replace(/[^A-Za-z0-9_]/g, "_")}`;
  return { name, kind: "module", content: Buffer.from(code, "utf8") };
}

async function byElement(
  deps: { store: Store; scope: Scope },
  loc: Locator | undefined,
): Promise<ScriptSource> {
  if (!loc) throw new Error("script node has neither element nor code");
  const el = await locateElement(deps.store, deps.scope, loc, "PY");
  const script = await deps.store.scriptById(deps.scope, el.id);
  if (!script) throw new Error(`script element ${el.name} vanished`);
  return { name: script.name, kind: script.kind, content: script.content };
}
