"""The relation stages in the web UI, in real Chromium against a live server on PostgreSQL:
description review with an inline minor correction made from the keyboard alone, and a query's
relation row labelled candidate by candidate with its ratings, then its independent second review
that shows only the disputed candidates.

The records come from the services on a rendered street scene (three walking people): usability
panels through ``panel_votes``, a frozen pool, the heuristic describer, approved descriptions and
the template query writer."""
from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotation.benchmark.services.descriptions import (
    description_run_create,
    description_run_execute,
)
from annotation.benchmark.services.queries import generation_run_create, generation_run_execute
from annotation.curation.services.pools import pool_freeze
from annotation.models import Description, DescriptionVersion, Query, Relation, Vote, WorkItem
from annotation.rules import relation_disputed
from tests.annotation.conftest import panel_votes
from tests.browser.conftest import nav, open_item, wait_first_frame

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

MINOR = "usable_after_minor_correction"


@pytest.fixture
def described_pool(people, review_run):
    """A frozen pool of the three rendered people, each member described by the heuristic
    describer (one open description item per member)."""
    run = review_run()
    panel = [people["ann1"], people["ann2"], people["ann3"]]
    for item in WorkItem.objects.filter(video=run.video, stage__in=["usability", "identity"]).order_by("id"):
        panel_votes(item, panel, ["usable"] * 3 if item.stage == "usability" else ["different"] * 3)
    pool = pool_freeze(run=run, frozen_by=people["boss"])
    assert pool.n_members == 3
    description_run_execute(run=description_run_create(pools=[pool], created_by=people["boss"], queue=False))
    return pool


@pytest.fixture
def relation_rows(people, described_pool):
    """The described pool with every description approved and the template writer's queries:
    one open relation row per query, against all three members."""
    panel = [people["ann1"], people["ann2"], people["ann3"]]
    for item in WorkItem.objects.filter(stage="description", state="open").order_by("id"):
        panel_votes(item, panel, ["usable"] * 3)
    assert Description.objects.filter(pool=described_pool, status="approved").count() == 3
    generation_run_execute(run=generation_run_create(pools=[described_pool], created_by=people["boss"], queue=False))
    rows = WorkItem.objects.filter(stage="relation", state="open").order_by("video_id", "id")
    assert rows.exists(), "the template writer should have written queries from the approved facts"
    return described_pool


