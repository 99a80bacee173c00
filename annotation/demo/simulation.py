"""Simulated annotators: the ground truth of review items on rendered videos, and a crowd that
plays against it through the same services as people do.

Truth. A rendered video (``models.world.renderer``) carries its ground truth:
``Video.metadata["ground_truth"]`` is the path, relative to MEDIA_ROOT, of a ``GroundTruth``
JSON file. A trajectory belongs to the person whose amodal box overlaps its observation with
IoU >= ``MATCH_IOU`` on the most of its observations (ties: the lower person id), provided that
is at least ``MATCH_FRACTION`` of them; otherwise it belongs to nobody (a distractor, a drifting
track, or a track that switches people too often). Frames the person is not on count as misses.
The usability truth of a trajectory is ``usable`` when it belongs to a person, else
``unusable``; the identity truth of a duplicate pair is ``same`` when both trajectories belong to
the same person, else ``different``.

Crowd. ``simulate_annotators`` plays ``sim-annotator-{i}`` and ``sim-adjudicator-{i}`` round robin
through ``work_item_claim_next``, ``vote_cast`` (with a client request id) and
``adjudication_cast`` (with a reason) until no work is left. An annotator casts the truth with
probability ``accuracy`` and otherwise one of the item's other labels (``uncertain`` included) at
random; adjudicators do the same with ``ADJUDICATOR_ACCURACY``. Each label is drawn from a
generator seeded by ``(seed, item, user)``, so a run's votes do not depend on the order in
which the database hands out items.
"""
from __future__ import annotations

import math
import random
import secrets
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Count, Q

from accounts.services import user_create
from annotation.curation.selectors import adjudication_queue
from annotation.curation.services.claims import assignment_release, work_item_claim_next
from annotation.curation.services.votes import adjudication_cast, vote_cast
from annotation.curation.stages import identity, usability
from annotation.models import WorkItem
from common.errors import ApplicationError
from common.roles import Role, user_has_role
from models.world.scene import GroundTruth
from trajectories.models import Trajectory, Video

MATCH_IOU = 0.5            # an observation matches a person's box at this IoU or more
MATCH_FRACTION = 0.5       # ... and a trajectory belongs to the person it matches on this share of observations
# Adjudicators are the experienced reviewers: right 95% of the time, against the crowd's
# configurable accuracy (a figure in the range reported for expert adjudication of crowd labels).
ADJUDICATOR_ACCURACY = 0.95
ANNOTATOR_NAME = "sim-annotator-{}"
ADJUDICATOR_NAME = "sim-adjudicator-{}"
ADJUDICATION_REASON = "simulated adjudicator: judged against the rendered ground truth"
TIME_SPENT_MS = (1_500, 20_000)  # a simulated vote takes this long, uniformly at random


