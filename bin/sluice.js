#!/usr/bin/env node
// Node 24 runs the TypeScript sources directly (type stripping); no build step. What V8 compiled
// of them is kept between starts, which halves the time a process (and each of its threads)
// takes to load them (docs/operations.md, "Start-up"). NODE_COMPILE_CACHE chooses another
// directory; NODE_DISABLE_COMPILE_CACHE=1 turns it off.
import module from "node:module";
import { fileURLToPath } from "node:url";

const cache = module.enableCompileCache(
  process.env.NODE_COMPILE_CACHE
    ? undefined
    : fileURLToPath(new URL("../node_modules/.cache/sluice-compile", import.meta.url)),
);
// Worker threads (monitoring reads, the checkpointer) take it from the environment, not this call.
if (cache.directory) process.env.NODE_COMPILE_CACHE = cache.directory;

const { runCli } = await import("../src/cli.ts");
await runCli(process.argv.slice(2));
