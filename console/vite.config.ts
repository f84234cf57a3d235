import { defineConfig } from "vite";

// Served by the service itself at /console/ (src/http/console-routes.ts): absolute asset URLs
// under that base, everything bundled locally, no CDN.
export default defineConfig({
  root: import.meta.dirname,
  base: "/console/",
  build: { outDir: "dist", emptyOutDir: true, assetsInlineLimit: 0 },
  logLevel: "warn",
});
