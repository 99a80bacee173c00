"""Simulated annotators: the truth of review items on a rendered scene, and a crowd that votes
through the review services until every item is decided or unresolved."""
from __future__ import annotations

import io
from collections import Counter

import numpy as np
import pytest
from django.core.management import call_command

from annotation.curation.services.items import work_items_create_for_run
from annotation.demo.simulation import (
    SceneTruth,
    simulate_annotators,
    video_ground_truth,
    work_item_truths,
)
from annotation.models import Assignment, Vote, WorkItem
from annotation.rules import decide
from common.errors import ApplicationError
from models.backends.tracking.base import TrackProposal
from models.world.renderer import render_scene
from models.world.scene import DistractorSpec, GroundTruth, PersonSpec, SceneSpec
from tests.trajectories.factories import run_factory, video_factory
from trajectories.models import DuplicateCandidate, Trajectory, Video
from trajectories.services.proposals import trajectories_store

pytestmark = pytest.mark.django_db

N_FRAMES = 30


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def shifted_up(boxes: np.ndarray) -> np.ndarray:
    """The same boxes moved up by 60% of their height: IoU 0.25 with the original."""
    h = boxes[:, 3] - boxes[:, 1]
    return boxes - np.stack([np.zeros_like(h), 0.6 * h, np.zeros_like(h), 0.6 * h], axis=1)


@pytest.fixture
def rendered_scene(media_root):
    """A rendered 30-frame scene (person 0 walks right, person 1 stands apart, a ball rolls), a
    video row carrying its ground truth, and a finished run of trajectories cut from the truth,
    with the person each one belongs to: ``(run, expected {trajectory id: person or None})``."""
    spec = SceneSpec(name="sim", width=320, height=180, fps=10, n_frames=N_FRAMES, seed=3, people=[
        PersonSpec("red", "blue", "right", start=(30, 165), height=80),
        PersonSpec("green", "grey", "none", start=(270, 150), height=70),
    ], distractors=[DistractorSpec("ball", "yellow", start=(40, 178), velocity=(40, 0), size=16)])
    gt = render_scene(spec, media_root / "rendered" / "sim.mp4")
    (media_root / "ground_truth").mkdir()
    gt.save(media_root / "ground_truth" / "sim.gt.json")
    video = video_factory(width=320, height=180, frame_count=N_FRAMES, fps=10,
                          metadata={"ground_truth": "ground_truth/sim.gt.json"})
    people = [p.boxes_array().astype(np.float64) for p in gt.people]
    assert all(np.isfinite(t).all() for t in people), "both people are on screen on every frame"
    ball = np.array(gt.distractor_boxes[0], dtype=np.float64)
    tracks: list[tuple[np.ndarray, np.ndarray, int | None]] = []  # frames, boxes, expected person
    for person, table in enumerate(people):
        for start in range(0, N_FRAMES, 10):                        # fragments: each belongs to its person
            frames = np.arange(start, start + 10)
            tracks.append((frames, table[frames], person))
    for start in range(0, N_FRAMES, 10):                            # misplaced boxes: nobody
        frames = np.arange(start, start + 10)
        tracks.append((frames, shifted_up(people[0][frames]), None))
    frames = np.arange(0, 20)
    tracks.append((frames, ball[frames], None))                     # the ball: nobody
    frames = np.arange(N_FRAMES)                                    # switches from person 0 to 1 at frame 12
    tracks.append((frames, np.where((frames < 12)[:, None], people[0][frames], people[1][frames]), 1))
    frames = np.arange(20)
    on_half = np.where((frames < 10)[:, None], people[0][frames], shifted_up(people[0][frames]))
    tracks.append((frames, on_half, 0))                             # exactly half of its observations
    on_less = np.where((frames < 9)[:, None], people[0][frames], shifted_up(people[0][frames]))
    tracks.append((frames, on_less, None))                          # 9 of 20: not enough
    run = run_factory(video=video)
    trajectories_store(run=run, proposals=[
        TrackProposal(track_id=i + 1, category="person", frames=f.astype(np.int64), boxes=b.astype(np.float32),
                      scores=np.full(len(f), 0.9)) for i, (f, b, _) in enumerate(tracks)])
    by_track = {t.track_id: t.pk for t in Trajectory.objects.filter(run=run)}
    expected = {by_track[i + 1]: person for i, (_, _, person) in enumerate(tracks)}
    # pairs to judge besides those the proposer found: consecutive fragments of one person (same),
    # the two people at the same time (different), a fragment and its misplaced copy (different)
    ids = [by_track[i + 1] for i in range(len(tracks))]
    wanted = [(ids[0], ids[1]), (ids[1], ids[2]), (ids[3], ids[4]), (ids[4], ids[5])]
    wanted += [(ids[k], ids[k + 3]) for k in range(3)] + [(ids[0], ids[6]), (ids[1], ids[7]), (ids[6], ids[9])]
    for a, b in wanted:
        DuplicateCandidate.objects.get_or_create(video=video, trajectory_a_id=min(a, b), trajectory_b_id=max(a, b),
                                                 defaults={"reasons": ["manual"], "origin": "manual"})
    run.refresh_from_db()
    work_items_create_for_run(run=run)
    return run, expected


