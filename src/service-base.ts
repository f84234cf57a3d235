import type { Logger } from "pino";
import type { Clock } from "./clock.ts";
import type { Config } from "./config.ts";
import type { RunEvents } from "./runs/run-events.ts";
import type { Topology } from "./topology.ts";

/** What every part of the service is built with (services.ts, `base`). */
export interface ServiceBase {
  config: Config;
  topology: Topology;
  events: RunEvents;
  clock: Clock;
  logger: Logger;
  nodeId: string;
}
