import { fileURLToPath } from "node:url";
import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

// Served by Cumulo at /console (src/console/pages.ts). The client is taken from its source, so the
// console always builds against the committed schema without building the package first.
export default defineConfig({
  base: "/console/",
  plugins: [react()],
  resolve: {
    alias: { "@cumulo/client": fileURLToPath(new URL("../packages/client/src/index.ts", import.meta.url)) },
  },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    sourcemap: false,
    target: "es2022",
    // hls.js (about 500 kB, 160 kB compressed) is a chunk of its own, loaded only when a video plays;
    // the first page's budget is checked by `npm run bench:console`, so the warning would only be noise.
    chunkSizeWarningLimit: 600,
  },
  server: { proxy: { "/v1": "http://127.0.0.1:8080" } },
});
