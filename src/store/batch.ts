interface Pending<I, R> {
  item: I;
  resolve(result: R): void;
  reject(err: unknown): void;
}

/**
 * Calls made in one turn of the event loop, and those made while a batch is under way, are
 * handed to `run` together (docs/architecture.md, "Group commit"); each caller's promise settles
 * with its own result once its batch is done. An idle store runs a lone call one `setImmediate`
 * later. When a batch fails, `alone` (if given) runs each of its items by itself, so that one bad
 * item fails alone; otherwise every caller of the batch gets the error.
 */
export function createBatcher<I, R>(opts: {
  run(items: I[]): Promise<R[]>;
  /**
   * Runs one item of a failed batch; `answered` holds the items before it and their answers,
   * `failure` what failed the batch.
   */
  alone?: (item: I, answered: readonly { item: I; result: R }[], failure: unknown) => Promise<R>;
  max: number;
}): (item: I) => Promise<R> {
  let pending: Pending<I, R>[] = [];
  let scheduled = false;
  let busy = false;

  async function settle(batch: Pending<I, R>[]): Promise<void> {
    try {
      const results = await opts.run(batch.map((p) => p.item));
      batch.forEach((p, i) => {
        p.resolve(results[i] as R);
      });
    } catch (err) {
      if (!opts.alone || batch.length === 1) {
        for (const p of batch) p.reject(err);
        return;
      }
      const answered: { item: I; result: R }[] = [];
      for (const p of batch)
        await opts.alone(p.item, answered, err).then((result) => {
          answered.push({ item: p.item, result });
          p.resolve(result);
        }, p.reject);
    }
  }

  async function flush(): Promise<void> {
    scheduled = false;
    busy = true;
    try {
      while (pending.length > 0) {
        const batch = pending.slice(0, opts.max);
        pending = pending.slice(batch.length);
        await settle(batch);
      }
    } finally {
      busy = false;
    }
  }

  return (item) =>
    new Promise<R>((resolve, reject) => {
      pending.push({ item, resolve, reject });
      if (scheduled || busy) return;
      scheduled = true;
      // After the I/O callbacks of this turn: the calls their requests make join this batch.
      setImmediate(() => void flush());
    });
}
