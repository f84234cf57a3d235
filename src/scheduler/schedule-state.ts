/**
 * Where `lastRunAt` survives a restart. The scheduler needs it for catch-up after downtime and to
 * never fire a tick twice; a database-backed store can implement this later.
 */
export interface ScheduleState {
  /** scheduleId → tick time (epoch ms) of its last fire. */
  load(): Promise<Map<string, number>>;
  /** Called on every fire, before `fire` resolves; errors are logged, not fatal. */
  save(scheduleId: string, lastRunAt: number): Promise<void> | void;
}

/** Process-local state: enough for tests and a single process that never restarts. */
export function createMemoryScheduleState(initial?: Iterable<[string, number]>): ScheduleState & {
  readonly data: Map<string, number>;
} {
  const data = new Map<string, number>(initial);
  return {
    data,
    async load() {
      return new Map(data);
    },
    save(scheduleId, lastRunAt) {
      data.set(scheduleId, lastRunAt);
    },
  };
}
