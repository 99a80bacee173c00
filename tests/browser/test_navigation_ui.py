"""The header's menus in real Chromium at 1280 px: every screen of every role is reached from the
keyboard (Tab to a menu, Enter, ↓ through its links, Esc back), on screen and never in a sideways
scroller; and the manager's home page lists every screen of the menus (issue 27, finding 14)."""
from __future__ import annotations

import pytest
from playwright.sync_api import expect

from accounts.services import user_create
from tests.browser.conftest import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

EVERY_SCREEN = {
    "Review": ["Usability review", "Duplicate review", "Description review", "Relation verification",
               "Cross-video pairs", "Adjudication queue", "Audits to do", "Progress", "Agreement"],
    "Build": ["Runs", "Pools", "Model runs", "Snapshots", "Videos"],
    "Models": ["Training", "Experiments"],
    "Releases": ["Audits", "Releases"],
    "Admin": ["Jobs", "Find", "Seats"],
}


def _focused_text(page) -> str:
    return page.evaluate("document.activeElement?.textContent?.trim() ?? ''")


def test_every_screen_is_reached_from_the_header_at_1280_px_by_keyboard(transactional_db, open_page):
    user_create(username="everyone", password=PASSWORD, roles=["annotator", "adjudicator", "auditor", "manager"])
    page = open_page("everyone")
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto("/manage/jobs")
    header = page.locator("header.top")
    nav = header.get_by_role("navigation", name="Main")
    assert header.bounding_box()["height"] <= 56
    scroll, client = header.evaluate("h => [h.scrollWidth, h.clientWidth]")
    assert scroll <= client, f"the header overflows at 1280 px: {scroll} > {client}"
    expect(nav.locator("li.menu.current")).to_have_text("Admin ▾", use_inner_text=True)  # Jobs is in Admin

    page.locator("header .brand").focus()
    reached: dict[str, list[str]] = {}
    for menu in EVERY_SCREEN:
        page.keyboard.press("Tab")
        button = nav.get_by_role("button", name=menu)
        expect(button).to_be_focused()
        page.keyboard.press("Enter")
        expect(button).to_have_attribute("aria-expanded", "true")
        links = nav.locator(f"#menu-{menu} a")
        reached[menu] = []
        for i in range(links.count()):
            page.keyboard.press("ArrowDown")
            link = links.nth(i)
            expect(link).to_be_focused()
            box = link.bounding_box()
            assert box and 0 <= box["x"] and box["x"] + box["width"] <= 1280 and box["y"] + box["height"] <= 800, box
            reached[menu].append(_focused_text(page))
        page.keyboard.press("Escape")
        expect(button).to_be_focused()
        expect(button).to_have_attribute("aria-expanded", "false")
    assert reached == EVERY_SCREEN

    # Enter on a link opens its screen and closes the menu (keys pressed as fast as they come)
    page.keyboard.press("ArrowDown")  # Admin again, opened by the arrow
    page.keyboard.press("ArrowDown")  # Find
    page.keyboard.press("Enter")
    page.wait_for_url("**/manage/find")
    expect(nav.locator(".menu-links:visible")).to_have_count(0)
    # A click elsewhere closes an open menu too
    nav.get_by_role("button", name="Models").click()
    expect(nav.get_by_role("link", name="Experiments")).to_be_visible()
    page.locator("main").click()
    expect(nav.get_by_role("link", name="Experiments")).to_be_hidden()


def test_the_managers_home_page_lists_every_screen_of_the_menus(transactional_db, open_page):
    user_create(username="mgr", password=PASSWORD, roles=["manager"])
    page = open_page("mgr")
    places = page.get_by_role("region", name="Manage")
    for title in ("Pipeline progress", "Agreement", "Proposal runs", "Frozen pools", "Describer, query-writer and mining runs",
                  "Completeness and snapshots", "Videos", "Training runs", "Experiments", "Audits", "Releases", "Jobs",
                  "Find items, queries and relations", "Seats and leases"):
        expect(places.get_by_role("link", name=title, exact=True)).to_be_visible()
    expect(places.get_by_role("link")).to_have_count(14)
    places.get_by_role("link", name="Seats and leases", exact=True).click()
    page.wait_for_url("**/manage/seats")