def expected_truth(item: WorkItem, expected: dict[int, int | None]) -> str:
    if item.stage == "usability":
        return "usable" if expected[item.trajectory_id] is not None else "unusable"
    a, b = expected[item.duplicate.trajectory_a_id], expected[item.duplicate.trajectory_b_id]
    return "same" if a is not None and a == b else "different"


def assert_consistent(result: dict) -> None:
    """Every item's state follows its votes; panels are never overfilled; the counts add up."""
    items = list(WorkItem.objects.prefetch_related("votes"))
    for item in items:
        votes = sorted(item.votes.all(), key=lambda v: (v.created_at, v.pk))
        panel = [v for v in votes if not v.is_adjudication]
        adjudications = [v for v in votes if v.is_adjudication]
        assert len(panel) <= item.panel_size and len(adjudications) <= 1, item
        assert len(votes) <= item.panel_size + len(adjudications), item
        assert [v.is_adjudication for v in votes] == sorted(v.is_adjudication for v in votes), "panel votes first"
        outcome = decide([v.label for v in votes], item.decisive, required=item.required_votes, panel=item.panel_size)
        state = {"pending": "open", "adjudicate": "adjudicate", "unresolved": "unresolved"}.get(outcome, "decided")
        assert (item.state, item.decision) == (state, outcome if state == "decided" else ""), item
        assert all(v.client_request_id is not None for v in panel)
        assert all(v.comment for v in adjudications)
    states = Counter(i.state for i in items)
    assert result["votes"] == Vote.objects.filter(is_adjudication=False).count()
    assert result["adjudications"] == Vote.objects.filter(is_adjudication=True).count()
    assert (result["decided"], result["unresolved"], result["open"], result["adjudicate"]) == (
        states["decided"], states["unresolved"], states["open"], states["adjudicate"])
    assert sum(states.values()) == result["items"]
    assert not Assignment.objects.filter(completed_at__isnull=True).exists(), "no seat left claimed"


def test_trajectories_map_to_the_person_they_follow(rendered_scene):
    run, expected = rendered_scene
    video = run.video
    scene = SceneTruth.of(video_ground_truth(video))
    got = {t.pk: scene.person_of(t.frames_array(), t.boxes_array()) for t in Trajectory.objects.filter(run=run)}
    assert got == expected
    assert Counter(expected.values()) == {0: 4, 1: 4, None: 5}
    # observations on frames the person is not on are misses, not errors
    assert scene.person_of(np.array([N_FRAMES + 5]), np.array([[0, 0, 10, 10]])) is None
    assert scene.person_of(np.zeros(0, int), np.zeros((0, 4))) is None
    # items get their truth from the trajectories' people
    items = list(WorkItem.objects.select_related("duplicate"))
    truths = work_item_truths(items)
    assert truths == {i.pk: expected_truth(i, expected) for i in items}
    counts = Counter(truths.values())
    assert (counts["usable"], counts["unusable"]) == (8, 5)
    assert counts["same"] >= 4 and counts["different"] >= 6


def test_a_video_without_readable_ground_truth_is_refused_or_has_none(rendered_scene, media_root):
    run, _ = rendered_scene
    assert video_ground_truth(video_factory()) is None
    video = run.video
    video.metadata = {"ground_truth": "../outside.gt.json"}
    with pytest.raises(ApplicationError) as exc:
        video_ground_truth(video)
    assert exc.value.code == "ground_truth_unreadable"
    (media_root / "broken.gt.json").write_text("{}")
    video.metadata = {"ground_truth": "broken.gt.json"}
    with pytest.raises(ApplicationError):
        video_ground_truth(video)
    assert isinstance(video_ground_truth(Video.objects.get(pk=video.pk)), GroundTruth)  # the row is unchanged


