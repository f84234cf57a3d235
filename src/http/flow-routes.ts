import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import type { FlowLifecycle } from "../flows/lifecycle.ts";
import { scopeOf } from "./context.ts";
import { Envelope, ok } from "./envelope.ts";
import {
  ActivateBody,
  BatchDeployResult,
  DeployBody,
  FlowElementInfo,
  FlowStatus,
  ValidationResult,
} from "./flow-schemas.ts";

/** Endpoints 9–13: deploy, batch-deploy, activate, deactivate, batch-deactivate. */
export async function flowRoutes(
  fastify: FastifyInstance,
  opts: { lifecycle: FlowLifecycle },
): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { lifecycle } = opts;
  const access = { access: "context" as const };

  app.post(
    "/flow/deploy",
    {
      config: access,
      schema: { body: DeployBody, response: { 200: Envelope(Type.Array(ValidationResult)) } },
    },
    async (req) => ok(await lifecycle.deploy(scopeOf(req), req.ctx.user, req.body)),
  );

  app.post(
    "/flow/batch-deploy",
    {
      config: access,
      schema: {
        body: Type.Array(FlowElementInfo, { maxItems: 1000 }),
        response: { 200: Envelope(Type.Array(BatchDeployResult)) },
      },
    },
    async (req) => ok(await lifecycle.batchDeploy(scopeOf(req), req.ctx.user, req.body)),
  );

  app.post(
    "/flow/activate",
    { config: access, schema: { body: ActivateBody, response: { 200: Envelope(FlowStatus) } } },
    async (req) => {
      const { version, ...loc } = req.body;
      return ok(await lifecycle.activate(scopeOf(req), req.ctx.user, loc, version));
    },
  );

  app.post(
    "/flow/deactivate",
    { config: access, schema: { body: FlowElementInfo, response: { 200: Envelope(FlowStatus) } } },
    async (req) => ok(await lifecycle.deactivate(scopeOf(req), req.ctx.user, req.body)),
  );

  app.post(
    "/flow/batch-deactivate",
    {
      config: access,
      schema: {
        body: Type.Array(FlowElementInfo, { maxItems: 1000 }),
        response: { 200: Envelope(Type.Array(BatchDeployResult)) },
      },
    },
    async (req) => ok(await lifecycle.batchDeactivate(scopeOf(req), req.ctx.user, req.body)),
  );
}
