"""The annotator, adjudicator and manager paths through the web UI in real Chromium, against a
live server on PostgreSQL: keyboard voting to a decision, adjudication of a tie, duplicate
review of a pair (and its zoom pane of a track not seen on the frame), freezing a pool and reading
the agreement chart, and live job progress."""
from __future__ import annotations

import re

import numpy as np
import pytest
from playwright.sync_api import expect

from annotation.models import CandidatePool, Vote, WorkItem
from common.jobs.services import job_create, job_progress, job_start
from tests.annotation.conftest import panel_votes
from tests.browser.conftest import nav, open_item, wait_first_frame

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def usability_items(run):
    return list(WorkItem.objects.filter(stage="usability", trajectory__run=run).order_by("video_id", "id"))


def test_three_annotators_vote_a_trajectory_to_a_decision(open_page, people, review_run, shot):
    run = review_run()  # three whole tracks: three usability items
    first = usability_items(run)[0]
    plan = {"ann1": "1", "ann2": "1", "ann3": "2"}  # usable, usable, unusable
    for name, key in plan.items():
        page = open_page(name)
        # Given their queue on the home screen
        card = page.locator(".queue-card", has_text="Usability review")
        expect(card.locator(".count")).to_have_text("3")
        card.get_by_role("link", name="Start").click()
        item = open_item(page, "review/usability")
        assert item == first.pk, "claims go in video order: everybody gets the same first item"
        wait_first_frame(page, item)
        # Blinding: nothing of the other people's votes is on the page.
        body = page.inner_text("body")
        assert not [other for other in plan if other != name and other in body]
        if name == "ann1":
            page.keyboard.press("?")
            dialog = page.get_by_role("dialog", name="Keyboard shortcuts")
            expect(dialog).to_be_visible()
            expect(dialog).to_contain_text("Vote the first label: Usable")
            expect(dialog).to_contain_text("Replay from the start")
            shot(page, "01-usability-help-overlay")
            page.keyboard.press("Escape")
            expect(dialog).to_be_hidden()
            # Frame stepping and replay from the keyboard.
            frame0 = int(page.locator("canvas.main-view").get_attribute("data-frame"))
            page.keyboard.press("ArrowRight")
            page.keyboard.press("ArrowRight")
            expect(page.locator("canvas.main-view")).to_have_attribute("data-frame", str(frame0 + 2))
            page.keyboard.press("r")
            expect(page.get_by_role("button", name="Pause", exact=True)).to_be_visible()
            page.keyboard.press("Space")
            expect(page.get_by_role("button", name="Play", exact=True)).to_be_visible()
            shot(page, "02-usability-item")
        if name == "ann3":
            # Shortcuts are off while typing: the "1" typed here must not vote.
            other = page.get_by_label("Other reason")
            other.fill("")
            other.press_sequentially("loses him for 1 s")
            assert Vote.objects.filter(item=first, annotator=people["ann3"]).count() == 0
            page.locator("main h1").focus()
            page.keyboard.press("Shift+2")  # reason 2: box drifts off the object
            expect(page.get_by_label("box drifts off the object")).to_be_checked()
        # When they press the label's key
        page.keyboard.press(key)
        # Then the next item opens, and P goes back to their own vote
        open_item(page, "review/usability", after=item)
        page.keyboard.press("p")
        page.wait_for_url(f"**/review/usability/{first.pk}")
        expect(page.locator(".my-vote")).to_contain_text("You voted")
        wait_first_frame(page, first.pk)  # a voted item plays like any other
        if name == "ann3":
            shot(page, "03-usability-own-vote")

    first.refresh_from_db()
    assert (first.state, first.decision) == ("decided", "usable")
    votes = {v.annotator.username: v for v in Vote.objects.filter(item=first).select_related("annotator")}
    assert {k: v.label for k, v in votes.items()} == {"ann1": "usable", "ann2": "usable", "ann3": "unusable"}
    assert votes["ann3"].reasons == ["box drifts off the object", "loses him for 1 s"]
    assert all(v.time_spent_ms and v.time_spent_ms > 0 for v in votes.values())


