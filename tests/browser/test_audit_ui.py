"""Auditing in the web UI, in real Chromium against a live server on PostgreSQL: a manager samples
an audit of a split, an auditor checks its records one at a time from the keyboard, blind to votes
and model suggestions, and the manager reads the error rates.

The accepted records come from the services on the rendered street scene: approved descriptions,
the template writer's queries and their relation rows labelled by two annotators."""
from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from accounts.services import user_create
from annotation.curation.services.claims import work_item_claim_next
from annotation.curation.services.votes import vote_cast
from annotation.models import Audit, AuditJudgment, AuditSample, Query, WorkItem
from annotation.models.releases import AUDIT_ERROR_TYPES
from tests.browser.conftest import PASSWORD, nav
from tests.browser.test_relation_ui import described_pool, relation_rows  # noqa: F401 (fixtures, reused)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# What an auditor must never see: model suggestions, votes, who voted, why a record was sampled.
HIDDEN = ["hint", "proposal", "ann1", "ann2", "ann3", "disputed", "difficult", "stratum", "adjudicat", "prelabel"]


def _label_rows(people) -> None:
    """Every relation row labelled by the truth of its query (its target matches, the rest do
    not), rated faithful and natural; disputed candidates get their second review."""
    for reviewer in (people["ann1"], people["ann2"]):
        while (seat := work_item_claim_next(annotator=reviewer, stage=WorkItem.Stage.RELATION)) is not None:
            item = WorkItem.objects.select_related("query").get(pk=seat.item_id)
            members = [int(t) for t in item.disputed] if item.disputed else \
                list(item.query.pool.members.values_list("trajectory_id", flat=True))
            judgments = {t: int(t == item.query.target_id) for t in members}
            first = not item.disputed
            vote_cast(item_id=item.pk, annotator=reviewer, label="reviewed", judgments=judgments,
                      payload={"faithful": True, "natural": 5} if first else None)


def test_an_auditor_checks_records_blind(open_page, people, relation_rows, shot):  # noqa: F811
    _label_rows(people)
    assert Query.objects.filter(status="accepted").exists()
    user_create(username="aud", password=PASSWORD, roles=["auditor"])

    # A manager samples an audit of the train split.
    boss = open_page("boss")
    nav(boss, "Audits")
    boss.get_by_label("Split").select_option("train")
    boss.get_by_label("Random records per kind").fill("2")
    boss.get_by_label("Difficult records per kind").fill("1")
    boss.get_by_role("button", name="Start an audit").click()
    expect(boss.get_by_role("region", name=re.compile(r"^Audit \d+$"))).to_contain_text("records checked")
    audit = Audit.objects.get()
    assert (audit.split, audit.n_random, audit.n_difficult) == ("train", 2, 1)
    samples = AuditSample.objects.filter(audit=audit)
    n = samples.count()
    assert n >= 3

    # The auditor checks the records in the audit's order, from the keyboard.
    page = open_page("aud")
    page.get_by_role("link", name="audits to do").click()
    expect(page.get_by_role("row", name=f"{audit.pk} train")).to_contain_text(f"0 of {n}")
    page.get_by_role("link", name=f"Audit {audit.pk}").click()
    panel = page.get_by_role("complementary", name="Your verdict")
    expect(panel).to_be_visible()
    first = samples.order_by("position").first()
    expect(panel).to_contain_text(f"A {first.kind} record, as accepted")
    expect(page.locator("canvas.main-view")).to_be_visible()  # the record's trajectory is in the player
    body = page.inner_text("main").lower()
    assert not [word for word in HIDDEN if word in body], "the auditor sees only the record as accepted"
    shot(page, "17-audit-record")
    expect(panel.locator(".counter")).to_have_text(f"Record 1 of {n}")
    page.keyboard.press("2")  # error
    page.keyboard.press("Control+Enter")  # no error type yet: the status line says what is missing
    expect(panel.get_by_role("status").filter(has_text="Choose the error type")).to_be_visible()
    page.keyboard.press("Shift+1")  # its first error type
    expect(page.get_by_role("radio", name="2 Error")).to_have_attribute("aria-checked", "true")
    page.keyboard.press("Control+Enter")
    expect(page.get_by_role("status").filter(has_text="Recorded error")).to_be_visible()
    judgment = AuditJudgment.objects.get(sample=first)
    assert (judgment.verdict, judgment.error_type) == ("error", AUDIT_ERROR_TYPES[first.kind][0])
    assert judgment.auditor.username == "aud" and judgment.time_spent_ms > 0
    # The next record comes by itself; 1 then Ctrl+Enter records it correct.
    second = samples.order_by("position")[1]
    expect(panel).to_contain_text(f"Sample {second.pk}")
    # the next record starts with its own status line (nothing about the last one) and its number
    expect(panel.locator(".counter")).to_have_text(f"Record 2 of {n}")
    expect(panel.get_by_role("status").filter(has_text="Choose the error type")).to_have_count(0)
    page.keyboard.press("1")
    page.keyboard.press("Control+Enter")
    expect(page.get_by_role("status").filter(has_text="Recorded correct")).to_be_visible()
    assert AuditJudgment.objects.get(sample=second).verdict == "correct"

    # The manager reads the error rates with their intervals.
    boss.reload()
    stats = boss.get_by_role("table", name=f"Audit {audit.pk} of train: error rates per kind (exact 95% intervals)")
    expect(stats).to_contain_text("random")
    expect(boss.get_by_role("region", name=f"Audit {audit.pk}")).to_contain_text(f"2 of {n} records checked")
    shot(boss, "18-manager-audit")
