import type { FastifyInstance } from "fastify";
import { Type } from "typebox";

/** Root endpoints: outside both services, never behind auth. */
export async function healthRoutes(
  app: FastifyInstance,
  opts: { sandbox: string; refusal: string | undefined; mode: string },
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
            // With sandbox `refused`: why this node runs no script task and how to fix it.
            problem: Type.Optional(Type.String()),
          }),
        },
      },
    },
    async () => ({
      status: "ok",
      mode: opts.mode,
      sandbox: opts.sandbox,
      ...(opts.refusal !== undefined ? { problem: opts.refusal } : {}),
    }),
  );
}