def test_an_annotator_corrects_a_description_from_the_keyboard(open_page, people, described_pool, shot):
    page = open_page("ann1")
    # Given the description queue on the home screen, opened with the keyboard only
    card = page.locator(".queue-card", has_text="Description review")
    expect(card.locator(".count")).to_have_text("3")
    card.get_by_role("link", name="Start").focus()
    page.keyboard.press("Enter")
    item_id = open_item(page, "review/descriptions")
    wait_first_frame(page, item_id)
    item = WorkItem.objects.select_related("description").get(pk=item_id)
    facts = item.description.content["facts"]
    known = [i for i, f in enumerate(facts) if f["known"]]
    assert len(known) >= 2, f"the describer should know at least two facts: {facts}"
    first, second = facts[known[0]], facts[known[1]]
    table = page.get_by_role("table").filter(has_text="Version 1")
    expect(table.get_by_role("row")).to_have_count(1 + 2 + len(facts))  # header, two sentences, the facts

    # The help overlay lists the correction keys.
    page.keyboard.press("?")
    dialog = page.get_by_role("dialog", name="Keyboard shortcuts")
    expect(dialog).to_contain_text("Edit the selected row")
    expect(dialog).to_contain_text("Vote the second label: Usable after minor correction")
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()

    # Select the first known fact (row 0 and 1 are the sentences; the first fact is selected),
    # and let its evidence link move the playhead.
    for _ in range(known[0]):
        page.keyboard.press("ArrowDown")
    expect(table.locator("tr.selected")).to_contain_text(first["id"])
    evidence = sorted(set(first["evidence_frames"]))
    assert len(evidence) >= 3, f"the describer names several evidence frames: {first}"
    main = page.locator("canvas.main-view")
    page.keyboard.press("f")  # F walks through the selected fact's evidence frames
    expect(main).to_have_attribute("data-frame", str(evidence[0]))
    page.keyboard.press("f")
    expect(main).to_have_attribute("data-frame", str(evidence[1]))
    # and so does a click on an evidence link
    table.get_by_role("button", name=f"Go to frame {evidence[-1]}, evidence of {first['name']} ({first['id']})").click()
    expect(main).to_have_attribute("data-frame", str(evidence[-1]))

    # When they correct its value inline: E edits, Enter keeps the edit
    page.keyboard.press("e")
    value = page.get_by_label(f"Corrected value of {first['name']} ({first['id']})")
    expect(value).to_be_focused()
    page.keyboard.press("Control+A")
    page.keyboard.type("orange 2")  # a digit typed in the field does not vote
    page.keyboard.press("Enter")
    expect(value).to_be_hidden()
    assert not Vote.objects.filter(item=item).exists()
    # and mark the next known fact unknown
    for _ in range(known[1] - known[0]):
        page.keyboard.press("ArrowDown")
    expect(table.locator("tr.selected")).to_contain_text(second["id"])
    page.keyboard.press("u")
    edits = page.get_by_role("region", name="Your correction")
    expect(edits).to_contain_text(f"“{first['value']}” → “orange 2”")
    expect(edits).to_contain_text(f"“{second['value']}” → unknown")
    expect(page.locator("button.vote", has_text="Usable after minor correction")).to_contain_text("2 edits")
    # Voting usable with edits pending is refused with a hint, nothing is stored.
    page.keyboard.press("1")
    expect(page.get_by_role("status").filter(has_text="press 2")).to_be_visible()
    assert not Vote.objects.filter(item=item).exists()
    shot(page, "10-description-correction")

    # Then 2 sends the corrected version, and the next description opens
    page.keyboard.press("2")
    open_item(page, "review/descriptions", after=item_id)
    vote = Vote.objects.select_related("correction").get(item=item, annotator=people["ann1"])
    assert vote.label == MINOR
    corrected = {f["id"]: f for f in vote.correction.content["facts"]}
    assert corrected[first["id"]]["value"] == "orange 2" and corrected[first["id"]]["known"] is True
    assert corrected[second["id"]]["known"] is False and corrected[second["id"]]["value"] == ""
    assert vote.correction.origin == DescriptionVersion.Origin.CORRECTION
    assert vote.correction.created_by == people["ann1"]
    assert vote.correction.content["appearance"] == item.description.content["appearance"]
    untouched = [f for f in facts if f["id"] not in (first["id"], second["id"])]
    assert all(corrected[f["id"]] == f for f in untouched)
    assert vote.time_spent_ms and vote.time_spent_ms > 0

    # P goes back: their own vote, with the corrected version, and no controls.
    page.keyboard.press("p")
    page.wait_for_url(f"**/review/descriptions/{item_id}")
    expect(page.locator(".my-vote")).to_contain_text("usable after minor correction")
    expect(page.locator(".my-vote")).to_contain_text(f"version id {vote.correction_id}")

    # A description without a panel majority goes to an adjudicator, who sees it read only with
    # every vote and decides usable, unusable or uncertain (corrections come from the panel).
    last = WorkItem.objects.filter(stage="description").order_by("-id").first()
    panel_votes(last, [people["ann1"], people["ann2"], people["ann3"]], ["usable", "unusable", "uncertain"])
    assert last.state == "adjudicate"
    adj = open_page("adj")
    nav(adj, "Adjudication queue")
    expect(adj.get_by_role("row", name=f"{last.pk} Description review")).to_contain_text("1× unusable")
    adj.keyboard.press("n")
    assert open_item(adj, "adjudication") == last.pk
    wait_first_frame(adj, last.pk)
    expect(adj.get_by_role("table").filter(has_text=f"of description {last.description.description_id}")).to_be_visible()
    expect(adj.get_by_role("radiogroup", name="Decision").get_by_role("radio")).to_have_count(3)
    expect(adj.get_by_role("radio", name="usable after minor correction")).to_have_count(0)
    adj.keyboard.press("1")
    adj.keyboard.type("Every fact shows on its evidence frames.")
    shot(adj, "19-adjudication-description")
    adj.keyboard.press("Control+Enter")
    expect(adj.get_by_text("Nothing to adjudicate")).to_be_visible()
    last.refresh_from_db()
    assert (last.state, last.decision) == ("decided", "usable")
    assert Description.objects.get(pk=last.description.description_id).status == "approved"


