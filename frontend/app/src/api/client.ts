// The one way the UI talks to the server: JSON over fetch with the session cookie and the CSRF
// token, and every failure turned into an ApiError with the API's `{code, message, extra}`.

export class ApiError extends Error {
  readonly status: number; // HTTP status (0: the request never reached the server)
  readonly code: string; // the API's stable error code ("review_unfinished", "not_found", …)
  readonly extra: Record<string, unknown>; // details the API attached (counts, field errors)

  constructor(status: number, code: string, message: string, extra: Record<string, unknown> = {}) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.extra = extra;
  }
}

/** The CSRF token Django put in the page (or, in the Vite dev server, its cookie). */
export function csrfToken(doc: Pick<Document, "querySelector" | "cookie"> | undefined = globalThis.document): string {
  if (!doc) return "";
  const meta = doc.querySelector('meta[name="csrf-token"]')?.getAttribute("content");
  if (meta) return meta;
  const m = /(?:^|;\s*)csrftoken=([^;]+)/.exec(doc.cookie ?? "");
  return m ? decodeURIComponent(m[1]) : "";
}

/** Turn a non-2xx response into an ApiError, whatever its body. */
export async function errorFromResponse(response: Response): Promise<ApiError> {
  let body: unknown = null;
  try {
    body = await response.json();
  } catch {
    // not JSON (a proxy's HTML error page): fall through to the status text
  }
  if (body && typeof body === "object" && "message" in body) {
    const b = body as { code?: unknown; message?: unknown; extra?: unknown };
    const extra = b.extra && typeof b.extra === "object" ? (b.extra as Record<string, unknown>) : {};
    return new ApiError(response.status, String(b.code ?? `http_${response.status}`), String(b.message), extra);
  }
  return new ApiError(response.status, `http_${response.status}`, `${response.status} ${response.statusText || "error"} from the server`);
}

export interface RequestOptions {
  method?: "GET" | "POST" | "PATCH" | "DELETE";
  body?: unknown;
  signal?: AbortSignal;
  /** On an ended session, throw the error for the caller to explain (a vote that was not saved)
   *  instead of going to the login page at once. */
  keepPageWhenSignedOut?: boolean;
}

/** The request was refused because the session ended (or its CSRF token went with it). */
export function isSignedOut(error: unknown): boolean {
  if (!(error instanceof ApiError)) return false;
  return error.status === 401 || error.code === "not_authenticated" || error.code === "authentication_failed"
    || (error.status === 403 && /csrf/i.test(error.message));
}

type Fetch = typeof fetch;

/** Called when the session has ended; the app sends the browser to the login page. */
let onSignedOut: () => void = () => {
  window.location.assign(`/accounts/login/?next=${encodeURIComponent(window.location.pathname)}`);
};

let holds = 0;

/** While held, an ended session does not send the browser to the login page: the screen (a
 *  review item, whose vote would be lost) explains it where the person acts. Returns the release. */
export function holdSignedOutRedirect(): () => void {
  holds++;
  let released = false;
  return () => {
    if (!released) holds--;
    released = true;
  };
}

export function setSignedOutHandler(handler: () => void): void {
  onSignedOut = handler;
}

/** Send one request. Resolves with the parsed JSON body, or null for 204 No Content. */
export async function request<T>(path: string, opts: RequestOptions = {}, fetchImpl: Fetch = fetch): Promise<T | null> {
  const method = opts.method ?? "GET";
  const headers: Record<string, string> = { Accept: "application/json" };
  if (method !== "GET") headers["X-CSRFToken"] = csrfToken();
  if (opts.body !== undefined) headers["Content-Type"] = "application/json";
  let response: Response;
  try {
    response = await fetchImpl(path, {
      method,
      headers,
      credentials: "same-origin",
      body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
      signal: opts.signal,
    });
  } catch (e) {
    if (e instanceof DOMException && e.name === "AbortError") throw e;
    throw new ApiError(0, "network_error", "The server could not be reached. Check your connection and try again.");
  }
  if (response.status === 204) return null;
  if (!response.ok) {
    const error = await errorFromResponse(response);
    if ((error.code === "not_authenticated" || error.status === 401) && !opts.keepPageWhenSignedOut && holds === 0) onSignedOut();
    throw error;
  }
  return (await response.json()) as T;
}

/** GET that must return a body. */
export async function get<T>(path: string, signal?: AbortSignal): Promise<T> {
  const body = await request<T>(path, { signal });
  if (body === null) throw new ApiError(204, "no_content", `${path} returned no content`);
  return body;
}
