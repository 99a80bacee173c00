"""An annotator's keys in real Chromium: the "Other reason" field is reached in a few Tab presses
or with O, keys typed there are text and never a vote, Esc leaves it and Enter keeps the reason,
and then the label keys vote again with the reason kept (issue 27, finding 10)."""
from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotation.curation.stages.usability import LABELS, REASONS
from annotation.models import Vote
from tests.browser.conftest import open_item, wait_first_frame

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _focused(locator) -> bool:
    return locator.evaluate("el => el === document.activeElement")


def test_the_other_reason_field_is_no_keyboard_trap(open_page, people, review_run):
    review_run()
    page = open_page("ann1")
    page.goto("/review/usability")
    item = open_item(page, "review/usability")
    wait_first_frame(page, item)
    field = page.get_by_role("textbox", name="Other reason")
    bar = page.locator(".undo-bar")

    # From the item's heading, Tab goes through the labels and the reasons to the field
    page.locator("main h1").focus()
    presses = 0
    while not _focused(field) and presses < 40:
        page.keyboard.press("Tab")
        presses += 1
    assert presses <= len(LABELS) + len(REASONS) + 1, f"the field took {presses} Tab presses"

    # Keys typed in the field are its text: "2" is no vote there
    page.keyboard.type("box jumps to a cyclist2")
    expect(field).to_have_value("box jumps to a cyclist2")
    page.wait_for_timeout(300)
    expect(bar).to_have_count(0)
    page.keyboard.press("Backspace")

    # Esc leaves the field, and the label keys vote again (withdrawn here with Ctrl+Z)
    page.keyboard.press("Escape")
    assert not _focused(field)
    page.keyboard.press("2")
    expect(bar).to_contain_text("Sending unusable in")
    page.keyboard.press("Control+z")
    expect(bar).to_have_count(0)

    # O goes back into the field (the O is not typed); Enter keeps the reason and leaves it
    page.keyboard.press("o")
    assert _focused(field)
    expect(field).to_have_value("box jumps to a cyclist")
    page.keyboard.type(" at frame 40")
    page.keyboard.press("Enter")
    assert not _focused(field)
    expect(page.get_by_role("status").filter(has_text="Reason kept")).to_be_visible()
    assert not Vote.objects.exists()

    # The vote carries the reason as typed, no stray digits
    page.keyboard.press("2")
    page.keyboard.press("Enter")  # send now
    open_item(page, "review/usability", after=item)
    vote = Vote.objects.get(item_id=item, annotator=people["ann1"])
    assert (vote.label, vote.reasons) == ("unusable", ["box jumps to a cyclist at frame 40"])
