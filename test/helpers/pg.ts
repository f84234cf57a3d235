import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import pg from "pg";

/**
 * A throwaway PostgreSQL cluster for one test process: initdb into a temp dir, listen on
 * 127.0.0.1 on a free port, trust auth, fsync off. Nothing here assumes a running server.
 */
export interface TestPostgres {
  /** Connection URL of a database in this cluster. */
  url(dbName: string): string;
  /** Creates a fresh database, empty or a copy of `template`, and returns its URL. */
  createDatabase(opts?: { template?: string }): Promise<string>;
  stop(): Promise<void>;
}

let shared: Promise<TestPostgres> | undefined;

/** One cluster per test process, started on first use and stopped when the process exits. */
export function startPostgres(): Promise<TestPostgres> {
  shared ??= launch().catch((err: unknown) => {
    shared = undefined;
    throw err;
  });
  return shared;
}

function findBinDir(): string {
  const candidates: string[] = [];
  if (process.env.PG_BIN) candidates.push(process.env.PG_BIN);
  try {
    // Debian: /usr/lib/postgresql/<major>/bin, newest major first.
    const majors = fs
      .readdirSync("/usr/lib/postgresql")
      .filter((v) => /^\d+$/.test(v))
      .sort((a, b) => Number(b) - Number(a));
    for (const m of majors) candidates.push(`/usr/lib/postgresql/${m}/bin`);
  } catch {
    // not Debian-style; fall through to PATH
  }
  for (const dir of (process.env.PATH ?? "").split(path.delimiter)) if (dir) candidates.push(dir);
  const found = candidates.find(
    (d) => fs.existsSync(path.join(d, "initdb")) && fs.existsSync(path.join(d, "postgres")),
  );
  if (!found) {
    throw new Error(
      "PostgreSQL server binaries (initdb, postgres) not found in /usr/lib/postgresql/*/bin, $PG_BIN or $PATH; " +
        "install them with `apt-get install postgresql` (the tests start their own throwaway cluster)",
    );
  }
  return found;
}

/** postgres refuses to run as root, so as root the cluster runs as the `postgres` OS user. */
function runAs(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const line = fs
    .readFileSync("/etc/passwd", "utf8")
    .split("\n")
    .find((l) => l.startsWith("postgres:"));
  const [, , uid, gid] = line?.split(":") ?? [];
  if (uid === undefined || gid === undefined) {
    throw new Error(
      "running as root but there is no `postgres` OS user; `apt-get install postgresql` creates it",
    );
  }
  return { uid: Number(uid), gid: Number(gid) };
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

/**
 * A fresh initdb's data directory for `bin`, made once and shared by every test process of this
 * machine (each copies it): initdb into a temporary directory, then renamed into place, so a
 * process never sees a half-made one, and two that race keep one.
 */
function template(bin: string, spawnOpts: { uid?: number; gid?: number }): string {
  const version = execFileSync(path.join(bin, "postgres"), ["--version"]).toString().trim();
  const key = `v1 ${version} ${bin} ${spawnOpts.uid ?? process.getuid?.()}`.replace(
    /[^\w.-]+/g,
    "_",
  );
  const target = path.join(os.tmpdir(), `sluice-pg-template-${key}`);
  if (fs.existsSync(path.join(target, "PG_VERSION"))) return target;
  const work = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-pg-initdb-"));
  if (spawnOpts.uid !== undefined)
    fs.chownSync(work, spawnOpts.uid, spawnOpts.gid ?? spawnOpts.uid);
  const made = path.join(work, "data");
  execFileSync(
    path.join(bin, "initdb"),
    [
      "-D",
      made,
      "-U",
      "postgres",
      "-A",
      "trust",
      "-E",
      "UTF8",
      "--locale=C",
      "--no-sync",
      "--no-instructions",
    ],
    { ...spawnOpts, cwd: work, stdio: ["ignore", "ignore", "pipe"] },
  );
  try {
    fs.renameSync(made, target);
  } catch {
    // Another test process put its own in place first: the same thing.
  }
  fs.rmSync(work, { recursive: true, force: true });
  return target;
}

async function launch(): Promise<TestPostgres> {
  const bin = findBinDir();
  const user = runAs();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-pg-"));
  if (user) fs.chownSync(dir, user.uid, user.gid);
  const dataDir = path.join(dir, "data");
  const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", LANG: "C", LC_ALL: "C", HOME: dir };
  const spawnOpts = { cwd: dir, env, ...(user ?? {}) };

  try {
    // A copy of one initdb made for the whole test run: the same cluster, a quarter of the time.
    execFileSync("cp", ["-a", template(bin, spawnOpts), dataDir], { stdio: "ignore" });
  } catch (err) {
    fs.rmSync(dir, { recursive: true, force: true });
    const stderr = (err as { stderr?: Buffer }).stderr?.toString() ?? "";
    throw new Error(`initdb failed: ${stderr || String(err)}`);
  }

  // A port can be taken between probing and binding; retry a few times on a fresh one.
  let lastError: unknown;
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort();
    try {
      const child = await startServer(bin, dataDir, dir, port, spawnOpts);
      return handle(child, port, dir);
    } catch (err) {
      lastError = err;
    }
  }
  fs.rmSync(dir, { recursive: true, force: true });
  throw lastError;
}

