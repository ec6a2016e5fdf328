#!/usr/bin/env node
// Runs the TypeScript sources directly through tsx, so there is no build step to forget.
import { register } from "tsx/esm/api";

register();
const { main } = await import("../src/main.ts");
await main(process.argv);
