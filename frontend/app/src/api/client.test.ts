import { describe, expect, it } from "vitest";
import { ApiError, csrfToken, errorFromResponse, request, setSignedOutHandler } from "./client";
import { requestId } from "./endpoints";

const json = (status: number, body: unknown) =>
  new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });

describe("API errors", () => {
  it("keeps the API's code, message and extra", async () => {
    const e = await errorFromResponse(json(409, { code: "review_unfinished", message: "3 items open", extra: { usability: 3 } }));
    expect(e).toBeInstanceOf(ApiError);
    expect([e.status, e.code, e.message, e.extra]).toEqual([409, "review_unfinished", "3 items open", { usability: 3 }]);
  });

  it("copes with a body that is not the API's JSON", async () => {
    const e = await errorFromResponse(new Response("<html>Bad gateway</html>", { status: 502, statusText: "Bad Gateway" }));
    expect([e.status, e.code]).toEqual([502, "http_502"]);
    expect(e.message).toMatch(/502/);
  });

  it("sends JSON with the CSRF header, returns null for 204 and signs out on not_authenticated", async () => {
    const seen: RequestInit[] = [];
    const fake = (async (_url: string, init: RequestInit) => {
      seen.push(init);
      return new Response(null, { status: 204 });
    }) as unknown as typeof fetch;
    expect(await request("/api/review/next/", { method: "POST", body: { stage: "usability" } }, fake)).toBeNull();
    expect(seen[0].body).toBe('{"stage":"usability"}');
    expect((seen[0].headers as Record<string, string>)["Content-Type"]).toBe("application/json");
    expect("X-CSRFToken" in (seen[0].headers as Record<string, string>)).toBe(true);

    let signedOut = 0;
    setSignedOutHandler(() => signedOut++);
    const denied = (async () => json(403, { code: "not_authenticated", message: "sign in", extra: {} })) as unknown as typeof fetch;
    await expect(request("/api/me/", {}, denied)).rejects.toMatchObject({ code: "not_authenticated", status: 403 });
    expect(signedOut).toBe(1);
    const down = (async () => {
      throw new TypeError("fetch failed");
    }) as unknown as typeof fetch;
    await expect(request("/api/me/", {}, down)).rejects.toMatchObject({ code: "network_error", status: 0 });
  });

  it("reads the CSRF token from the page, else from the cookie", () => {
    const page = { querySelector: () => ({ getAttribute: () => "from-meta" }), cookie: "csrftoken=from-cookie" };
    expect(csrfToken(page as unknown as Document)).toBe("from-meta");
    const dev = { querySelector: () => null, cookie: "a=1; csrftoken=abc%3D" };
    expect(csrfToken(dev as unknown as Document)).toBe("abc=");
  });

  it("makes distinct v4 UUIDs for safe retries", () => {
    const ids = new Set(Array.from({ length: 200 }, requestId));
    expect(ids.size).toBe(200);
    for (const id of ids) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });
});
