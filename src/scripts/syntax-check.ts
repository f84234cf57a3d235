import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";

const CHECKER = fileURLToPath(new URL("./python/syntax_check.py", import.meta.url));

export interface SyntaxProblem {
  line: number;
  message: string;
}

/** Parses (never runs) each source with the configured CPython, in one process for the batch. */
export function checkPythonSyntax(
  python: string,
  files: { name: string; source: string }[],
): Promise<(SyntaxProblem | null)[]> {
  if (files.length === 0) return Promise.resolve([]);
  return new Promise((resolve, reject) => {
    const child = execFile(
      python,
      ["-I", "-S", CHECKER],
      { maxBuffer: 16 * 1024 * 1024 },
      (err, stdout) => {
        if (err) return reject(new Error(`python syntax check failed to run: ${err.message}`));
        try {
          resolve(JSON.parse(stdout) as (SyntaxProblem | null)[]);
        } catch (parseErr) {
          reject(parseErr);
        }
      },
    );
    child.stdin?.end(JSON.stringify(files));
  });
}
