"""Review screens in real Chromium at 1280x800 (issue 27, finding 15): the relation page opens in
place (nothing jumps or shifts as its candidates arrive) and its query, kept in view in the side
panel, covers none of the overview video."""
from __future__ import annotations

import random
import time

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import open_item, wait_first_frame
from tests.browser.test_relation_ui import described_pool, relation_rows  # noqa: F401 (fixtures, reused)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# The page's layout shifts (the Layout Instability API), summed as Chromium reports them.
LAYOUT_SHIFTS = """(() => {
  window.__layoutShift = 0;
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) if (!e.hadRecentInput) window.__layoutShift += e.value;
  }).observe({ type: "layout-shift", buffered: true });
})()"""

UNCOVERED = """canvas => {
  const r = canvas.getBoundingClientRect();
  const top = Math.max(r.top, 0) + 4, bottom = Math.min(r.bottom, innerHeight) - 4;
  if (bottom <= top) return true;  // scrolled out: nothing to cover
  return [0.1, 0.5, 0.9].every((fx) => [top, (top + bottom) / 2].every((y) =>
    document.elementFromPoint(r.left + fx * r.width, y) === canvas));
}"""


def _box(page, selector: str) -> tuple[float, float]:
    box = page.locator(selector).first.bounding_box()
    assert box is not None, selector
    return round(box["x"]), round(box["y"])


def test_the_relation_page_opens_in_place_and_its_query_covers_nothing(open_page, people, relation_rows):  # noqa: F811
    page = open_page("ann1")
    page.set_viewport_size({"width": 1280, "height": 800})
    page.add_init_script(LAYOUT_SHIFTS)
    held = []
    page.route("**/api/pools/*/", lambda route: held.append(route))  # the candidates wait until let go
    page.goto("/review/relations")
    item = open_item(page, "review/relations")
    # Before the candidates arrive, the query, the side panel and the player's place are there
    expect(page.locator(".query-panel")).to_be_visible()
    expect(page.locator(".player-slot")).to_be_visible()
    before = {s: _box(page, s) for s in (".query-panel", ".vote-panel", ".player-slot")}
    for route in held:
        route.continue_()
    page.unroute("**/api/pools/*/")
    wait_first_frame(page, item)
    expect(page.locator(".session-progress .stage-count")).to_contain_text("on this stage")  # the last to come
    page.wait_for_timeout(300)
    # Nothing moved: no scroll, the query and the panel where they were, the player in its place
    assert page.evaluate("scrollY") == 0
    assert _box(page, ".query-panel") == before[".query-panel"]
    assert _box(page, ".vote-panel") == before[".vote-panel"]
    assert _box(page, ".player-overview") == before[".player-slot"]
    shift = page.evaluate("window.__layoutShift")
    assert shift < 0.01, f"layout shift {shift:.4f} on open"
    # The query is in view in the side panel and covers none of the overview video, on open and
    # after labelling down to the last candidate (the page scrolls for it)
    video = page.locator(".player-overview canvas.main-view")
    query = page.get_by_role("complementary", name="Your labels").get_by_label("The query")
    expect(query).to_be_in_viewport()
    assert video.evaluate(UNCOVERED)
    cards = page.locator(".candidate")
    for _ in range(cards.count() - 1):
        page.keyboard.press("0")
    expect(cards.last).to_have_attribute("aria-current", "true")
    expect(cards.last).to_be_in_viewport()
    expect(query).to_be_in_viewport()
    assert page.evaluate("scrollY") > 0
    assert video.evaluate(UNCOVERED)


def test_a_failed_votes_error_and_its_button_are_on_screen_at_1280x800(open_page, people, review_run):
    review_run()
    page = open_page("ann1")
    page.set_viewport_size({"width": 1280, "height": 800})
    page.route("**/api/review/items/*/votes/", lambda route: route.fulfill(
        status=409, content_type="application/json",
        body='{"code": "item_closed", "message": "This item was decided while you looked at it.", "extra": {}}'))
    page.goto("/review/usability")
    item = open_item(page, "review/usability")
    wait_first_frame(page, item)
    page.keyboard.press("1")
    page.keyboard.press("Enter")  # send now
    alert = page.get_by_role("alert").filter(has_text="Your vote was not recorded")
    expect(alert).to_contain_text("This item was decided while you looked at it.")
    retry = alert.get_by_role("button", name="Try again")
    expect(retry).to_be_in_viewport(ratio=1)
    expect(retry).to_be_focused()  # Enter retries, from the keyboard
    page.unroute("**/api/review/items/*/votes/")


SHOWN_FRAMES = """() => {
  const canvas = document.querySelector("canvas.main-view");
  window.__shown = [[Number(canvas.dataset.frame), performance.now()]];
  new MutationObserver(() => window.__shown.push([Number(canvas.dataset.frame), performance.now()]))
    .observe(canvas, { attributes: true, attributeFilter: ["data-frame"] });
}"""


def test_cold_cache_playback_waits_for_frames_and_then_plays_steadily(open_page, people, review_run):
    """Frames come from a cold server: each after 0.1 to 1.2 s, so later ones often land first.
    The player shows every frame in order and, after a wait, plays on for at least half a second
    (6 frames at 12 fps) instead of stuttering a frame at a time."""
    review_run()
    page = open_page("ann1")
    rng = random.Random(5)
    waiting: list[tuple[float, object]] = []
    page.route("**/api/videos/*/frames/*", lambda route: waiting.append((time.monotonic() + rng.uniform(0.1, 1.2), route)))

    def deliver(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            page.wait_for_timeout(20)
            now = time.monotonic()
            for entry in [w for w in waiting if w[0] <= now]:
                waiting.remove(entry)
                entry[1].continue_()

    page.goto("/review/usability")
    item = open_item(page, "review/usability")
    while not page.evaluate(f"performance.getEntriesByName('first-frame:{item}', 'measure').length"):
        deliver(0.1)
    page.evaluate(SHOWN_FRAMES)
    page.keyboard.press("Space")  # play
    for _ in range(60):
        deliver(0.25)
        if page.evaluate("window.__shown.at(-1)[0]") >= 36:
            break
    page.keyboard.press("Space")  # pause
    shown = page.evaluate("window.__shown")
    changes = [(f, at) for i, (f, at) in enumerate(shown) if i == 0 or f != shown[i - 1][0]]
    frames = [f for f, _ in changes]
    assert frames[-1] >= 36, f"playback stalled at frame {frames[-1]}"
    assert all(b > a for a, b in zip(frames, frames[1:])), f"frames went back: {frames}"
    # Every frame in turn, but where the page itself fell behind the 12 fps clock (a busy machine
    # delays its animation frames): the player keeps time and shows the frame due, so a jump
    # past a frame must follow a change that came over two frame intervals late.
    late = [(a, b, round(t1 - t0)) for (a, t0), (b, t1) in zip(changes, changes[1:]) if b - a > 1]
    assert all(ms > 2 * 1000 / 12 for _, _, ms in late), f"frames were skipped on time: {late} in {frames}"
    # runs of playback between waits (a wait: no new frame for over two frame intervals)
    runs, last = [0], shown[0][1]
    for _, at in shown[1:]:
        if at - last > 2 * 1000 / 12:
            runs.append(0)
        runs[-1] += 1
        last = at
    assert all(n >= 6 for n in runs[1:-1]), f"playback stuttered: runs of {runs} frames"
    for _, route in waiting:
        route.continue_()
    page.unroute("**/api/videos/*/frames/*")
