import { ErrorCode, SluiceError } from "../errors.ts";
import type { ScopeFilter } from "../store/model.ts";

/**
 * Bytes of artifact downloads in flight on a node (docs/artifacts.md, "Downloads"): a download
 * holds its whole file in memory until its client has read it, so the bytes that downloads hold
 * are bounded per app (ARTIFACT_DOWNLOAD_BYTES_PER_APP, all its spaces together) and per node
 * (ARTIFACT_DOWNLOAD_BYTES). A file is reserved before it is read.
 */
export interface DownloadBudget {
  /** Reserves `bytes` for one download of `scope`, or a 429; the function given back frees them. */
  take(scope: ScopeFilter, bytes: number): () => void;
}

export function createDownloadBudget(limits: {
  downloadBytes: number;
  downloadBytesPerApp: number;
}): DownloadBudget {
  const perApp = new Map<string, number>();
  let total = 0;
  return {
    take(scope, bytes) {
      // Unscoped callers (auth off, no headers) share one count.
      const app = scope ? scope.app : "";
      const mine = perApp.get(app) ?? 0;
      if (mine + bytes > limits.downloadBytesPerApp)
        throw new SluiceError(ErrorCode.TOO_MANY, [
          `artifact downloads of this app hold ${mine} bytes on this node; ${bytes} more would pass ARTIFACT_DOWNLOAD_BYTES_PER_APP (${limits.downloadBytesPerApp})`,
        ]);
      if (total + bytes > limits.downloadBytes)
        throw new SluiceError(ErrorCode.TOO_MANY, [
          `artifact downloads hold ${total} bytes on this node; ${bytes} more would pass ARTIFACT_DOWNLOAD_BYTES (${limits.downloadBytes})`,
        ]);
      perApp.set(app, mine + bytes);
      total += bytes;
      let freed = false;
      return () => {
        if (freed) return;
        freed = true;
        const left = (perApp.get(app) ?? bytes) - bytes;
        if (left > 0) perApp.set(app, left);
        else perApp.delete(app);
        total -= bytes;
      };
    },
  };
}
