import { type ChildProcess, execFile, spawn } from "node:child_process";
import net from "node:net";
import path from "node:path";

/** The `sluice` command (docs/cli.md). */
export const BIN = path.resolve(import.meta.dirname, "../../bin/sluice.js");

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the real `sluice` binary as a separate process, as a script would. */
export function sluice(args: string[], env: Record<string, string> = {}): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      { env: { PATH: process.env.PATH ?? "", ...env }, timeout: 60_000 },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === "number" ? err.code : -1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
    srv.on("error", reject);
  });
}

/** Starts `sluice <role>` as a real OS process and resolves once /health answers. */
export async function startProcess(
  env: Record<string, string>,
  role = "serve",
): Promise<{ child: ChildProcess; url: string; output: () => string }> {
  const port = env.PORT ?? String(await freePort());
  let output = "";
  const child = spawn(process.execPath, [BIN, role], {
    env: { ...process.env, LOG_LEVEL: "warn", ...env, PORT: port, HOST: "127.0.0.1" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout?.on("data", (c) => (output += c));
  child.stderr?.on("data", (c) => (output += c));
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 200; i++) {
    if (child.exitCode !== null) throw new Error(`sluice ${role} exited early:\n${output}`);
    try {
      const r = await fetch(`${url}/health`);
      if (r.ok) return { child, url, output: () => output };
    } catch {}
    await new Promise((r) => setTimeout(r, 50));
  }
  child.kill("SIGKILL");
  throw new Error(`sluice ${role} did not become healthy:\n${output}`);
}

export function killHard(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once("exit", () => resolve());
    child.kill("SIGKILL");
  });
}
