"""An annotator's and a manager's day in real Chromium: a lapsed lease
comes back to its holder and goes to another annotator; a manager reassigns a seat from the seat
board; a vote key pressed while the item loads does nothing; a vote is withdrawn with Ctrl+Z
within its undo window and is final after it; the query stays in view (in the side panel) while
the last candidate of a relation row is labelled at 1280x800; the next item's opening frame is
fetched while the current one is reviewed, and a failed fetch ahead costs nothing but the time."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.sessions.models import Session
from django.utils import timezone
from playwright.sync_api import expect

from accounts.services import user_create
from annotation.models import Assignment, SeatEvent, Vote, WorkItem
from tests.annotation.conftest import panel_votes
from tests.browser.conftest import PASSWORD, open_item, wait_first_frame
from tests.browser.test_relation_ui import described_pool, relation_rows  # noqa: F401 (fixtures, reused)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

UNDO_S = 4.0  # Review.tsx UNDO_MS


def first_usability_item(run) -> WorkItem:
    return WorkItem.objects.filter(stage="usability", trajectory__run=run).order_by("video_id", "id").first()


def lapse(item: WorkItem, user) -> None:
    Assignment.objects.filter(item=item, annotator=user).update(lease_expires_at=timezone.now() - timedelta(seconds=1))


def test_a_lapsed_lease_comes_back_to_its_holder_and_goes_to_another(open_page, people, review_run):
    run = review_run()
    item = first_usability_item(run)
    panel_votes(item, [people["ann1"], people["ann2"]], ["usable", "unusable"])  # a tie: the third vote decides
    # Given ann3 opened the item and left it until the lease ran out
    page = open_page("ann3")
    page.goto("/review/usability")
    assert open_item(page, "review/usability") == item.pk
    lapse(item, people["ann3"])
    # When ann3 asks for work again, the same item comes back to them
    page.goto("/review/usability")
    assert open_item(page, "review/usability") == item.pk
    wait_first_frame(page, item.pk)
    assert SeatEvent.objects.filter(item=item, holder=people["ann3"], kind="expired").count() == 1
    # And when it lapses again, another annotator gets it and decides it
    lapse(item, people["ann3"])
    user_create(username="ann4", password=PASSWORD, roles=["annotator"])
    other = open_page("ann4")
    other.goto("/review/usability")
    assert open_item(other, "review/usability") == item.pk
    wait_first_frame(other, item.pk)
    other.keyboard.press("1")
    other.keyboard.press("Enter")  # send now
    open_item(other, "review/usability", after=item.pk)
    item.refresh_from_db()
    assert (item.state, item.decision) == ("decided", "usable")
    assert not Assignment.objects.filter(item=item, annotator=people["ann3"]).exists()


def test_a_manager_reassigns_a_seat_from_the_seat_board(open_page, people, review_run, shot):
    run = review_run()
    item = first_usability_item(run)
    panel_votes(item, [people["ann1"], people["ann2"]], ["usable", "unusable"])
    now = timezone.now()
    Assignment.objects.create(item=item, annotator=people["ann3"], seat=2, claimed_at=now,
                              lease_expires_at=now + timedelta(minutes=10))
    user_create(username="ann4", password=PASSWORD, roles=["annotator"])
    boss = open_page("boss")
    boss.goto(f"/manage/seats?item={item.pk}")
    row = boss.get_by_role("row", name=f"Item {item.pk}")
    seat = row.get_by_role("listitem", name="Seat 3")
    expect(seat).to_contain_text("ann3")
    expect(row.get_by_role("listitem", name="Seat 1")).to_contain_text("voted")
    row.get_by_label("Reason (kept with the change)").fill("ann3 is away today")
    seat.get_by_label("Give seat 3 to").fill("ann4")
    seat.get_by_role("button", name="Reassign").click()
    expect(row.get_by_role("listitem", name="Seat 3")).to_contain_text("ann4")
    expect(row).to_contain_text("seat 3 of ann3 reassigned by boss to ann4 (ann3 is away today)")
    shot(boss, "40-seat-board-reassigned")
    event = SeatEvent.objects.get(item=item)
    assert (event.kind, event.holder, event.to, event.by, event.reason) == (
        "reassigned", people["ann3"], event.to, people["boss"], "ann3 is away today")
    # The new holder gets it as their current item
    page = open_page("ann4")
    page.goto("/review/usability")
    assert open_item(page, "review/usability") == item.pk


def test_keys_wait_for_the_first_frame_and_a_vote_can_be_undone_until_it_is_sent(open_page, people, review_run):
    run = review_run()
    items = list(WorkItem.objects.filter(stage="usability", trajectory__run=run).order_by("video_id", "id"))
    page = open_page("ann1")
    held = []
    page.route("**/api/videos/*/frames/*", lambda route: held.append(route))  # frames wait until let go
    page.goto("/review/usability")
    item = open_item(page, "review/usability")
    assert item == items[0].pk
    expect(page.get_by_text("voting opens when the first frame is on screen")).to_be_visible()
    # A vote key and a click while the item loads do nothing
    page.keyboard.press("2")
    expect(page.get_by_role("status").filter(has_text="first frame is still loading")).to_be_visible()
    expect(page.get_by_role("button", name="2 Unusable")).to_be_disabled()
    page.wait_for_timeout(UNDO_S * 1000 + 800)
    assert not Vote.objects.exists()
    expect(page.locator(".undo-bar")).to_have_count(0)
    # Once the frame is drawn, a vote waits in its undo window and Ctrl+Z withdraws it
    for route in list(held):
        route.continue_()
    page.unroute("**/api/videos/*/frames/*")  # a frame asked for meanwhile is let go with the route
    wait_first_frame(page, item)
    # (the whole frame zooms with the mouse wheel, and a double-click shows all of it again)
    view = page.locator("canvas.main-view")
    view.hover()
    page.mouse.wheel(0, -240)
    expect(view).not_to_have_attribute("data-zoom", "1.00")
    view.dblclick()
    expect(view).to_have_attribute("data-zoom", "1.00")
    page.keyboard.press("2")
    bar = page.locator(".undo-bar")
    expect(bar).to_contain_text("Sending unusable in")
    page.keyboard.press("Control+z")
    expect(bar).to_have_count(0)
    expect(page.get_by_role("status").filter(has_text="withdrawn")).to_be_visible()
    page.wait_for_timeout(UNDO_S * 1000 + 800)
    assert not Vote.objects.exists()
    assert page.url.rstrip("/").endswith(f"/{item}")
    # A vote left to its countdown is sent, and Ctrl+Z after that changes nothing
    page.keyboard.press("1")
    nxt = open_item(page, "review/usability", after=item)
    page.keyboard.press("Control+z")
    page.wait_for_timeout(500)
    vote = Vote.objects.get(item_id=item, annotator=people["ann1"])
    assert vote.label == "usable"
    assert nxt == items[1].pk
    assert Vote.objects.filter(annotator=people["ann1"]).count() == 1


def test_the_query_stays_in_view_while_the_last_candidate_is_labelled(open_page, people, relation_rows, shot):  # noqa: F811
    page = open_page("ann1")
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto("/review/relations")
    item_id = open_item(page, "review/relations")
    wait_first_frame(page, item_id)
    members = sorted(relation_rows.members.values_list("trajectory_id", flat=True))
    for _ in members[:-1]:
        page.keyboard.press("0")
    last = page.get_by_role("listitem", name=f"Candidate #{members[-1]}")
    expect(last).to_have_attribute("aria-current", "true")
    last.scroll_into_view_if_needed()
    page.keyboard.press("1")
    query = page.get_by_role("complementary", name="Your labels").get_by_label("The query")  # in the sticky side panel
    box, card = query.bounding_box(), last.bounding_box()
    assert box is not None and card is not None
    assert 0 <= box["y"] and box["y"] + box["height"] <= 800, box  # the query's text is on screen
    assert card["y"] < 800 and card["y"] + card["height"] > 0, card  # and so is the candidate
    assert page.evaluate("window.scrollY") > 0, "the page had to scroll for the last candidate"
    shot(page, "41-relation-query-pinned-1280")


def test_an_ended_session_says_the_vote_was_not_saved_and_comes_back_to_the_item(open_page, people, review_run):
    run = review_run()
    page = open_page("ann1")
    page.goto("/review/usability")
    item = open_item(page, "review/usability")
    wait_first_frame(page, item)
    Session.objects.all().delete()  # the session ends while the item is open
    page.keyboard.press("1")
    page.keyboard.press("Enter")
    alert = page.get_by_role("alert").filter(has_text="Your vote was not saved — sign in again")
    expect(alert).to_be_visible()
    assert page.url.rstrip("/").endswith(f"/review/usability/{item}")  # still on the item, not sent away
    assert not Vote.objects.exists()
    again = alert.get_by_role("link", name="Sign in again")
    expect(again).to_have_attribute("href", f"/accounts/login/?next=%2Freview%2Fusability%2F{item}")
    again.click()
    page.get_by_label("Username").fill("ann1")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"**/review/usability/{item}")
    wait_first_frame(page, item)
    page.keyboard.press("1")
    page.keyboard.press("Enter")
    open_item(page, "review/usability", after=item)
    assert Vote.objects.get(annotator=people["ann1"]).item_id == item
    assert first_usability_item(run).pk == item


def _opening_frame_head(item_id: int) -> str:
    trajectory = WorkItem.objects.select_related("trajectory").get(pk=item_id).trajectory
    return f"/api/videos/{trajectory.video_id}/frames/{trajectory.first_frame}.jpg"


def _trajectory_head(item_id: int) -> str:
    return f"/api/trajectories/{WorkItem.objects.get(pk=item_id).trajectory_id}/"


def _requests_of(page, head: str) -> list[dict]:
    return page.evaluate("""head => performance.getEntriesByType('resource')
        .filter(e => new URL(e.name).pathname === head).map(e => ({start: e.startTime}))""", head)


def test_the_next_items_opening_frame_is_fetched_while_the_current_one_is_reviewed(open_page, people, review_run):
    review_run(window=8, stride=3, drop_every=7)
    page = open_page("ann1")
    page.evaluate("performance.setResourceTimingBufferSize(10000)")
    page.goto("/review/usability")
    item = open_item(page, "review/usability")
    wait_first_frame(page, item)
    for _ in range(4):
        following = (WorkItem.objects.filter(stage="usability", state="open", id__gt=item)  # the next in queue
                     .order_by("video_id", "id").first())                                # order: the claim's hint
        head, track = _opening_frame_head(following.pk), _trajectory_head(following.pk)
        # fetched ahead, before any vote: its trajectory (only the fetch ahead asks for another
        # item's) and its opening frame (which the current item's player may want as well)
        page.wait_for_function("heads => heads.every(head => performance.getEntriesByType('resource')"
                               ".some(e => new URL(e.name).pathname === head))", arg=[head, track])
        assert not Vote.objects.filter(item_id=item).exists()
        page.keyboard.press("1")
        page.keyboard.press("Enter")
        opened = open_item(page, "review/usability", after=item)
        assert opened == following.pk
        wait_first_frame(page, opened)
        sent = page.evaluate("name => performance.getEntriesByName(name, 'mark').at(-1).startTime", f"vote-sent:{item}")
        assert any(r["start"] < sent for r in _requests_of(page, head)), "the opening frame was not fetched ahead"
        assert all(r["start"] < sent for r in _requests_of(page, track)), "the trajectory was fetched again"
        item = opened


def test_a_failed_fetch_ahead_leaves_the_next_item_to_load_as_usual(open_page, people, review_run):
    review_run(window=8, stride=3, drop_every=7)
    page = open_page("ann1")
    page.goto("/review/usability")
    item = open_item(page, "review/usability")
    following = WorkItem.objects.filter(stage="usability", id__gt=item).order_by("video_id", "id").first()
    track = _trajectory_head(following.pk)  # only the fetch ahead asks for it before the item opens
    failed = []
    page.route(f"**{track}", lambda route: (failed.append(route.request.url), route.abort())
               if not failed else route.continue_())  # the fetch ahead fails, the item's own load does not
    wait_first_frame(page, item)
    for _ in range(200):  # the fetch ahead starts once the first frame is on screen
        if failed:
            break
        page.wait_for_timeout(25)
    page.keyboard.press("1")
    page.keyboard.press("Enter")
    assert open_item(page, "review/usability", after=item) == following.pk
    wait_first_frame(page, following.pk)
    assert len(failed) == 1
