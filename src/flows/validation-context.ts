import { locateElement } from "../elements/locator.ts";
import { ErrorCode, SluiceError } from "../errors.ts";
import type { SyntaxChecker } from "../scripts/syntax-check.ts";
import type { SecretLookup } from "../secrets/secrets.ts";
import type { Scope, Store } from "../store/types.ts";
import type { ValidationContext } from "./validation-codes.ts";

/** What the flow validator may ask about the scope it validates in (also an import's). */
export const validationContext = (
  deps: { store: Store; syntax: SyntaxChecker; secrets?: SecretLookup | undefined },
  scope: Scope,
): ValidationContext => ({
  ...(deps.secrets && {
    secretExists: (name: string) => deps.secrets?.exists(scope, name) ?? Promise.resolve(false),
  }),
  async elementExists(loc, type) {
    try {
      await locateElement(deps.store, scope, loc, type);
      return true;
    } catch (err) {
      // Not found: the validator says where it looked. Not unique, an unknown folder or a
      // malformed locator: the lookup's own reason, which says what to give.
      if (err instanceof SluiceError)
        return err.code === ErrorCode.ELEMENT_NOT_FOUND ? false : err.message;
      throw err;
    }
  },
  async checkPythonSyntax(code) {
    // The bytes the script node will run (src/runs/script-node.ts), in the task sandbox.
    const v = await deps.syntax.check([{ name: "<inline>", bytes: Buffer.from(code, "utf8") }]);
    if (v.ok) return null;
    if (v.reason === "syntax")
      return v.line !== undefined
        ? { line: v.line, message: v.message }
        : { message: `Python cannot compile the code: ${v.message}` };
    return { message: `Python code could not be checked: ${v.message}` };
  },
});