/**
 * Runs postgres under a tiny shell watchdog that holds our stdin pipe: when this process goes
 * away for any reason (even SIGKILL) the pipe closes, and the watchdog stops the server and removes
 * the temp dir, so no cluster outlives its test process.
 */
function startServer(
  bin: string,
  dataDir: string,
  dir: string,
  port: number,
  spawnOpts: object,
): Promise<ChildProcess> {
  const args = [
    "-D",
    dataDir,
    "-p",
    String(port),
    "-c",
    "listen_addresses=127.0.0.1",
    "-c",
    `unix_socket_directories=${dir}`,
    "-c",
    "fsync=off",
    "-c",
    "synchronous_commit=off",
    "-c",
    "full_page_writes=off",
    "-c",
    "max_connections=300",
    "-c",
    "logging_collector=off",
    ...(process.env.PG_EXTRA ? ["-c", process.env.PG_EXTRA] : []),
  ];
  const script = `"$@" & pid=$!; cat >/dev/null; kill -QUIT $pid 2>/dev/null; wait $pid; rm -rf "${dir}"`;
  const child = spawn("/bin/sh", ["-c", script, "sh", path.join(bin, "postgres"), ...args], {
    ...spawnOpts,
    stdio: ["pipe", "ignore", "pipe"],
  });
  return new Promise((resolve, reject) => {
    let log = "";
    let ready = false;
    const timer = setTimeout(
      () => fail(new Error(`postgres did not start within 20 s:\n${log}`)),
      20_000,
    );
    const fail = (err: Error) => {
      clearTimeout(timer);
      child.stdin?.end();
      reject(err);
    };
    const onExit = (code: number | null) =>
      fail(new Error(`postgres exited (${code}) while starting:\n${log}`));
    child.on("error", fail);
    child.on("exit", onExit);
    child.stderr?.on("data", (chunk: Buffer) => {
      if (ready) return; // keep draining so the server never blocks on a full pipe
      // Keep only the tail for diagnostics.
      log = (log + chunk.toString()).slice(-8000);
      if (log.includes("database system is ready to accept connections")) {
        ready = true;
        clearTimeout(timer);
        child.off("exit", onExit);
        child.off("error", fail);
        resolve(child);
      }
    });
  });
}

function handle(child: ChildProcess, port: number, dir: string): TestPostgres {
  // Neither the server nor its pipes may keep the test process alive.
  child.unref();
  for (const s of [child.stdin, child.stderr]) (s as unknown as net.Socket | null)?.unref();
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  let counter = 0;
  const url = (dbName: string) => `postgres://postgres@127.0.0.1:${port}/${dbName}`;

  return {
    url,
    async createDatabase(opts = {}) {
      const name = `t${process.pid}_${++counter}_${Date.now().toString(36)}`;
      const client = new pg.Client({ connectionString: url("postgres") });
      await client.connect();
      try {
        const template = opts.template ? ` TEMPLATE "${opts.template}"` : "";
        await client.query(`CREATE DATABASE "${name}"${template}`);
      } finally {
        await client.end();
      }
      return url(name);
    },
    async stop() {
      shared = undefined;
      // Hold the process open until the watchdog has stopped the server.
      child.ref();
      child.stdin?.end();
      await exited;
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Ends the sessions of `url`'s server that `where` (a condition on `pg_stat_activity`) picks, as
 * an administrator or a dying network would; answers how many were ended.
 */
export async function terminateBackends(url: string, where: string): Promise<number> {
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    const { rows } = await admin.query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE ${where}`,
    );
    return rows.length;
  } finally {
    await admin.end();
  }
}
