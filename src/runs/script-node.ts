import type { NodeFiles } from "../artifacts/node-files.ts";
import { type Locator, locateElement } from "../elements/locator.ts";
import type { FlowDeps, ScriptResult } from "../flows/executor.ts";
import type { ScriptRunner, ScriptSource, TaskOutcome } from "../scripts/runner-types.ts";
import { errorLine, tracebackOf } from "../scripts/traceback.ts";
import type { SecretResolver } from "../secrets/secrets.ts";
import { taskSecrets } from "../secrets/task-env.ts";
import type { ScriptPin } from "../store/revision-types.ts";
import type { Scope, Store } from "../store/types.ts";
import type { RunDisk } from "./run-disk.ts";

/** A script version a run's node ran (docs/monitoring.md, run detail `scripts`). */
export interface ScriptUse extends ScriptPin {
  /** false: the revision pinned nothing for this node (released before pins existed). */
  pinned: boolean;
}

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
  /** The script versions the run's revision pinned when it last became the release. */
  pins: readonly ScriptPin[];
  /** Each script version the run executes is added here once (the run's detail). */
  used: ScriptUse[];
  /** The run's secrets: an element's declared ones, and masking (docs/secrets.md). */
  secrets?: SecretResolver | undefined;
  /** A run that keeps its files: which node wrote which (docs/artifacts.md). */
  nodeFiles?: NodeFiles | undefined;
  /** A node's output as it is printed, masked (docs/live-progress.md). */
  onOutput?: ((nodeId: string, stream: "stdout" | "stderr", text: string) => void) | undefined;
  /** The run's directory on the data directory's disk, watched while a node runs (docs/security.md, "Disk"). */
  disk?: RunDisk | undefined;
}): FlowDeps["runScript"] {
  let seq = 0;
  return async (req) => {
    const source =
      req.code !== undefined
        ? inline(req.nodeId, req.code)
        : await byElement(deps, req.nodeId, req.element);
    const given = await taskSecrets(source, deps.secrets, req.env);
    const refused = await deps.disk?.admit();
    if (refused) return { ok: false, error: refused, stdout: "", stderr: "" };
    const taskId = `${deps.runId}.${req.nodeId}.${seq++}`;
    const onAbort = () => deps.runner.kill(taskId, "terminate");
    req.signal.addEventListener("abort", onAbort, { once: true });
    // Aborted while it waited above (admission may give kept directories back): the listener
    // would never fire, so no task starts; the run has ended, its directory counted
    // (docs/security.md, "Disk", "Kept directories").
    if (req.signal.aborted) {
      req.signal.removeEventListener("abort", onAbort);
      return { ok: false, error: "run canceled", stdout: "", stderr: "" };
    }
    // Stopped from outside when the run passes its disk budget, or the filesystem its floor.
    const watch = deps.disk?.watch(() => deps.runner.kill(taskId, "timeout"));
    try {
      const o = await deps.runner.run({
        taskId,
        source,
        parameter: req.parameter,
        workDirName: deps.runId,
        keepWorkDir: true,
        ...given,
        ...(req.timeoutMs !== undefined ? { timeoutMs: req.timeoutMs } : {}),
        onOutput: deps.onOutput && ((stream, text) => deps.onOutput?.(req.nodeId, stream, text)),
      });
      deps.onScript?.(o);
      const overDisk = await watch?.end();
      await deps.nodeFiles?.afterNode(req.nodeId);
      const result: ScriptResult = overDisk
        ? { ok: false, error: overDisk, stdout: o.stdout, stderr: o.stderr }
        : o.status === "SUCCESS"
          ? { ok: true, value: o.value, stdout: o.stdout, stderr: o.stderr }
          : {
              ok: false,
              error: o.error ? errorLine(o.error) : o.status,
              stdout: o.stdout,
              stderr: o.stderr,
              ...withTraceback(o),
            };
      return result;
    } finally {
      req.signal.removeEventListener("abort", onAbort);
      await watch?.end();
    }
  };
}

function inline(nodeId: string, code: string): ScriptSource {
  const name = `node_${nodeId.replace(/[^A-Za-z0-9_]/g, "_")}`;
  return { name, kind: "module", content: Buffer.from(code, "utf8") };
}

/**
 * The source of a node that names a PY element: the version its revision pinned, else (a revision
 * released before pins existed) the element's newest version (docs/dataflow-service.md, "Script pins").
 */
async function byElement(
  deps: { store: Store; scope: Scope; pins: readonly ScriptPin[]; used: ScriptUse[] },
  nodeId: string,
  loc: Locator | undefined,
): Promise<ScriptSource> {
  if (!loc) throw new Error("script node has neither element nor code");
  const pin = deps.pins.find((p) => p.nodeId === nodeId);
  let use: ScriptUse;
  let name: string;
  if (pin) {
    use = { ...pin, pinned: true };
    name = pin.elementName;
  } else {
    const el = await locateElement(deps.store, deps.scope, loc, "PY");
    const newest = await deps.store.scriptVersion(el.id, null);
    if (!newest) throw new Error(`script element ${el.name} has no version`);
    const at = { elementId: el.id, elementName: el.name, path: el.path };
    use = { nodeId, ...at, version: newest.version, sha256: newest.sha256, pinned: false };
    name = el.name;
  }
  const version = await deps.store.scriptVersion(use.elementId, use.version);
  if (!version)
    throw new Error(`version ${use.version} of script ${use.elementName} no longer exists`);
  if (!deps.used.some((u) => u.nodeId === nodeId)) deps.used.push(use);
  return { name, kind: version.kind, content: version.content, env: version.env };
}

function withTraceback(o: TaskOutcome) {
  const traceback = tracebackOf(o.error);
  return traceback ? { traceback } : {};
}
