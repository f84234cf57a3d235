import Table from "cli-table3";
import { createSpinner } from "nanospinner";
import pc from "picocolors";

/**
 * Terminal output. Colours and spinners only when the stream is a TTY (and NO_COLOR is unset), so
 * pipes and scripts get plain text; `--json` prints one JSON document on stdout and nothing else.
 */
export interface Ui {
  json: boolean;
  color: ReturnType<typeof pc.createColors>;
  out(text: string): void;
  err(text: string): void;
  /** A spinner on stderr while `work` runs; a no-op off a TTY or with --json. */
  spin<T>(text: string, work: (update: (text: string) => void) => Promise<T>): Promise<T>;
  table(head: string[], rows: string[][]): string;
  status(s: string): string;
}

export function createUi(
  json: boolean,
  stdout: NodeJS.WriteStream = process.stdout,
  stderr: NodeJS.WriteStream = process.stderr,
): Ui {
  const tty = stdout.isTTY === true && !process.env.NO_COLOR;
  const color = pc.createColors(tty);
  const spinning = stderr.isTTY === true && !json;
  return {
    json,
    color,
    out: (text) => stdout.write(text.endsWith("\n") ? text : `${text}\n`),
    err: (text) => stderr.write(text.endsWith("\n") ? text : `${text}\n`),
    async spin(text, work) {
      if (!spinning) return work(() => {});
      const spinner = createSpinner(text, { stream: stderr }).start();
      try {
        const out = await work((t) => spinner.update({ text: t }));
        spinner.success();
        return out;
      } catch (err) {
        spinner.error();
        throw err;
      }
    },
    table(head, rows) {
      const t = new Table({
        head: head.map((h) => color.bold(h)),
        style: { head: [], border: [] },
      });
      t.push(...rows);
      return t.toString();
    },
    status(s) {
      if (s === "SUCCESS" || s === "APPROVED" || s === "OK") return color.green(s);
      if (s === "FAILURE" || s === "ERROR") return color.red(s);
      if (s === "CANCELED" || s === "OBSOLETE" || s === "SKIP" || s === "SKIPPED")
        return color.yellow(s);
      return color.cyan(s);
    },
  };
}

export const fmtTime = (ms: number | undefined) =>
  ms === undefined ? "" : new Date(ms).toISOString().replace("T", " ").slice(0, 19);
export const fmtDuration = (ms: number | undefined) =>
  ms === undefined
    ? ""
    : ms < 1000
      ? `${ms} ms`
      : ms < 60_000
        ? `${(ms / 1000).toFixed(1)} s`
        : `${Math.round(ms / 1000)} s`;
