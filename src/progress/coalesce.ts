import type { Clock, TimerHandle } from "../clock.ts";
import { PROGRESS_LIMITS, type Progress } from "./types.ts";

type Output = Extract<Progress, { kind: "output" }>;

/**
 * Output of one run coalesced per node and stream: a chunk waits up to `coalesceMs` for the next
 * ones, then goes as one event of at most `chunkChars` characters. A burst beyond that is dropped
 * live and noted (the run's record still keeps the output, up to its own limit), so a chatty script
 * costs watchers and the cluster at most ~chunkChars per stream every coalesceMs.
 */
export function createCoalescer(clock: Clock, send: (p: Output) => void) {
  const pending = new Map<string, { p: Output; dropped: number }>();
  let timer: TimerHandle | undefined;

  function flush(): void {
    if (timer) clock.clearTimeout(timer);
    timer = undefined;
    for (const { p, dropped } of pending.values()) {
      const note = dropped > 0 ? `\n[${dropped} characters not shown live]\n` : "";
      send({ ...p, text: p.text + note });
    }
    pending.clear();
  }

  return {
    add(p: Output): void {
      const key = `${p.nodeId ?? ""}\u0000${p.stream}`;
      const cur = pending.get(key);
      const room = PROGRESS_LIMITS.chunkChars - (cur?.p.text.length ?? 0);
      const kept = p.text.length <= room ? p.text : p.text.slice(0, Math.max(0, room));
      const dropped = p.text.length - kept.length;
      if (cur) {
        cur.p = { ...cur.p, text: cur.p.text + kept };
        cur.dropped += dropped;
      } else pending.set(key, { p: { ...p, text: kept }, dropped });
      timer ??= clock.setTimeout(flush, PROGRESS_LIMITS.coalesceMs);
    },
    /** Before a node's state changes or the run ends: its output comes first. */
    flush,
  };
}
