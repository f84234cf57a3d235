/**
 * Indexed binary min-heap keyed by due time. Items remember their slot, so a redeploy or
 * deactivation removes or re-keys one schedule in O(log n) instead of scanning 10,000.
 */
export interface HeapItem {
  /** Epoch ms the item is due. */
  due: number;
  /** Slot in the heap, -1 when absent. Owned by the heap. */
  heapIndex: number;
}

export class TickHeap<T extends HeapItem> {
  readonly #items: T[] = [];

  get size(): number {
    return this.#items.length;
  }

  peek(): T | undefined {
    return this.#items[0];
  }

  has(item: T): boolean {
    return item.heapIndex >= 0 && this.#items[item.heapIndex] === item;
  }

  /** Insert, or move an item already present to its new `due`. */
  set(item: T, due: number): void {
    item.due = due;
    if (this.has(item)) {
      this.#up(item.heapIndex);
      this.#down(item.heapIndex);
      return;
    }
    item.heapIndex = this.#items.length;
    this.#items.push(item);
    this.#up(item.heapIndex);
  }

  delete(item: T): void {
    if (!this.has(item)) return;
    const i = item.heapIndex;
    const last = this.#items.pop() as T;
    item.heapIndex = -1;
    if (last === item) return;
    this.#items[i] = last;
    last.heapIndex = i;
    this.#up(i);
    this.#down(i);
  }

  /** Remove and return the earliest item with due ≤ `now`, or undefined. */
  popDue(now: number): T | undefined {
    const top = this.#items[0];
    if (top === undefined || top.due > now) return undefined;
    this.delete(top);
    return top;
  }

  #swap(a: number, b: number): void {
    const items = this.#items;
    const x = items[a] as T;
    const y = items[b] as T;
    items[a] = y;
    items[b] = x;
    y.heapIndex = a;
    x.heapIndex = b;
  }

  #up(i: number): void {
    const items = this.#items;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if ((items[parent] as T).due <= (items[i] as T).due) return;
      this.#swap(i, parent);
      i = parent;
    }
  }

  #down(i: number): void {
    const items = this.#items;
    const n = items.length;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let min = i;
      if (l < n && (items[l] as T).due < (items[min] as T).due) min = l;
      if (r < n && (items[r] as T).due < (items[min] as T).due) min = r;
      if (min === i) return;
      this.#swap(i, min);
      i = min;
    }
  }
}