def test_perfect_annotators_decide_every_item_with_its_truth(rendered_scene):
    _, expected = rendered_scene
    result = simulate_annotators(n_annotators=3, accuracy=1.0, seed=1)
    items = list(WorkItem.objects.select_related("duplicate"))
    assert result["items"] == len(items) and len(items) > 40
    assert result["votes"] == 3 * len(items)
    assert result["adjudications"] == 0 and not Vote.objects.filter(is_adjudication=True).exists()
    for item in items:
        assert item.state == "decided" and item.decision == expected_truth(item, expected), item
    assert result["accuracy"] == 1.0 and result["vote_accuracy"] == 1.0
    assert (result["skipped"], result["blocked"]) == (0, 0)
    assert_consistent(result)


def test_mediocre_annotators_need_adjudication_and_adjudicators_resolve_it(rendered_scene):
    result = simulate_annotators(n_annotators=4, accuracy=0.6, adjudicators=2, seed=5)
    assert result["adjudications"] > 0
    assert result["adjudicate"] == result["open"] == 0
    assert result["decided"] + result["unresolved"] == result["items"]
    assert 0.4 < result["vote_accuracy"] < 0.8
    adjudicated = WorkItem.objects.filter(votes__is_adjudication=True).distinct().count()
    assert adjudicated == result["adjudications"]
    # adjudicators are never on a panel; panels hold distinct annotators
    for item in WorkItem.objects.prefetch_related("votes__annotator"):
        panel = [v.annotator.username for v in item.votes.all() if not v.is_adjudication]
        judges = [v.annotator.username for v in item.votes.all() if v.is_adjudication]
        assert len(set(panel)) == len(panel) and all(u.startswith("sim-annotator-") for u in panel)
        assert all(u.startswith("sim-adjudicator-") for u in judges)
    assert_consistent(result)
    # a second run finds nothing to do and reuses the same users
    again = simulate_annotators(n_annotators=4, accuracy=0.6, adjudicators=2, seed=5)
    assert (again["votes"], again["adjudications"]) == (0, 0)
    assert (again["decided"], again["unresolved"]) == (result["decided"], result["unresolved"])


def test_max_votes_stops_early_and_a_later_run_finishes(rendered_scene):
    first = simulate_annotators(n_annotators=3, accuracy=0.9, seed=2, max_votes=10)
    assert first["votes"] + first["adjudications"] == 10
    assert first["open"] > 0
    rest = simulate_annotators(n_annotators=3, accuracy=0.9, seed=2)
    assert rest["open"] == rest["adjudicate"] == 0
    assert first["votes"] + rest["votes"] == Vote.objects.filter(is_adjudication=False).count()


def test_items_of_videos_without_ground_truth_are_skipped(rendered_scene, reviewable_run):
    reviewable_run()  # a video without ground truth, after the rendered one in the queue
    plain = WorkItem.objects.filter(video__metadata={})
    assert plain.count() == 5
    result = simulate_annotators(n_annotators=3, accuracy=0.9, seed=0, stage="usability")
    assert result["skipped"] == 4 and result["blocked"] == 3
    assert not Vote.objects.filter(item__in=plain).exists()
    assert not Assignment.objects.filter(item__in=plain).exists(), "seats on skipped items are given back"
    assert result["open"] == 0 and result["items"] == WorkItem.objects.filter(stage="usability").count() - 4
    assert not Vote.objects.filter(item__stage="identity").exists()


def test_bad_settings_and_users_without_their_role_are_refused(rendered_scene, make_user):
    for kwargs in ({"n_annotators": 2, "accuracy": 0.9}, {"n_annotators": 3, "accuracy": 1.5},
                   {"n_annotators": 3, "accuracy": 0.9, "stage": "colour"},
                   {"n_annotators": 3, "accuracy": 0.9, "adjudicators": -1}):
        with pytest.raises(ApplicationError):
            simulate_annotators(seed=0, **kwargs)
    make_user("auditor", username="sim-annotator-2")
    with pytest.raises(ApplicationError) as exc:
        simulate_annotators(n_annotators=3, accuracy=0.9, seed=0)
    assert exc.value.code == "simulated_user_role"
    assert not Vote.objects.exists()


def test_the_command_reports_a_summary(rendered_scene):
    out = io.StringIO()
    call_command("simulate_annotators", "--annotators", "3", "--accuracy", "1.0", "--seed", "4",
                 "--stage", "usability", stdout=out, stderr=io.StringIO())
    n = WorkItem.objects.filter(stage="usability").count()
    assert f"{3 * n} votes, 0 adjudications; of {n} items with ground truth {n} decided (100.0% right)" in out.getvalue()
    assert not WorkItem.objects.filter(stage="identity").exclude(state="open").exists()
