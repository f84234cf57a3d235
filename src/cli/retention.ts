import { parseArgs } from "node:util";
import { systemClock } from "../clock.ts";
import { loadConfig } from "../config.ts";
import { batchFor, createRetention } from "../runs/retention.ts";
import { openStore } from "../store/open-store.ts";
import { createRetentionStore } from "../store/retention-store.ts";

/**
 * `sluice retention [--purge]` (docs/retention.md): the operator's view across every scope, read
 * from the store the configuration names (DATA_DIR or DATABASE_URL), not through the API, which
 * only ever answers one scope. Without `--purge` it deletes nothing.
 */
export async function retentionCommand(
  args: string[],
  env: Record<string, string | undefined>,
): Promise<string> {
  const { values } = parseArgs({ args, options: { purge: { type: "boolean", default: false } } });
  const config = loadConfig(env);
  const store = await openStore({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    monitorReads: config.monitorReads,
  });
  try {
    const retention = createRetention({
      store: createRetentionStore(store.db, store.dialect),
      clock: systemClock,
      logger: { info() {}, error() {} },
      config: {
        ...config.retention,
        batch: batchFor(config.retention.batch, store.dialect),
        dataDir: config.dataDir,
      },
    });
    const items = await retention.preview(null);
    const lines = [`RUN_RETENTION_DAYS=${config.retention.days} (0: kept for good)`];
    for (const i of items) {
      const where = `${i.elementType} ${i.path === "/" ? "" : i.path}/${i.elementName}`;
      lines.push(
        `${i.runs}${i.more ? "+" : ""}\t${i.rule.days} d (${i.rule.source})\t${where} [element ${i.elementId}]`,
      );
    }
    const total = items.reduce((n, i) => n + i.runs, 0);
    const more = items.some((i) => i.more) ? "+ (counts stop at 10,000 an element)" : "";
    lines.push(`${total}${more} finished runs ${values.purge ? "to delete" : "would be deleted"}`);
    if (values.purge) {
      const r = await retention.pass();
      lines.push(`deleted ${r.runs} runs and ${r.dirs} run directories in ${r.ms} ms`);
    }
    return `${lines.join("\n")}\n`;
  } finally {
    await store.close();
  }
}
