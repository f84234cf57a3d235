import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type HeapItem, TickHeap } from "../../src/scheduler/tick-heap.ts";

interface Item extends HeapItem {
  name: number;
}
const item = (name: number): Item => ({ name, due: 0, heapIndex: -1 });

describe("TickHeap", () => {
  it("pops in due order, re-keys and deletes arbitrary items", () => {
    const heap = new TickHeap<Item>();
    const items = Array.from({ length: 200 }, (_, i) => item(i));
    // A deterministic shuffle of due times.
    for (const it of items) heap.set(it, (it.name * 7919) % 1000);
    for (const it of items.slice(0, 50)) heap.set(it, 5000 + it.name); // re-key
    for (const it of items.slice(50, 70)) heap.delete(it);
    assert.equal(heap.size, 180);
    assert.equal(heap.has(items[60] as Item), false);
    const out: number[] = [];
    for (let it = heap.popDue(Infinity); it; it = heap.popDue(Infinity)) out.push(it.due);
    assert.equal(out.length, 180);
    assert.deepEqual(
      out,
      [...out].sort((a, b) => a - b),
    );
    assert.equal(out.at(-1), 5049);
  });

  it("popDue stops at items in the future", () => {
    const heap = new TickHeap<Item>();
    heap.set(item(1), 10);
    heap.set(item(2), 20);
    assert.equal(heap.popDue(15)?.name, 1);
    assert.equal(heap.popDue(15), undefined);
    assert.equal(heap.peek()?.due, 20);
  });
});
