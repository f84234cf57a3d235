import type { FastifyInstance } from "fastify";
import { Type } from "typebox";

/** Root endpoints: outside both services, never behind auth. */
export async function healthRoutes(
  app: FastifyInstance,
  opts: { sandbox: string; cgroup: string; refusal: string | undefined; mode: string },
): Promise<void> {
  app.get(
    "/health",
    {
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
          }),
        },
      },
    },
    async () => ({
      status: "ok",
      mode: opts.mode,
      sandbox: opts.sandbox,
      cgroup: opts.cgroup,
      ...(opts.refusal !== undefined ? { problem: opts.refusal } : {}),
    }),
  );
}
