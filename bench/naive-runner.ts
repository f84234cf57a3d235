/**
 * Baseline for benchmarks: one fresh `/usr/bin/python3` per task, no sandbox, no pooling.
 * Same `run(spec)` shape as the real runner, so a bench can swap one for the other.
 */
import { spawn } from "node:child_process";
import type { Readable, Writable } from "node:stream";
import type { TaskOutcome, TaskSpec } from "../src/scripts/runner-types.ts";

// Reads {name, src (base64), param} from stdin, writes the result JSON to fd 3.
const HARNESS = `
import base64, datetime, inspect, json, os, sys, traceback, types, asyncio
task = json.loads(sys.stdin.buffer.read())
def conv(o):
    if isinstance(o, (datetime.datetime, datetime.date)):
        return o.isoformat()
    raise TypeError(f"Object of type {type(o).__name__} is not JSON serializable")
try:
    mod = types.ModuleType(task["name"])
    sys.modules[task["name"]] = mod
    exec(compile(base64.b64decode(task["src"]), task["name"] + ".py", "exec"), mod.__dict__)
    n = len(inspect.signature(mod.main).parameters)
    p = task["param"]
    out = mod.main() if n == 0 else mod.main(**p) if n > 1 and isinstance(p, dict) else mod.main(p)
    if inspect.isawaitable(out):
        async def wait(): return await out
        out = asyncio.run(wait())
    msg = json.dumps({"ok": True, "value": out}, default=conv)
except BaseException as e:
    msg = json.dumps({"ok": False, "error": {"type": type(e).__name__, "message": str(e),
                                             "traceback": traceback.format_exc()}})
sys.stdout.flush()
os.write(3, msg.encode())
`;

async function collect(stream: Readable | null): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of stream ?? []) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

export function createNaiveRunner(python = "/usr/bin/python3") {
  return {
    async run(spec: TaskSpec): Promise<TaskOutcome> {
      const started = performance.now();
      const child = spawn(python, ["-I", "-c", HARNESS], {
        stdio: ["pipe", "pipe", "pipe", "pipe"],
        env: { PATH: "/usr/bin:/bin", LANG: "C.UTF-8" },
      });
      const kill = spec.timeoutMs
        ? setTimeout(() => child.kill("SIGKILL"), spec.timeoutMs)
        : undefined;
      const exited = new Promise<number | null>((r) => child.once("close", (code) => r(code)));
      child.stdin.end(
        JSON.stringify({
          name: spec.source.name,
          src: Buffer.from(spec.source.content).toString("base64"),
          param: spec.parameter ?? null,
        }),
      );
      const [stdout, stderr, result, code] = await Promise.all([
        collect(child.stdout),
        collect(child.stderr),
        collect(child.stdio[3] as Readable & Writable),
        exited,
      ]);
      clearTimeout(kill);
      const base = { stdout, stderr, durationMs: performance.now() - started };
      if (!result) {
        return {
          status: "FAILURE",
          error: { type: "ProcessDied", message: `python exited with code ${code}` },
          ...base,
        };
      }
      const msg = JSON.parse(result) as
        | { ok: true; value: unknown }
        | { ok: false; error: { type: string; message: string; traceback: string } };
      return msg.ok
        ? { status: "SUCCESS", value: msg.value, ...base }
        : { status: "FAILURE", error: msg.error, ...base };
    },
  };
}
