#!/usr/bin/env node
// Node 24 runs the TypeScript sources directly (type stripping); no build step.
const { runCli } = await import("../src/cli.ts");
await runCli(process.argv.slice(2));