def test_an_adjudicator_resolves_a_tie(open_page, people, review_run, shot):
    run = review_run()
    item = panel_votes(usability_items(run)[0], [people["ann1"], people["ann2"], people["ann3"]],
                       ["usable", "unusable", "uncertain"])
    assert item.state == "adjudicate"
    page = open_page("adj")
    card = page.locator(".queue-card", has_text="Adjudication · Usability review").locator(".count")
    expect(card).to_have_text("1")
    expect(card).to_have_attribute("aria-label", "1 item available")  # one, never "1 items" (issue 27, finding 15)
    nav(page, "Adjudication queue")
    expect(page.locator("table caption")).to_have_text("1 item waits for a decision (press N to open the first)")
    row = page.get_by_role("row", name=f"{item.pk}")
    expect(row).to_contain_text("1× usable, 1× unusable, 1× uncertain")
    page.keyboard.press("n")
    assert open_item(page, "adjudication") == item.pk
    wait_first_frame(page, item.pk)
    # Every vote is visible to the adjudicator, with who cast it.
    votes = page.get_by_role("table", name=f"All votes on item {item.pk}")
    for name in ("ann1", "ann2", "ann3"):
        expect(votes).to_contain_text(name)
    page.keyboard.press("1")
    expect(page.get_by_role("radio", name="1 usable")).to_have_attribute("aria-checked", "true")
    assert page.evaluate("document.activeElement.tagName") == "TEXTAREA", "choosing a label moves to the reason"
    page.keyboard.type("The box stays on the walker in all 3 views; the 2 gaps are short.")
    expect(page.get_by_role("radio", name="1 usable")).to_have_attribute("aria-checked", "true")  # typed digits did not vote
    shot(page, "04-adjudication")
    page.keyboard.press("Control+Enter")
    expect(page.get_by_text("Nothing to adjudicate")).to_be_visible()
    item.refresh_from_db()
    assert (item.state, item.decision) == ("decided", "usable")
    decision = Vote.objects.get(item=item, is_adjudication=True)
    assert decision.annotator == people["adj"] and "2 gaps" in decision.comment


def test_duplicate_review_plays_both_trajectories_in_sync(open_page, people, review_run, shot):
    run = review_run(window=16, stride=8, drop_every=5)  # overlapping windows of one person: pairs
    pair = WorkItem.objects.filter(stage="identity", duplicate__trajectory_a__run=run).order_by("id").first()
    assert pair is not None, "the overlapping windows should have produced duplicate candidates"
    page = open_page("ann1")
    nav(page, "Duplicate review")
    assert open_item(page, "review/duplicates") == pair.pk
    wait_first_frame(page, pair.pk)
    expect(page.locator(".zoom-view canvas")).to_have_count(2)
    expect(page.locator(".timeline")).to_have_attribute("height", str(8 + 16 * 2))
    main = page.locator("canvas.main-view")
    start = int(main.get_attribute("data-frame"))
    for _ in range(3):
        page.keyboard.press("ArrowRight")
    expect(main).to_have_attribute("data-frame", str(start + 3))
    # Both zoomed views and the full frame describe the same frame: one playhead.
    for label in page.locator(".zoom-view canvas").all():
        assert f"frame {start + 3} of" in label.get_attribute("aria-label")
    shot(page, "05-duplicate-pair")
    page.keyboard.press("1")
    page.wait_for_function("path => location.pathname !== path", arg=f"/review/duplicates/{pair.pk}")
    assert Vote.objects.get(item=pair, annotator=people["ann1"]).label == "same"


def test_a_zoom_pane_whose_track_is_absent_says_so_and_draws_nothing_else(open_page, people, review_run):
    run = review_run(window=16, stride=8, drop_every=5)
    pair = (WorkItem.objects.filter(stage="identity", duplicate__trajectory_a__run=run).select_related(
        "duplicate__trajectory_a", "duplicate__trajectory_b").order_by("id").first())
    a, b = pair.duplicate.trajectory_a, pair.duplicate.trajectory_b
    seen_a, seen_b = (set(np.frombuffer(bytes(t.frames), dtype="<i4").tolist()) for t in (a, b))
    page = open_page("ann1")
    page.goto("/review/duplicates")
    assert open_item(page, "review/duplicates") == pair.pk
    wait_first_frame(page, pair.pk)
    main = page.locator("canvas.main-view")
    start = int(main.get_attribute("data-frame"))
    assert start in seen_a and start in seen_b  # it opens on a frame both tracks share
    # the nearest frame on which A is seen and B is not (B's gaps and the ends of its span)
    frame = min(sorted(seen_a - seen_b), key=lambda f: abs(f - start))
    for _ in range(abs(frame - start)):
        page.keyboard.press("ArrowRight" if frame > start else "ArrowLeft")
    expect(main).to_have_attribute("data-frame", str(frame))
    panes = page.locator(".zoom-view canvas")
    expect(panes.nth(1)).to_have_attribute("aria-label", re.compile("not seen on this frame"))
    expect(panes.nth(0)).to_have_attribute("aria-label", re.compile("zoomed in on its box"))
    page.wait_for_timeout(100)  # the frame is drawn on the next animation frame
    colours = page.evaluate("""() => [...document.querySelectorAll('.zoom-view canvas')].map(c => {
        const d = c.getContext('2d').getImageData(0, 40, c.width, c.height - 40).data;  // below the message
        const seen = new Set();
        for (let i = 0; i < d.length; i += 4) seen.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
        return [...seen];
    })""")
    assert colours[1] == [0x111418], [hex(c) for c in colours[1][:5]]  # B: the empty background only
    assert len(colours[0]) > 50  # A: its picture


