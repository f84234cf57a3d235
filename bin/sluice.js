#!/usr/bin/env node
// Node 24 runs the TypeScript sources directly (type stripping); no build step. Stripped and
// compiled code is cached beside the dependencies, which halves the start-up's CPU
// (docs/operations.md, "Start-up"); a cache under the shared temporary directory could be
// planted by another local user, this one belongs to whoever installed Sluice.
import module from "node:module";

module.enableCompileCache?.(new URL("../node_modules/.cache/sluice-compile", import.meta.url).pathname);
const { runCli } = await import("../src/cli.ts");
await runCli(process.argv.slice(2));
