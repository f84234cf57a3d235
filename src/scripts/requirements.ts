/**
 * The dependencies a PY element declares (docs/script-dependencies.md, "Declaring"): a module's
 * PEP 723 `# /// script` block, or a package's `requirements.txt`. Parsed strictly: whatever
 * this cannot read exactly refuses the upload, naming the line, rather than reach pip.
 *
 * Only requirement specifiers (PEP 508 names, extras, version clauses and markers) are accepted:
 * no pip options, no URLs or paths, so a tenant cannot point the install at another index or make
 * it read a file of the host. Where packages come from is the operator's setting.
 */

export type Declared = { requirements: string[] } | { problem: string };

/** At most this many requirements per element, each at most this long. */
const MAX_REQUIREMENTS = 200;
const MAX_LENGTH = 300;

const NAME = "[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?";
const VERSION = "(?:~=|===|==|!=|<=|>=|<|>)\\s*[A-Za-z0-9.*+!_-]+";
const SPEC = `${VERSION}(?:\\s*,\\s*${VERSION})*`;
/** name, [extras], version clauses (optionally in parentheses), `; marker`. */
const REQUIREMENT = new RegExp(
  `^(${NAME})\\s*(?:\\[\\s*${NAME}(?:\\s*,\\s*${NAME})*\\s*\\])?\\s*` +
    `(?:${SPEC}|\\(\\s*${SPEC}\\s*\\))?\\s*(?:;\\s*[A-Za-z0-9_ .'"<>=!~(),-]+)?$`,
);

/** PEP 503: the name pip and the index compare (`Foo_Bar` and `foo-bar` are one project). */
export function normalizeName(name: string): string {
  return name.toLowerCase().replace(/[-_.]+/g, "-");
}

/** The project name of a checked requirement. */
export function requirementName(req: string): string {
  return normalizeName(REQUIREMENT.exec(req)?.[1] ?? req);
}

function checkRequirement(text: string, where: string): string | undefined {
  if (text.length > MAX_LENGTH)
    return `${where}: a requirement is longer than ${MAX_LENGTH} characters`;
  if (!REQUIREMENT.test(text))
    return `${where}: "${text}" is not a requirement this service accepts (a project name with optional [extras], version clauses such as ==1.2 or >=1,<2, and a ; marker; no URLs, paths or pip options)`;
  return undefined;
}

function finish(reqs: string[], where: string): Declared {
  if (reqs.length > MAX_REQUIREMENTS)
    return { problem: `${where}: more than ${MAX_REQUIREMENTS} requirements` };
  const seen = new Set<string>();
  for (const r of reqs) {
    const name = requirementName(r);
    if (seen.has(name)) return { problem: `${where}: "${name}" is required more than once` };
    seen.add(name);
  }
  return { requirements: reqs };
}

