/**
 * Run retention (docs/retention.md): a purger on the injected clock deletes the finished runs each
 * element's rule no longer keeps, a small batch per short transaction with a turn of the event
 * loop between batches, and the working directories (kept files) of the runs it deleted.
 */
import { readdir } from "node:fs/promises";
import { setImmediate as nextTurn } from "node:timers/promises";
import { LRUCache } from "lru-cache";
import type { Clock, TimerHandle } from "../clock.ts";
import type { RetentionConfig } from "../config-storage.ts";
import { normalizeConfigure } from "../flows/graph.ts";
import { removeTree } from "../scripts/safe-tree.ts";
import { scriptHeader } from "../scripts/script-header.ts";
import type { RetentionElement, RetentionStore } from "../store/retention-store.ts";
import type { ElementType, ScopeFilter } from "../store/types.ts";
import { workDirOf } from "./file-cleanup.ts";
import { cutoffOf, type RetentionRule, ruleOf } from "./retention-rules.ts";

/** One element's line of the dry run. */
export interface RetentionPreviewItem {
  elementId: string;
  elementType: ElementType;
  elementName: string;
  path: string;
  rule: RetentionRule;
  /** Runs that ended before this instant (epoch ms) go. */
  cutoff: number;
  /** Finished runs a pass now would delete, counted up to PREVIEW_CAP. */
  runs: number;
  /** More than `runs` would go: the count stopped at PREVIEW_CAP. */
  more: boolean;
}

/** Each element's count in a dry run stops here (docs/retention.md, "Dry run"). */
export const PREVIEW_CAP = 10_000;

export interface PassResult {
  /** Runs deleted by this pass. */
  runs: number;
  /** Their working directories deleted on this node. */
  dirs: number;
  ms: number;
}

export interface Retention {
  /** One pass over every element; a pass already under way is joined, not doubled. */
  pass(): Promise<PassResult>;
  /** What a pass now would delete, per element with a rule, of one scope or (null) all. */
  preview(scope: ScopeFilter): Promise<RetentionPreviewItem[]>;
  /** Called after each pass (tests await it; the log says the same). */
  onPass(listener: (result: PassResult) => void): () => void;
  start(): void;
  stop(): Promise<void>;
}

export interface RetentionDeps {
  store: RetentionStore;
  clock: Clock;
  logger: { info(obj: unknown, msg?: string): void; error(obj: unknown, msg?: string): void };
  config: Omit<RetentionConfig, "batch"> & { batch: number; dataDir: string };
  /** Told of each run directory removed (the count of what ended runs keep, kept-dirs.ts). */
  onRemoved?: ((runId: string) => void) | undefined;
}

interface State extends RetentionDeps {
  /** An element's own rule, read once per change of the element (`id:updatedAt`). */
  own: LRUCache<string, { days: number | undefined }>;
  listeners: Set<(result: PassResult) => void>;
  timer: TimerHandle | undefined;
  running: Promise<PassResult> | undefined;
  stopped: boolean;
}

/**
 * RUN_RETENTION_BATCH, or the store's default: SQLite's driver is synchronous, so a batch holds
 * the event loop while it deletes (tens of µs a run); PostgreSQL's only holds row locks.
 */
export function batchFor(configured: number | undefined, dialect: "sqlite" | "postgres"): number {
  return configured ?? (dialect === "sqlite" ? 200 : 1000);
}

export function createRetention(deps: RetentionDeps): Retention {
  const s: State = {
    ...deps,
    own: new LRUCache({ max: 100_000 }),
    listeners: new Set(),
    timer: undefined,
    running: undefined,
    stopped: false,
  };
  return {
    pass: () => joinPass(s),
    preview: (scope) => preview(s, scope),
    onPass(listener) {
      s.listeners.add(listener);
      return () => s.listeners.delete(listener);
    },
    start: () => schedule(s, Math.min(s.config.sweepMs, 10_000)),
    async stop() {
      s.stopped = true;
      if (s.timer) s.clock.clearTimeout(s.timer);
      await s.running?.catch(() => undefined);
    },
  };
}

async function ruleFor(s: State, el: RetentionElement): Promise<RetentionRule> {
  const key = `${el.elementId}:${el.updatedAt}`;
  let own = s.own.get(key);
  if (!own) {
    own = { days: await ownDays(s, el) };
    s.own.set(key, own);
  }
  return ruleOf(s.config.days, {
    days: own.days,
    source: el.type === "PY" ? "declaration" : "configure",
  });
}

