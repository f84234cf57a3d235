import { Type } from "typebox";

/** A run's environment (src/monitor/environment.ts), null when its script declared no dependencies. */
export const RunEnvironmentSchema = Type.Union(
  [
    Type.Object({
      hash: Type.String({ description: "names its directory DATA_DIR/envs/<hash>" }),
      packages: Type.Array(Type.String(), { description: "name==version, sorted" }),
    }),
    Type.Null(),
  ],
  {
    description:
      "the environment of the script version it ran; null: no dependencies (docs/script-dependencies.md)",
  },
);
