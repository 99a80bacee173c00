// Build: `npm run build` writes the bundle and its manifest to ../static/dist/, which Django
// serves under /static/dist/ (frontend/views.py reads the manifest to link the entry).
// Dev: `npm run dev` serves the app with hot reload and forwards the API to a running
// `manage.py serve` on 127.0.0.1:8000 (sign in there first: the session cookie is shared).
import react from "@vitejs/plugin-react";
import { defineConfig } from "vitest/config";

// The Django server the dev server forwards to (`manage.py serve`'s default address).
const backend = "http://127.0.0.1:8000";

export default defineConfig({
  plugins: [react()],
  base: "/static/dist/",
  build: {
    outDir: "../static/dist",
    emptyOutDir: true,
    manifest: true,
    sourcemap: true,
    target: "es2022",
  },
  server: {
    proxy: { "/api": backend, "/accounts": backend, "/admin": backend },
  },
  test: {
    include: ["src/**/*.test.ts"],
    environment: "node",
  },
});
