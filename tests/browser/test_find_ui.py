"""The managers' search and per-annotator statistics in real Chromium: review items, queries and
relations found by stage, state, split, annotator, label and text (each count checked against the
database), and every stage's figures per annotator on the agreement screen."""
from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from annotation.models import Query, Relation, Vote, WorkItem
from tests.browser.conftest import nav
from tests.browser.test_release_ui import BOSS_PASSWORD, train_benchmark  # noqa: F401 (fixture, reused)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _caption_count(page) -> int:
    caption = page.locator("table.data caption").first.inner_text()
    return int(re.match(r"(\d+) ", caption).group(1))


def test_items_queries_and_relations_are_found_by_their_filters(train_benchmark, open_page, shot):  # noqa: F811
    page = open_page("boss", BOSS_PASSWORD)
    nav(page, "Find")
    form = page.get_by_role("form", name="Search filters")
    expect(page.locator("table.data caption")).to_contain_text(f"{WorkItem.objects.count()} review items")
    form.get_by_role("combobox", name="Stage").select_option("usability")
    usability = WorkItem.objects.filter(stage="usability")
    expect(page.locator("table.data caption")).to_contain_text(f"{usability.count()} review item")
    form.get_by_role("combobox", name="State").select_option("decided")
    expect(page.locator("table.data caption")).to_contain_text(f"{usability.filter(state='decided').count()} review item")
    # by annotator: the items that person voted on
    vote = Vote.objects.filter(item__stage="usability").select_related("annotator").order_by("pk").first()
    voted = usability.filter(state="decided", votes__annotator=vote.annotator).distinct().count()
    form.get_by_role("textbox", name="Annotator").fill(vote.annotator.username)
    form.get_by_role("textbox", name="Annotator").press("Enter")
    expect(page.locator("table.data caption")).to_contain_text(f"{voted} review item")
    assert _caption_count(page) == voted and "annotator=" in page.url
    shot(page, "33-find-items")
    # an unknown annotator is refused with the API's message
    form.get_by_role("textbox", name="Annotator").fill("nobody-here")
    form.get_by_role("textbox", name="Annotator").press("Enter")
    expect(page.get_by_text("no account is named 'nobody-here'")).to_be_visible()
    # queries by status and text
    form.get_by_role("combobox", name="Find").select_option("queries")
    form = page.get_by_role("form", name="Search filters")
    form.get_by_role("combobox", name="Status").select_option("accepted")
    accepted = Query.objects.filter(status="accepted")
    expect(page.locator("table.data caption")).to_contain_text(f"{accepted.count()} quer")
    word = accepted.order_by("pk").first().text.split()[-1].strip(".")
    form.get_by_role("textbox", name="Text").fill(word)
    form.get_by_role("textbox", name="Text").press("Enter")
    expect(page.locator("table.data caption")).to_contain_text(
        f"{accepted.filter(text__icontains=word).count()} quer")
    # relations of one query, then by label
    first = accepted.order_by("pk").first()
    page.locator(f"a[href='/manage/find?kind=relations&query={first.pk}']").click()
    expect(page.locator("table.data caption")).to_contain_text(f"{Relation.objects.filter(query=first).count()} relation")
    form = page.get_by_role("form", name="Search filters")
    form.get_by_role("combobox", name="Label").select_option("1")
    expect(page.locator("table.data caption")).to_contain_text(
        f"{Relation.objects.filter(query=first, label=1).count()} relation")


def test_every_stage_is_shown_per_annotator(train_benchmark, open_page, client_for):  # noqa: F811
    page = open_page("boss", BOSS_PASSWORD)
    page.goto("/manage/agreement")
    section = page.get_by_role("region", name="Per annotator, every stage")
    table = section.get_by_role("table")
    expect(table).to_be_visible()
    for title in ("Usability", "Duplicate", "Description", "Relation", "Cross-video"):
        expect(table.get_by_role("columnheader", name=re.compile(title))).to_have_count(1)
    # the usability votes of each annotator are the database's (each stage's figures are its own)
    voters = Vote.objects.filter(item__stage="usability", is_adjudication=False).values_list("annotator__username", flat=True)
    for name in sorted(set(voters)):
        row = table.get_by_role("row").filter(has=page.get_by_role("rowheader", name=name, exact=True))
        expect(row.get_by_role("cell").first).to_have_text(re.compile(rf"^{list(voters).count(name)}( \(\d+\))?$"))
