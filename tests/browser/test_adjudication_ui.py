"""Adjudication of a dev relation row in the web UI, in real Chromium against a live server on
PostgreSQL: both reviews left a candidate ⊥, so the row waits for an adjudicator before its query
is admitted or rejected. The adjudicator reads each review of that candidate and the recorded
dissent on the pool's descriptions (a correction that lost to two approvals), labels the candidate
from the keyboard, and the query is admitted.

The records come from the services on the rendered street scene, its video assigned to dev."""
from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotation.benchmark.services.descriptions import (
    description_run_create,
    description_run_execute,
)
from annotation.benchmark.services.queries import generation_run_create, generation_run_execute
from annotation.curation.services.claims import work_item_claim_next
from annotation.curation.services.pools import pool_freeze
from annotation.curation.services.votes import vote_cast
from annotation.models import DescriptionDissent, Query, Relation, WorkItem
from tests.annotation.conftest import panel_votes
from tests.browser.conftest import nav, open_item
from trajectories.models import SplitGroup

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def dev_row_in_adjudication(people, scene_video, review_run):
    """A dev pool of the three rendered people; the first description approved over a dissenting
    correction, the others plainly; one query's row reviewed twice with a candidate left ⊥."""
    SplitGroup.objects.filter(pk=scene_video.split_group_id).update(split="dev")
    run = review_run()
    panel = [people["ann1"], people["ann2"], people["ann3"]]
    for item in WorkItem.objects.filter(video=run.video, stage__in=["usability", "identity"]).order_by("id"):
        panel_votes(item, panel, ["usable"] * 3 if item.stage == "usability" else ["different"] * 3)
    pool = pool_freeze(run=run, frozen_by=people["boss"])
    description_run_execute(run=description_run_create(pools=[pool], created_by=people["boss"], queue=False))
    items = list(WorkItem.objects.filter(stage="description", state="open").order_by("id"))
    first = items[0]
    corrected = {**first.description.content, "appearance": "a person in a dark top, partly hidden"}
    for user, label in zip(panel, ["usable", "usable_after_minor_correction", "usable"]):
        seat = work_item_claim_next(annotator=user, stage="description")
        assert seat.item_id == first.pk
        vote_cast(item_id=first.pk, annotator=user, label=label,
                  correction=corrected if label != "usable" else None, reasons=["a fact is wrong"] if label != "usable" else [])
    for item in items[1:]:
        panel_votes(item, panel, ["usable"] * 3)
    assert DescriptionDissent.objects.count() == 1
    generation_run_execute(run=generation_run_create(pools=[pool], created_by=people["boss"], queue=False))
    row = WorkItem.objects.filter(stage="relation", state="open").select_related("query").order_by("id").first()
    members = sorted(pool.members.values_list("trajectory_id", flat=True))
    other = next(t for t in members if t != row.query.target_id)
    seat = work_item_claim_next(annotator=people["ann1"], stage="relation")
    vote_cast(item_id=seat.item_id, annotator=people["ann1"], label="reviewed",
              judgments={t: (1 if t == row.query.target_id else -1 if t == other else 0) for t in members},
              payload={"faithful": True, "natural": 5})
    row.refresh_from_db()
    assert other in row.disputed
    seat = work_item_claim_next(annotator=people["ann2"], stage="relation")
    assert seat.item_id == row.pk
    vote_cast(item_id=row.pk, annotator=people["ann2"], label="reviewed",
              judgments={int(t): (-1 if int(t) == other else 0 if int(t) != row.query.target_id else 1)
                         for t in row.disputed})
    row.refresh_from_db()
    assert row.state == "adjudicate"
    return row, other


def test_an_adjudicator_labels_the_candidates_a_dev_row_left_bottom(open_page, people, dev_row_in_adjudication, shot):
    row, other = dev_row_in_adjudication
    page = open_page("adj")
    nav(page, "Adjudication queue")
    page.goto(f"/adjudication/{row.pk}")
    assert open_item(page, "adjudication") == row.pk
    bottom = page.get_by_role("group", name="Candidates both reviews left ⊥: label each (the query is admitted or "
                                            "rejected after this)")
    expect(bottom).to_contain_text(f"Trajectory #{other}")
    expect(bottom).to_contain_text("ann1 ⊥, ann2 ⊥")                     # both reviews of that candidate
    dissent = page.get_by_role("region", name="Recorded dissent")
    expect(dissent).to_contain_text("lost to the approvals of version")
    expect(dissent).to_contain_text("a person in a dark top, partly hidden")
    submit = page.get_by_role("button", name="Decide")
    page.keyboard.press("1")                                             # the row's one label: reviewed
    page.keyboard.type("The person stays in view; the coat is plainly another colour.")
    expect(submit).to_be_disabled()                                      # the ⊥ candidate has no label yet
    page.evaluate("document.activeElement.blur()")                    # out of the reason: keys label again
    page.keyboard.press("x")                                             # 0: a mismatch
    expect(bottom.get_by_role("button", name="0", exact=True)).to_have_attribute("aria-pressed", "true")
    expect(submit).to_be_enabled()
    shot(page, "20-adjudication-relation-row")
    page.keyboard.press("Control+Enter")
    expect(page.get_by_text("Nothing to adjudicate")).to_be_visible()
    row.refresh_from_db()
    assert (row.state, row.decision) == ("decided", "reviewed")
    relation = Relation.objects.get(query=row.query, trajectory_id=other)
    assert (relation.label, relation.source) == (0, "adjudicated")
    assert Query.objects.get(pk=row.query_id).status == Query.Status.ACCEPTED
