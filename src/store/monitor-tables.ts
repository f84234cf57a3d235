/**
 * The counter tables of migrations 002 and 006. Kept out of `Database` so that only the monitor
 * code, which keeps them exact, reads or writes them.
 */
export type MonitorTables = {
  /** Migration 023: `bytes` the parameters of the element's runs, `app` its app (to sum by app). */
  element_run_stats: { element_id: number; total_runs: number; app: string | null; bytes: number };
  /** Migration 006: finished runs only, kept exact by countFinished. */
  run_status_counts: {
    app: string;
    space: string;
    element_id: number;
    trigger_type: string;
    status: string;
    n: number;
    /** Migration 023: the texts the runs' ends wrote (docs/security.md, "What an app may store"). */
    bytes: number;
  };
};
