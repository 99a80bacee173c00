// Entry point: the signed-in user comes with the page (Django renders it as JSON), or from
// /api/me/ when the page is served by the Vite dev server.

import { createRoot } from "react-dom/client";
import { api } from "./api/endpoints";
import type { Me } from "./api/types";
import { App } from "./App";
import { ErrorState } from "./components/states";
import "./styles.css";

function bootstrappedMe(): Me | null {
  const el = document.getElementById("trajlab-me");
  if (!el?.textContent) return null;
  try {
    return JSON.parse(el.textContent) as Me;
  } catch {
    return null;
  }
}

const root = createRoot(document.getElementById("root") as HTMLElement);
const me = bootstrappedMe();
if (me) root.render(<App me={me} />);
else {
  api.me().then(
    (m) => root.render(<App me={m} />),
    (e: unknown) => root.render(<main id="main"><ErrorState error={e} title="Could not start" /></main>),
  );
}
