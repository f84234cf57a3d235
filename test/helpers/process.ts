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

/** The line `sluice` writes on stderr once it listens, whatever LOG_LEVEL (docs/operations.md). */
const LISTENING = /^sluice: listening on (http:\/\/\S+)\n/m;

/**
 * Starts `sluice <role>` as a real OS process and resolves once it has said it listens and /health
 * answers; rejects with what it wrote if it exits first, or says nothing within `ms`.
 */
export async function startProcess(
  env: Record<string, string>,
  role = "serve",
  ms = 20_000,
): Promise<{ child: ChildProcess; url: string; output: () => string }> {
  const port = env.PORT ?? String(await freePort());
  let output = "";
  const child = spawn(process.execPath, [BIN, role], {
    env: { ...process.env, LOG_LEVEL: "warn", ...env, PORT: port, HOST: "127.0.0.1" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`sluice ${role} did not start listening within ${ms} ms:\n${output}`));
    }, ms);
    child.stdout?.on("data", (c) => (output += c));
    /** What it wrote on stderr until it said it listens. */
    let said: string | undefined = "";
    child.stderr?.on("data", (c) => {
      output += c;
      if (said === undefined) return;
      said += c;
      const m = LISTENING.exec(said);
      if (m?.[1]) {
        clearTimeout(timer);
        said = undefined;
        resolve(m[1]);
      }
    });
    child.once("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    // "close", not "exit": everything it wrote has been read by then.
    child.once("close", () => {
      clearTimeout(timer);
      reject(new Error(`sluice ${role} exited early:\n${output}`));
    });
  });
  const health = await fetch(`${url}/health`);
  await health.text();
  if (!health.ok) {
    child.kill("SIGKILL");
    throw new Error(`sluice ${role} listens but /health answered ${health.status}:\n${output}`);
  }
  return { child, url, output: () => output };
}

export function killHard(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once("exit", () => resolve());
    child.kill("SIGKILL");
  });
}