def test_a_manager_freezes_a_pool_and_reads_the_agreement(open_page, people, review_run, shot):
    run = review_run()
    items = usability_items(run)
    panel = [people["ann1"], people["ann2"], people["ann3"]]
    for item in items[:-1]:
        panel_votes(item, panel, ["usable", "usable", "unusable"])
    page = open_page("boss")
    nav(page, "Progress")
    expect(page.get_by_role("row", name="Usability review")).to_contain_text("2 of 3 done")
    shot(page, "06-manager-progress")

    # The runs table says where review stands (issue 27, finding 14), and a freeze before review
    # is finished is refused, and the screen says why.
    nav(page, "Runs")
    readiness = page.locator("table.runs tbody tr").first.locator(".readiness")
    expect(readiness).to_have_text("2 of 3 decided · 1 open")
    page.get_by_role("button", name=f"Freeze pool of run {run.pk}").click()
    refusal = page.get_by_role("alert").filter(has_text=f"Run {run.pk} was not frozen")
    expect(refusal).to_contain_text("review of run")
    expect(refusal).to_contain_text("review_unfinished")
    expect(refusal).to_contain_text("usability")
    assert not CandidatePool.objects.exists()

    panel_votes(items[-1], panel, ["usable", "unusable", "usable"])
    page.keyboard.press("Shift+R")  # refresh now
    expect(readiness).to_have_text("ready to freeze · 3 of 3 decided")
    page.get_by_role("button", name=f"Freeze pool of run {run.pk}").click()
    expect(page.get_by_role("status").filter(has_text="Frozen: pool v1")).to_be_visible()
    pool = CandidatePool.objects.get(run=run)
    assert pool.frozen_at is not None and pool.n_members == 3
    expect(page.get_by_text("pool v1 frozen · 3 members")).to_be_visible()
    expect(readiness).to_have_text("pool frozen · 3 of 3 decided")
    shot(page, "07-manager-runs-frozen")

    page.set_viewport_size({"width": 1280, "height": 800})
    nav(page, "Agreement")
    chart = page.locator("figure.chart", has_text="Three-vote patterns")
    expect(chart.locator('g[data-bar="2-1"]')).to_have_attribute("data-value", "3")
    expect(chart.locator('g[data-bar="3-0"]')).to_have_attribute("data-value", "0")
    expect(page.locator("figure.chart", has_text="Agreement with the majority")).to_contain_text("ann1")
    # every value is drawn inside its figure at 1280 px, none cut off (issue 27, finding 15)
    cut = page.evaluate("""() => [...document.querySelectorAll("figure.chart")].flatMap((figure) => {
        const edge = figure.getBoundingClientRect().right - parseFloat(getComputedStyle(figure).paddingRight);
        return [...figure.querySelectorAll("text")].filter((t) => t.getBoundingClientRect().right > edge + 0.5)
          .map((t) => `${figure.querySelector("figcaption").textContent}: ${t.textContent}`);
    })""")
    assert cut == [], cut
    shot(page, "08-manager-agreement")

    nav(page, "Pools")
    expect(page.get_by_role("row", name=f"{pool.pk}")).to_contain_text(pool.content_sha256[:12])

    # Any role can browse the videos and play a trajectory.
    nav(page, "Videos")
    page.get_by_role("link", name="ui_walk").click()
    trajectory = items[0].trajectory_id
    page.get_by_role("link", name=f"#{trajectory}", exact=True).click()
    page.wait_for_url(f"**/videos/{run.video_id}/{trajectory}")
    expect(page.get_by_role("list", name=f"Crops of #{trajectory}").get_by_role("listitem")).to_have_count(12)
    expect(page.locator("canvas.main-view")).to_have_attribute("data-frame", "0")


def test_jobs_show_live_progress_and_logs(open_page, people, shot):
    job = job_start(job=job_create(kind="proposal_run", params={"run": 1}, created_by=people["boss"]))
    job_progress(job=job, fraction=0.25, message="frame 30 of 120", log="tracking 120 frames")
    page = open_page("boss")
    nav(page, "Jobs")
    bar = page.get_by_role("progressbar", name=f"Job {job.pk} progress")
    expect(bar).to_have_attribute("aria-valuenow", "25")
    job_progress(job=job, fraction=0.75, message="frame 90 of 120", log="anchors merged")
    expect(bar).to_have_attribute("aria-valuenow", "75", timeout=10_000)  # polled, no reload
    page.get_by_text("Log").click()
    expect(page.locator("pre.log")).to_contain_text("anchors merged")
    shot(page, "09-manager-jobs")
