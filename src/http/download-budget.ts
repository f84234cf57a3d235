import { type ByteBudget, createByteBudget } from "../byte-budget.ts";

/**
 * Bytes of artifact downloads in flight on a node (docs/artifacts.md, "Downloads"): a download
 * holds its whole file in memory until its client has read it, so the bytes that downloads hold
 * are bounded per app (ARTIFACT_DOWNLOAD_BYTES_PER_APP, all its spaces together) and per node
 * (ARTIFACT_DOWNLOAD_BYTES). A file is reserved before it is read.
 */
export type DownloadBudget = ByteBudget;

export function createDownloadBudget(limits: {
  downloadBytes: number;
  downloadBytesPerApp: number;
}): DownloadBudget {
  return createByteBudget({
    total: limits.downloadBytes,
    perApp: limits.downloadBytesPerApp,
    what: "artifact downloads",
    totalSetting: "ARTIFACT_DOWNLOAD_BYTES",
    perAppSetting: "ARTIFACT_DOWNLOAD_BYTES_PER_APP",
  });
}
