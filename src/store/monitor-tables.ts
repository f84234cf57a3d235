/**
 * The counter tables of migrations 002 and 006. Kept out of `Database` so that only the monitor
 * code, which keeps them exact, reads or writes them.
 */
export type MonitorTables = {
  element_run_stats: { element_id: number; total_runs: number };
  /** Migration 006: finished runs only, kept exact by countFinished. */
  run_status_counts: {
    app: string;
    space: string;
    element_id: number;
    trigger_type: string;
    status: string;
    n: number;
  };
};