# -- truth ---------------------------------------------------------------------------------------
def _paired_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of ``a[i]`` with ``b[i]`` for each row ([N, 4] xyxy each) -> [N]; a NaN row gives 0."""
    ix = np.clip(np.minimum(a[:, 2], b[:, 2]) - np.maximum(a[:, 0], b[:, 0]), 0, None)     # [N]
    iy = np.clip(np.minimum(a[:, 3], b[:, 3]) - np.maximum(a[:, 1], b[:, 1]), 0, None)     # [N]
    inter = ix * iy                                                                         # [N]
    union = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1]) + (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1]) - inter
    iou = inter / np.maximum(union, 1e-9)                                                   # [N]
    return np.nan_to_num(iou, nan=0.0)


@dataclass
class SceneTruth:
    """The people of one rendered video as per-frame box tables."""

    gt: GroundTruth
    tables: list[np.ndarray]  # per person: [n_frames, 4] float64 amodal boxes, NaN off-screen

    @classmethod
    def of(cls, gt: GroundTruth) -> SceneTruth:
        return cls(gt=gt, tables=[p.boxes_array().astype(np.float64) for p in gt.people])

    def person_of(self, frames: np.ndarray, boxes: np.ndarray) -> int | None:
        """The person a trajectory ``(frames [N], boxes [N, 4])`` belongs to, or ``None``."""
        frames = np.asarray(frames, np.int64).reshape(-1)
        boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
        if len(frames) == 0:
            return None
        best, best_hits = None, 0
        for person, table in zip(self.gt.people, self.tables):
            on_video = (frames >= 0) & (frames < len(table))                                # [N]
            theirs = np.full((len(frames), 4), np.nan)                                      # [N, 4]
            theirs[on_video] = table[frames[on_video]]
            hits = int((_paired_iou(boxes, theirs) >= MATCH_IOU).sum())
            if hits > best_hits:
                best, best_hits = person.id, hits
        return best if best_hits > 0 and best_hits >= MATCH_FRACTION * len(frames) else None


def video_ground_truth(video: Video) -> GroundTruth | None:
    """The ground truth a rendered video carries, or ``None`` for a video without one.

    A video whose metadata names a file that is missing, outside MEDIA_ROOT or unreadable is
    refused (``ground_truth_unreadable``) rather than treated as having none.
    """
    rel = (video.metadata or {}).get("ground_truth")
    if not rel:
        return None
    root = Path(settings.MEDIA_ROOT).resolve()
    path = (root / str(rel)).resolve()
    if not path.is_relative_to(root) or not path.is_file():
        raise ApplicationError(f"video #{video.pk}: its ground truth {rel!r} is not a file under MEDIA_ROOT",
                               code="ground_truth_unreadable")
    try:
        return GroundTruth.load(path)
    except (ValueError, TypeError, KeyError) as exc:
        raise ApplicationError(f"video #{video.pk}: its ground truth {rel!r} cannot be read: {exc}",
                               code="ground_truth_unreadable") from exc


def work_item_truths(items: Iterable[WorkItem]) -> dict[int, str]:
    """The true label of each item whose video has ground truth (items of other videos are left
    out). Reads each video's ground truth once and the trajectories' arrays in one query per video.
    """
    by_video: dict[int, list[WorkItem]] = {}
    for item in items:
        by_video.setdefault(item.video_id, []).append(item)
    truths: dict[int, str] = {}
    for video in Video.objects.filter(pk__in=by_video).order_by("pk"):
        gt = video_ground_truth(video)
        if gt is None:
            continue
        scene = SceneTruth.of(gt)
        video_items = by_video[video.pk]
        wanted = set()
        for item in video_items:
            if item.stage == WorkItem.Stage.USABILITY:
                wanted.add(item.trajectory_id)
            else:
                wanted.update((item.duplicate.trajectory_a_id, item.duplicate.trajectory_b_id))
        person = {t.pk: scene.person_of(t.frames_array(), t.boxes_array())
                  for t in Trajectory.objects.filter(pk__in=wanted).only("pk", "frames", "boxes")}
        for item in video_items:
            if item.stage == WorkItem.Stage.USABILITY:
                truths[item.pk] = usability.USABLE if person[item.trajectory_id] is not None else usability.UNUSABLE
            else:
                a, b = person[item.duplicate.trajectory_a_id], person[item.duplicate.trajectory_b_id]
                truths[item.pk] = identity.SAME if a is not None and a == b else identity.DIFFERENT
    return truths


# -- the crowd -----------------------------------------------------------------------------------
def _label(*, seed: int, item_id: int, user, truth: str, labels: tuple[str, ...], accuracy: float) -> str:
    rng = random.Random(f"{seed}:{item_id}:{user.username}")
    if rng.random() < accuracy:
        return truth
    return rng.choice([label for label in labels if label != truth])


def _simulated_users(name: str, role: Role, n: int) -> list:
    """``n`` users named ``name.format(1..n)`` holding ``role``: existing ones are reused, missing
    ones created with a random password (nobody logs in as them)."""
    User = get_user_model()
    users = []
    for i in range(1, n + 1):
        username = name.format(i)
        user = User.objects.filter(username=username).first()
        if user is None:
            user = user_create(username=username, password=secrets.token_urlsafe(24), roles=[role.value])
        elif not user_has_role(user, role):
            raise ApplicationError(f"user {username!r} exists without the {role.value} role; "
                                   "give it the role or remove it before simulating", code="simulated_user_role")
        users.append(user)
    return users


def simulate_annotators(*, n_annotators: int, accuracy: float, adjudicators: int = 1, seed: int,
                        max_votes: int | None = None, stage: str | None = None,
                        progress: Callable[[float, str], None] | None = None) -> dict:
    """Play simulated annotators and adjudicators against the rendered ground truth until no work
    is left (or ``max_votes`` votes, panel and adjudication together, have been cast).

    Each round, every annotator still finding work claims its next item and votes on it, then
    every adjudicator decides one item from its queue. Items whose video has no ground truth are
    never voted on: they are counted in ``skipped``. As ``work_item_claim_next`` cannot be told to
    pass them over, an annotator who is handed one gives the seat back and stops for this run
    (``blocked``), so such items in front of the queue stop the simulation early.

    Returns the votes and adjudications this call cast; the items with truth per state at the end
    (``decided``, ``unresolved``, ``open``, ``adjudicate``; over all such items of the stage,
    including those decided before); ``accuracy``, the share of decided items whose decision is
    the truth (``None`` when none is decided); and ``vote_accuracy``, the share of this call's
    panel votes that cast the truth.
    """
    if not (isinstance(n_annotators, int) and n_annotators >= 1):
        raise ApplicationError("simulate at least one annotator", code="invalid_simulation")
    if not (isinstance(adjudicators, int) and adjudicators >= 0):
        raise ApplicationError("the number of adjudicators cannot be negative", code="invalid_simulation")
    if not (0.0 <= accuracy <= 1.0):
        raise ApplicationError(f"accuracy must lie in [0, 1], got {accuracy}", code="invalid_simulation")
    if max_votes is not None and max_votes < 0:
        raise ApplicationError("max_votes cannot be negative", code="invalid_simulation")
    curation = (WorkItem.Stage.USABILITY, WorkItem.Stage.IDENTITY)
    if stage is not None and stage not in curation:
        raise ApplicationError(f"this simulation plays the curation stages {list(curation)}; the later stages are "
                               "simulated by annotation.demo.simulation_relations", code="invalid_stage")
    scope = WorkItem.objects.filter(stage__in=curation) if stage is None else WorkItem.objects.filter(stage=stage)
    items = list(scope.select_related("duplicate"))
    truths = work_item_truths(items)
    truth_videos = {item.video_id for item in items if item.pk in truths}
    waiting = (WorkItem.State.OPEN, WorkItem.State.ADJUDICATE)
    skipped = scope.filter(state__in=waiting).exclude(video_id__in=truth_videos).count()
    open_items = list(scope.filter(state=WorkItem.State.OPEN, video_id__in=truth_videos)
                      .annotate(n=Count("votes", filter=Q(votes__is_adjudication=False))))
    largest_panel = max((i.panel_size for i in open_items), default=0)
    if n_annotators < largest_panel:
        raise ApplicationError(f"{n_annotators} annotator(s) cannot fill a panel of {largest_panel}",
                               code="invalid_simulation")
    seats_left = sum(i.panel_size - i.n for i in open_items)
    in_adjudication = scope.filter(state=WorkItem.State.ADJUDICATE, video_id__in=truth_videos).count()

    crowd = _simulated_users(ANNOTATOR_NAME, Role.ANNOTATOR, n_annotators)
    deciders = _simulated_users(ADJUDICATOR_NAME, Role.ADJUDICATOR, adjudicators)
    budget = math.inf if max_votes is None else max_votes
    votes = adjudications = blocked = right_votes = 0

    def report(message: str) -> None:
        if progress is not None:
            expected = min(budget, seats_left + in_adjudication + adjudications)
            progress((votes + adjudications) / expected if expected else 1.0, message)

    active = list(crowd)
    # Every round casts at least one vote or ends the loop, and votes are bounded by the seats
    # and items, so this bound is never the reason to stop.
    for _round in range(seats_left + in_adjudication + 2 * len(truths) + 2):
        cast = 0
        for annotator in list(active):
            if votes + adjudications >= budget:
                break
            seat = work_item_claim_next(annotator=annotator, stage=stage)
            if seat is None:
                active.remove(annotator)
                continue
            truth = truths.get(seat.item_id)
            if truth is None:
                assignment_release(assignment=seat)
                active.remove(annotator)
                blocked += 1
                continue
            label = _label(seed=seed, item_id=seat.item_id, user=annotator, truth=truth, labels=seat.item.labels,
                           accuracy=accuracy)
            rng = random.Random(f"{seed}:{seat.item_id}:{annotator.username}:time")
            vote_cast(item_id=seat.item_id, annotator=annotator, label=label,
                      time_spent_ms=rng.randint(*TIME_SPENT_MS), client_request_id=uuid.uuid4())
            votes += 1
            right_votes += label == truth
            cast += 1
        for adjudicator in deciders:
            if votes + adjudications >= budget:
                break
            queue = adjudication_queue(user=adjudicator).filter(video_id__in=truth_videos)
            if stage is not None:
                queue = queue.filter(stage=stage)
            item = queue.only("pk", "stage").first()
            if item is None:
                continue
            label = _label(seed=seed, item_id=item.pk, user=adjudicator, truth=truths[item.pk], labels=item.labels,
                           accuracy=ADJUDICATOR_ACCURACY)
            adjudication_cast(item_id=item.pk, adjudicator=adjudicator, label=label, reason=ADJUDICATION_REASON)
            adjudications += 1
            cast += 1
        report(f"{votes} votes, {adjudications} adjudications")
        if cast == 0:
            break
    report("done")

    states = {"decided": 0, "unresolved": 0, "open": 0, "adjudicate": 0}
    correct = 0
    for pk, state, decision in scope.filter(video_id__in=truth_videos).values_list("pk", "state", "decision"):
        if pk not in truths:
            continue  # created while the simulation ran
        states[state] += 1
        correct += state == WorkItem.State.DECIDED and decision == truths[pk]
    return {
        "annotators": n_annotators, "adjudicators": adjudicators, "annotator_accuracy": accuracy,
        "adjudicator_accuracy": ADJUDICATOR_ACCURACY, "seed": seed, "stage": stage or "all",
        "items": len(truths), "votes": votes, "adjudications": adjudications, **states,
        "skipped": skipped, "blocked": blocked, "correct": correct,
        "accuracy": correct / states["decided"] if states["decided"] else None,
        "vote_accuracy": right_votes / votes if votes else None,
    }
