import type { FastifyInstance, LogLevel } from "fastify";
import { Type } from "typebox";
import type { DataDisk } from "../runs/run-disk.ts";

/** Root endpoints: outside both services, never behind auth. */
export async function healthRoutes(
  app: FastifyInstance,
  opts: {
    /** Level of the probe's request log (docs/operations.md, "Request IDs"). */
    probeLogLevel: LogLevel;
    sandbox: string;
    cgroup: string;
    refusal: string | undefined;
    mode: string;
    disk: Pick<DataDisk, "state"> | undefined;
  },
): Promise<void> {
  app.get(
    "/health",
    {
      logLevel: opts.probeLogLevel,
      schema: {
        response: {
          200: Type.Object({
            status: Type.String(),
            mode: Type.String(),
            sandbox: Type.String(),
            // Each task's cgroup: v2, v1, off (accepted), or refused (docs/security.md).
            cgroup: Type.String(),
            // With sandbox or cgroup `refused`: why this node runs no script task, and the fix.
            problem: Type.Optional(Type.String()),
            // The data directory's filesystem: `low` below DATA_DIR_FREE_BYTES_MIN, where flow
            // script nodes are refused (docs/security.md, "Disk"); absent when it cannot be read.
            disk: Type.Optional(Type.Object({ freeBytes: Type.Number(), low: Type.Boolean() })),
          }),
        },
      },
    },
    async () => {
      const disk = await opts.disk?.state().catch(() => undefined);
      return {
        status: "ok",
        mode: opts.mode,
        sandbox: opts.sandbox,
        cgroup: opts.cgroup,
        ...(opts.refusal !== undefined ? { problem: opts.refusal } : {}),
        ...(disk ? { disk } : {}),
      };
    },
  );
}
