import { Type } from "typebox";
import { SECRET_NAME_PATTERN } from "../secrets/refs.ts";

/** TypeBox schemas of the secret endpoints (docs/secrets.md). */

const SecretName = Type.String({
  pattern: SECRET_NAME_PATTERN,
  description: "Letters, digits and `_`, not starting with a digit, at most 100 characters",
});

export const SecretParams = Type.Object({ name: SecretName });

export const PutSecretBody = Type.Object({
  value: Type.String({
    minLength: 1,
    maxLength: 65_536,
    description: "The secret's value; stored encrypted and never answered by any endpoint",
  }),
});

export const SecretInfo = Type.Object({
  name: Type.String(),
  createTime: Type.Integer({ description: "epoch ms" }),
  updateTime: Type.Integer({ description: "epoch ms" }),
});