/** A package's `requirements.txt` (pip's format without its options). */
export function parseRequirementsTxt(text: string, file = "requirements.txt"): Declared {
  const reqs: string[] = [];
  const lines = text.replace(/\r\n?/g, "\n").split("\n");
  for (let i = 0; i < lines.length; i++) {
    const start = i + 1;
    // Joined once: concatenating line by line is quadratic, and this runs on the event loop.
    const parts = [lines[i] ?? ""];
    while ((parts.at(-1) as string).endsWith("\\") && i + 1 < lines.length) {
      parts.push((parts.pop() as string).slice(0, -1), lines[++i] ?? "");
    }
    // pip's comments: a whole line, or `#` after whitespace.
    const line = parts
      .join("")
      .replace(/(^|\s)#.*$/, "")
      .trim();
    if (line === "") continue;
    if (line.startsWith("-"))
      return {
        problem: `${file} line ${start}: pip options ("${line.split(/\s/)[0]}") are not accepted: the package index is the service's setting`,
      };
    const bad = checkRequirement(line, `${file} line ${start}`);
    if (bad) return { problem: bad };
    reqs.push(line);
  }
  return finish(reqs, file);
}

const OPEN = /^# \/\/\/ ?(.*)$/;

/**
 * A module's PEP 723 `script` block. No block: no requirements. Within it only `dependencies` (an
 * array of strings) and `requires-python` (a string) are read, and `[tool.…]` tables are skipped;
 * anything else is refused.
 */
export function parseInlineMetadata(text: string, file: string): Declared {
  const lines = text.replace(/\r\n?/g, "\n").split("\n");
  let block: { start: number; body: string[] } | undefined;
  for (let i = 0; i < lines.length; i++) {
    const m = OPEN.exec(lines[i] ?? "");
    if (!m || m[1] === "") continue;
    if (m[1] !== "script") continue; // other PEP 723 block types are not ours
    if (block) return { problem: `${file} line ${i + 1}: a second "# /// script" block` };
    const body: string[] = [];
    let end = -1;
    for (let j = i + 1; j < lines.length; j++) {
      const l = lines[j] ?? "";
      if (l === "# ///") {
        end = j;
        break;
      }
      if (l !== "#" && !l.startsWith("# "))
        return {
          problem: `${file} line ${j + 1}: the "# /// script" block opened on line ${i + 1} is not closed by a "# ///" line before this line, which is not a comment`,
        };
      body.push(l.slice(2));
    }
    if (end < 0)
      return {
        problem: `${file} line ${i + 1}: the "# /// script" block is not closed by "# ///"`,
      };
    block = { start: i + 2, body };
    i = end;
  }
  if (!block) return { requirements: [] };
  return parseScriptToml(block.body, block.start, file);
}

/** The TOML of a script block, as much of TOML as the block's two keys need. */
function parseScriptToml(body: string[], firstLine: number, file: string): Declared {
  let deps: string[] | undefined;
  let inTool = false;
  for (let i = 0; i < body.length; i++) {
    const where = `${file} line ${firstLine + i}`;
    const line = stripComment(body[i] ?? "").trim();
    if (line === "") continue;
    if (line.startsWith("[")) {
      if (!/^\[\s*tool(\.[A-Za-z0-9_.-]+)?\s*\]$/.test(line))
        return { problem: `${where}: only [tool.…] tables may follow the script's keys` };
      inTool = true;
      continue;
    }
    if (inTool) continue;
    const kv = /^([A-Za-z0-9_-]+)\s*=\s*(.*)$/.exec(line);
    if (!kv) return { problem: `${where}: expected key = value in the script block` };
    const [, key, rest] = kv as unknown as [string, string, string];
    if (key === "requires-python") {
      if (readString(rest.trim()) === undefined)
        return { problem: `${where}: requires-python must be a string` };
    } else if (key === "dependencies") {
      if (deps) return { problem: `${where}: dependencies is given more than once` };
      // Line by line until one ends with `]`; joined once (linear, on the event loop).
      const parts = [rest];
      while (!closesArray(parts.at(-1) as string) && i + 1 < body.length)
        parts.push(stripComment(body[++i] ?? ""));
      const items = readStringArray(parts.join(" ").trim());
      if (!items) return { problem: `${where}: dependencies must be an array of strings` };
      for (const item of items) {
        const bad = checkRequirement(item.trim(), where);
        if (bad) return { problem: bad };
      }
      deps = items.map((s) => s.trim());
    } else return { problem: `${where}: unknown key "${key}" in the script block` };
  }
  return finish(deps ?? [], `${file} (# /// script)`);
}

/** Drops a `#` comment outside of strings. */
function stripComment(line: string): string {
  let quote: string | undefined;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quote) {
      if (c === "\\" && quote === '"') i++;
      else if (c === quote) quote = undefined;
    } else if (c === '"' || c === "'") quote = c;
    else if (c === "#") return line.slice(0, i);
  }
  return line;
}

function closesArray(text: string): boolean {
  return /\]\s*$/.test(text);
}

/** A TOML basic string (only `\"` and `\\` escapes) or literal string. */
const QUOTED = /"((?:[^"\\\n]|\\["\\])*)"|'([^'\n]*)'/.source;
const STRING = new RegExp(`^(?:${QUOTED})`);
/** One array item and the comma after it, or the end of the array's body. */
const ITEM = new RegExp(`\\s*(?:${QUOTED})\\s*(,|$)`, "y");
const BLANK = /\s*$/y;

function readString(text: string): string | undefined {
  const m = STRING.exec(text);
  if (!m || m[0].length !== text.length) return undefined;
  return m[1] !== undefined ? m[1].replace(/\\(["\\])/g, "$1") : m[2];
}

/** Items read in place (sticky expressions), never by re-slicing the rest: linear in the text. */
function readStringArray(text: string): string[] | undefined {
  if (!text.startsWith("[") || !text.endsWith("]")) return undefined;
  const body = text.slice(1, -1);
  const out: string[] = [];
  let at = 0;
  for (;;) {
    BLANK.lastIndex = at;
    if (BLANK.test(body)) return out; // empty, or after a trailing comma
    ITEM.lastIndex = at;
    const m = ITEM.exec(body);
    if (!m) return undefined;
    out.push(m[1] !== undefined ? m[1].replace(/\\(["\\])/g, "$1") : (m[2] ?? ""));
    if (m[3] !== ",") return out;
    at = ITEM.lastIndex;
  }
}
