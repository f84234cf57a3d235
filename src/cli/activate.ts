import { CliError, Exit, request } from "./client.ts";
import { type Command, LOCATOR_OPTIONS, locator } from "./command.ts";

function lifecycle(name: "activate" | "deactivate"): Command {
  return {
    name,
    usage: `${name} <element> [--path P | --folder-id F]`,
    options: LOCATOR_OPTIONS,
    async run({ positionals, values, conn, ui }) {
      const element = positionals[0];
      if (!element) throw new CliError(Exit.USAGE, `${name}: give the element name`);
      const { data } = await request<string>(conn, "POST", `${conn.dataflowPrefix}/flow/${name}`, {
        body: locator(element, values),
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

/** `sluice activate <element>`: DRAFT or OBSOLETE → APPROVED. */
export const activate = lifecycle("activate");
/** `sluice deactivate <element>`: APPROVED → OBSOLETE. */
export const deactivate = lifecycle("deactivate");
