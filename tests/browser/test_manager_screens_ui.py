"""Manager screens in real Chromium (issue 27, finding 14): Find opens the item itself; the seat
board filters by holder on Enter and pages through its items; a cancelled run's job says
"cancelled", not "failed"; Esc closes the publish confirmation; the training form warns before
training on a dev or test snapshot and needs a confirmation."""
from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from annotation.models import Assignment, RelationSnapshot, WorkItem
from tests.browser.conftest import nav

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_find_opens_the_item_itself(open_page, people, review_run):
    run = review_run()
    item = WorkItem.objects.filter(stage="usability", trajectory__run=run).order_by("id").first()
    page = open_page("boss")
    nav(page, "Find")
    row = page.get_by_role("row").filter(has=page.get_by_role("link", name=str(item.pk), exact=True))
    expect(row.get_by_role("link", name="seats")).to_have_attribute("href", f"/manage/seats?item={item.pk}")
    row.get_by_role("link", name=str(item.pk), exact=True).click()
    page.wait_for_url(f"**/manage/items/{item.pk}")
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Item {item.pk}")
    facts = page.get_by_role("definition")
    expect(page.locator(".found-item dl")).to_contain_text("Usability review")
    expect(facts.filter(has_text="0 of 3 seats")).to_have_count(1)
    # the trajectory the item shows, in the player, and the way to its seats
    expect(page.locator("canvas.main-view")).to_be_visible()
    page.get_by_role("link", name=f"Seats and leases of item {item.pk}").click()
    page.wait_for_url(f"**/manage/seats?item={item.pk}")


def test_the_seat_board_filters_by_holder_on_enter_and_pages(open_page, people, review_run):
    run = review_run()
    items = list(WorkItem.objects.filter(stage="usability", trajectory__run=run).order_by("id"))
    assert len(items) == 3
    now = timezone.now()
    Assignment.objects.create(item=items[1], annotator=people["ann3"], seat=0, claimed_at=now,
                              lease_expires_at=now + timedelta(minutes=10))
    page = open_page("boss")
    page.goto("/manage/seats?limit=2")
    board = page.locator("table.seats")
    expect(board.locator("caption")).to_have_text("3 items · 1–2 shown")
    expect(board.locator("tbody tr")).to_have_count(2)
    pages = page.get_by_role("navigation", name="Pages of items")
    expect(pages.get_by_role("button", name="← Previous")).to_be_disabled()
    pages.get_by_role("button", name="Next →").click()
    expect(board.locator("caption")).to_have_text("3 items · 3–3 shown")
    expect(board.get_by_role("row", name=f"Item {items[2].pk}")).to_be_visible()
    assert "offset=2" in page.url
    expect(pages.get_by_role("button", name="Next →")).to_be_disabled()
    pages.get_by_role("button", name="← Previous").click()
    expect(board.get_by_role("row", name=f"Item {items[0].pk}")).to_be_visible()
    # Enter in the holder filter applies it (back on the first page)
    holder = page.get_by_role("form", name="Seat filters").get_by_label("Holder")
    holder.fill("ann3")
    holder.press("Enter")
    expect(board.locator("caption")).to_have_text("1 item")
    expect(board.get_by_role("row", name=f"Item {items[1].pk}")).to_contain_text("ann3")
    assert "holder=ann3" in page.url and "offset" not in page.url
    expect(page.get_by_role("navigation", name="Pages of items")).to_have_count(0)
    assert re.search(r"limit=2", page.url)


def _snapshot_rows() -> dict:
    """Sealed snapshot records of each split (the training form only lists them here)."""
    now = timezone.now()
    return {split: RelationSnapshot.objects.create(split=split, name=f"ui {split}", content_sha256="0" * 64,
                                                   path=f"/nowhere/{split}", pool_versions={}, counts={}, complete=True,
                                                   sealed_at=now)
            for split in ("train", "dev", "test")}


def test_the_training_form_warns_before_training_on_a_dev_or_test_snapshot(open_page, people):
    snaps = _snapshot_rows()
    page = open_page("boss")
    page.goto("/manage/training")
    form = page.get_by_role("form", name="Start a training run")
    start = form.get_by_role("button", name="Start training")
    expect(form.get_by_role("combobox", name="Train on")).to_have_value(str(snaps["train"].pk))
    expect(form.get_by_role("alert")).to_have_count(0)
    expect(start).to_be_enabled()
    for split in ("dev", "test"):
        form.get_by_role("combobox", name="Train on").select_option(str(snaps[split].pk))
        warning = form.get_by_role("alert").filter(has_text=f"is of the {split} split")
        expect(warning).to_be_visible()
        expect(start).to_be_disabled()
        warning.get_by_role("checkbox", name=f"train on the {split} snapshot anyway").check()
        form.get_by_role("combobox", name="Evaluate on").select_option(
            str(snaps["test" if split == "dev" else "dev"].pk))
        expect(start).to_be_enabled()
    # back to a train snapshot: no warning, nothing to confirm
    form.get_by_role("combobox", name="Train on").select_option(str(snaps["train"].pk))
    expect(form.get_by_role("alert")).to_have_count(0)
    expect(start).to_be_enabled()
