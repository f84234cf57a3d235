import { CliError, Exit, request } from "./client.ts";
import { type Command, LOCATOR_OPTIONS, locator } from "./command.ts";

function lifecycle(name: "activate" | "deactivate"): Command {
  const activate = name === "activate";
  return {
    name,
    usage: activate
      ? `${name} <element> [--path P | --folder-id F] [--version N]`
      : `${name} <element> [--path P | --folder-id F]`,
    // --version: the revision to release, an older one being a rollback (docs/dataflow-service.md).
    options: activate ? { ...LOCATOR_OPTIONS, version: { type: "string" } } : LOCATOR_OPTIONS,
    async run({ positionals, values, conn, ui }) {
      const element = positionals[0];
      if (!element) throw new CliError(Exit.USAGE, `${name}: give the element name`);
      const body: Record<string, unknown> = locator(element, values);
      if (typeof values.version === "string") {
        if (!/^[1-9]\d*$/.test(values.version))
          throw new CliError(Exit.USAGE, `${name}: --version must be a revision number (1, 2, …)`);
        body.version = Number(values.version);
      }
      const { data } = await request<string>(conn, "POST", `${conn.dataflowPrefix}/flow/${name}`, {
        body,
      });
      ui.out(
        ui.json
          ? JSON.stringify({ elementName: element, status: data })
          : `${element}: ${ui.status(data)}`,
      );
      return Exit.OK;
    },
  };
}

/** `sluice activate <element> [--version N]`: → APPROVED, releasing revision N when given. */
export const activate = lifecycle("activate");
/** `sluice deactivate <element>`: APPROVED → OBSOLETE. */
export const deactivate = lifecycle("deactivate");