/** A flow's release configure, or a Python element's current module (package: entry module). */
async function ownDays(s: State, el: RetentionElement): Promise<number | undefined> {
  if (el.type === "DPL")
    return el.configureJson === null
      ? undefined
      : normalizeConfigure(JSON.parse(el.configureJson)).retentionDays;
  const source = await s.store.scriptSource(el.elementId);
  return source ? (await scriptHeader(source)).retentionDays : undefined;
}

/** One dry run at a time per process: callers repeating it queue instead of piling up reads. */
let previewing: Promise<unknown> = Promise.resolve();

function preview(s: State, scope: ScopeFilter): Promise<RetentionPreviewItem[]> {
  const next = previewing.then(() => previewNow(s, scope));
  previewing = next.catch(() => undefined);
  return next;
}

async function previewNow(s: State, scope: ScopeFilter): Promise<RetentionPreviewItem[]> {
  const now = s.clock.now();
  const out: RetentionPreviewItem[] = [];
  for (const el of await s.store.elements(scope)) {
    const rule = await ruleFor(s, el);
    const cutoff = cutoffOf(now, rule);
    if (cutoff === null) continue;
    const n = await s.store.countExpired(
      { elementId: el.elementId, scope: el.scope, cutoff },
      PREVIEW_CAP,
    );
    out.push({
      elementId: el.elementId,
      elementType: el.type,
      elementName: el.name,
      path: el.folderPath,
      rule,
      cutoff,
      runs: Math.min(n, PREVIEW_CAP),
      more: n > PREVIEW_CAP,
    });
  }
  return out;
}

function joinPass(s: State): Promise<PassResult> {
  s.running ??= runPass(s).finally(() => {
    s.running = undefined;
  });
  return s.running;
}

async function runPass(s: State): Promise<PassResult> {
  const started = performance.now();
  const result: PassResult = { runs: 0, dirs: 0, ms: 0 };
  const now = s.clock.now();
  const dirs = await taskDirs(s.config.dataDir);
  for (const el of await s.store.elements(null)) {
    if (s.stopped) break;
    // One element that fails (its script unreadable, a batch refused) does not stop the others.
    try {
      await purgeElement(s, el, now, dirs, result);
    } catch (err) {
      s.logger.error({ err, elementId: el.elementId }, "retention could not purge an element");
    }
  }
  result.ms = Math.round(performance.now() - started);
  if (result.runs > 0) s.logger.info(result, "retention purged runs");
  for (const listener of s.listeners) listener(result);
  return result;
}

/** The expired runs of one element, in batches with a turn of the event loop between them. */
async function purgeElement(
  s: State,
  el: RetentionElement,
  now: number,
  dirs: Awaited<ReturnType<typeof taskDirs>>,
  result: PassResult,
): Promise<void> {
  const cutoff = cutoffOf(now, await ruleFor(s, el));
  if (cutoff === null) return;
  while (!s.stopped) {
    const ids = await s.store.purgeBatch(
      { elementId: el.elementId, scope: el.scope, cutoff },
      s.config.batch,
    );
    result.runs += ids.length;
    result.dirs += await removeDirs(s, dirs, ids);
    // Requests waiting behind this batch are served before the next one is read.
    await nextTurn();
    if (ids.length < s.config.batch) return;
  }
}

/** Names under DATA_DIR/tasks: most purged runs have no directory, and are not looked up. */
async function taskDirs(dataDir: string): Promise<Set<string>> {
  try {
    return new Set(await readdir(workDirOf(dataDir, "")));
  } catch {
    return new Set();
  }
}

/** A deleted run's files go with it, whatever its fileCleanup kept (docs/retention.md). */
async function removeDirs(s: State, dirs: Set<string>, ids: readonly string[]): Promise<number> {
  let n = 0;
  for (const id of ids) {
    if (!dirs.has(id)) continue;
    try {
      await removeTree(workDirOf(s.config.dataDir, id));
      s.onRemoved?.(id);
      dirs.delete(id);
      n++;
    } catch (err) {
      s.logger.error({ err, runId: id }, "retention could not delete a run directory");
    }
  }
  return n;
}

function schedule(s: State, delay: number): void {
  if (s.stopped || s.config.sweepMs <= 0) return;
  s.timer = s.clock.setTimeout(() => {
    joinPass(s)
      .catch((err: unknown) => s.logger.error({ err }, "retention pass failed"))
      .finally(() => schedule(s, s.config.sweepMs));
  }, delay);
  s.timer.unref?.();
}