def test_a_relation_row_is_labelled_then_its_disputed_candidates_reviewed_again(open_page, people, relation_rows, shot):
    # Given a query's row against the three candidates of its pool
    page = open_page("ann1")
    page.locator(".queue-card", has_text="Relation verification").get_by_role("link", name="Start").click()
    item_id = open_item(page, "review/relations")
    wait_first_frame(page, item_id)
    item = WorkItem.objects.select_related("query").get(pk=item_id)
    members = sorted(relation_rows.members.values_list("trajectory_id", flat=True))
    cards = page.get_by_role("list", name="Candidates (3)").get_by_role("listitem")
    expect(cards).to_have_count(3)
    for tid in members:
        card = page.get_by_role("listitem", name=f"Candidate #{tid}")
        expect(card.get_by_role("img", name=f"Candidate #{tid} at frame")).to_be_visible()
        hint = item.prelabels[str(tid)]["label"]
        expect(card.locator(".hint")).to_contain_text({1: "1 (match)", 0: "0 (mismatch)", -1: "⊥ (unknown)"}[hint])
    expect(page.get_by_role("region", name="Query")).to_contain_text(item.query.text)
    expect(page.get_by_role("region", name="Query")).to_contain_text("First review: label every candidate")

    # When they label every candidate from the keyboard (the target 1, the others 0, and one ⊥)
    target = item.query.target_id
    others = [t for t in members if t != target]
    wanted = {target: 1, others[0]: 0, others[1]: -1}
    for tid in members:  # the cursor starts on the first and moves on by itself
        expect(page.get_by_role("listitem", name=f"Candidate #{tid}")).to_have_attribute("aria-current", "true")
        page.keyboard.press({1: "1", 0: "0", -1: "u"}[wanted[tid]])
    expect(page.get_by_label("Labels so far")).to_contain_text("0 without a label")
    send = page.get_by_role("button", name="Send the labels")
    expect(send).to_be_disabled()  # the ratings are still missing
    page.keyboard.press("Control+Enter")
    expect(page.get_by_role("status").filter(has_text="faithful")).to_be_visible()
    page.keyboard.press("f")
    page.keyboard.press("Shift+4")
    expect(page.get_by_role("radio", name="4 of 5")).to_have_attribute("aria-checked", "true")
    expect(page.get_by_role("radio", name="F yes")).to_have_attribute("aria-checked", "true")
    expect(send).to_be_enabled()
    shot(page, "11-relation-row-first-review")
    page.keyboard.press("Control+Enter")
    page.wait_for_function("path => location.pathname !== path", arg=f"/review/relations/{item_id}")

    # Then the row's labels and ratings are stored with the vote
    vote = Vote.objects.get(item=item, annotator=people["ann1"])
    assert vote.label == "reviewed"
    assert {j.trajectory_id: j.label for j in vote.judgments.all()} == wanted
    assert vote.payload == {"faithful": True, "natural": 4}
    item.refresh_from_db()
    expected = sorted(t for t in members if relation_disputed(wanted[t], item.prelabels[str(t)]["label"]))
    assert others[1] in expected
    assert (item.state, item.panel_size, sorted(item.disputed)) == ("open", 2, expected)

    # A second reviewer sees only the disputed candidates, no ratings and nothing of the first review
    page2 = open_page("ann2")
    page2.locator(".queue-card", has_text="Relation verification").get_by_role("link", name="Start").click()
    assert open_item(page2, "review/relations") == item_id
    wait_first_frame(page2, item_id)
    shown = page2.get_by_role("list", name=f"Candidates ({len(expected)})").get_by_role("listitem")
    expect(shown).to_have_count(len(expected))
    for tid in members:
        expect(page2.get_by_role("listitem", name=f"Candidate #{tid}")).to_have_count(1 if tid in expected else 0)
    expect(page2.get_by_role("region", name="Query")).to_contain_text("Second review")
    expect(page2.get_by_role("group", name="Faithful to its target")).to_have_count(0)
    expect(page2.locator("fieldset.ratings")).to_have_count(0)
    body = page2.inner_text("body")
    assert "ann1" not in body
    shot(page2, "12-relation-row-second-review")
    second = {tid: (1 if tid == target else 0) for tid in expected}
    for tid in expected:
        page2.keyboard.press("1" if second[tid] == 1 else "0")
    page2.keyboard.press("Control+Enter")
    page2.wait_for_function("path => location.pathname !== path", arg=f"/review/relations/{item_id}")

    item.refresh_from_db()
    assert (item.state, item.decision) == ("decided", "reviewed")
    review = Vote.objects.get(item=item, annotator=people["ann2"])
    assert {j.trajectory_id: j.label for j in review.judgments.all()} == second
    assert review.payload == {}
    relations = {r.trajectory_id: r.label for r in Relation.objects.filter(query=item.query)}
    assert relations[others[1]] == 0  # ⊥ first, a binary second review stands
    assert relations[target] == 1
    query = Query.objects.get(pk=item.query_id)
    assert query.ratings == {"faithful": True, "natural": 4}
