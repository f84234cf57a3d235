/**
 * Uids that only one zygote's tasks ever take (docs/security.md, "Preloading"). A zygote that
 * imports an environment's packages runs their import-time code, so it lives in a user namespace
 * of its own that maps exactly its slice: `outer`, the host uid its root is, and `count` task uids
 * from `base`, the same numbers inside and out. No other zygote's task, and nothing of the host,
 * has a uid of another zygote's slice.
 */
export interface UidSlice {
  outer: number;
  base: number;
  count: number;
}

/** A slice serves one zygote at a time: a task's uid waits for its sweep, so twice the slots. */
export const sliceSize = (concurrency: number): number => 1 + 2 * concurrency;

/** `slices` slices of `size` uids each, from `start` on: handed out and given back. */
export class UidSlices {
  readonly #free: UidSlice[] = [];

  constructor(start: number, slices: number, size: number) {
    for (let i = 0; i < slices; i++) {
      const outer = start + i * size;
      this.#free.push({ outer, base: outer + 1, count: size - 1 });
    }
  }

  /** A free slice, or undefined when every one serves a zygote. */
  take(): UidSlice | undefined {
    return this.#free.shift();
  }

  /** Only once nothing of the zygote it served runs any more. */
  give(slice: UidSlice): void {
    this.#free.push(slice);
  }

  get free(): number {
    return this.#free.length;
  }
}
