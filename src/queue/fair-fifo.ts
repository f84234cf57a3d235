/** A FIFO with a head index: shifting is O(1), and the array is compacted once half of it is spent. */
interface Fifo<T> {
  items: T[];
  head: number;
}

function shiftFifo<T>(f: Fifo<T>): T | undefined {
  if (f.head >= f.items.length) return undefined;
  const item = f.items[f.head++] as T;
  if (f.head > 1024 && f.head * 2 > f.items.length) {
    f.items.splice(0, f.head);
    f.head = 0;
  }
  return item;
}

/**
 * Items queued per key (a space), handed out round-robin over the keys that have any: each key
 * in turn gives its oldest item (docs/run-limits.md, "Fair turns"). A key with 5,000 items
 * delays a key with one by at most one item.
 */
export interface FairFifo<T> {
  push(key: string, item: T): void;
  shift(): T | undefined;
  readonly size: number;
}

export function createFairFifo<T>(): FairFifo<T> {
  const byKey = new Map<string, Fifo<T>>();
  // The keys with items, in turn order; a key is in it exactly once while it has items.
  const turns: Fifo<string> = { items: [], head: 0 };
  let size = 0;
  return {
    push(key, item) {
      let f = byKey.get(key);
      if (!f) {
        f = { items: [], head: 0 };
        byKey.set(key, f);
        turns.items.push(key);
      }
      f.items.push(item);
      size++;
    },
    shift() {
      const key = shiftFifo(turns);
      if (key === undefined) return undefined;
      const f = byKey.get(key) as Fifo<T>;
      const item = shiftFifo(f) as T;
      size--;
      if (f.head < f.items.length) turns.items.push(key);
      else byKey.delete(key);
      return item;
    },
    get size() {
      return size;
    },
  };
}
