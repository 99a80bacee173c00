"""Simulated reviewers for the relation stages (descriptions, relation rows, cross-video pairs),
playing against the rendered ground truth through the same services as people do.

Truth. A pool member belongs to a rendered person as in ``annotation.demo.simulation`` (box IoU). The
person's ground-truth facts (``models.world.renderer``) are complete, so the truth is read in a closed
world: a predicate holds when the person has a fact with its name and value, and fails otherwise.

- Description: a reviewer checks the proposal's known facts of the kinds the renderer knows
  (colours, walking direction, speed, standing, entering, leaving) against the person's facts.
  All right: ``usable``. Some wrong: ``usable_after_minor_correction`` with those facts set to
  the true value (or marked unknown when the person has no such fact), the same correction for
  every reviewer, so two of them approve one version. A member that belongs to nobody:
  ``unusable``.
- Relation row: every candidate labelled by the closed-world truth; the query is rated faithful
  when it holds for its target.
- Pair: ``match`` / ``mismatch`` by the same truth.

With probability ``1 - accuracy`` a reviewer answers ``uncertain`` (``⊥`` in a row) instead, which
exercises consolidation, adjudication and second review. Draws are seeded by (seed, item, user).
"""
from __future__ import annotations

import random
import uuid
from collections.abc import Callable

import numpy as np

from annotation.benchmark.services.descriptions import (
    description_run_create,
    description_run_execute,
)
from annotation.benchmark.services.mining import (
    completeness_report,
    completion_pairs_queue,
    mining_run_create,
    mining_run_execute,
)
from annotation.benchmark.services.queries import generation_run_create, generation_run_execute
from annotation.benchmark.services.runs import model_run_execute
from annotation.benchmark.services.snapshots import relation_snapshot_create
from annotation.curation.selectors import adjudication_queue
from annotation.curation.services.claims import assignment_release, work_item_claim_next
from annotation.curation.services.pools import pool_freeze
from annotation.curation.services.votes import adjudication_cast, vote_cast
from annotation.curation.stages import description, pair, relation
from annotation.demo.simulation import (
    ADJUDICATION_REASON,
    ADJUDICATOR_NAME,
    ANNOTATOR_NAME,
    SceneTruth,
    _simulated_users,
    simulate_annotators,
    video_ground_truth,
)
from annotation.models import CandidatePool, CrossPair, PoolMember, WorkItem
from common.errors import ApplicationError
from common.models import RunStatus
from common.roles import Role
from trajectories.models import ProposalRun, Video

CHECKED = ("upper_colour", "lower_colour", "walks", "speed", "stands", "enters", "leaves")
STAGES = (WorkItem.Stage.DESCRIPTION, WorkItem.Stage.RELATION, WorkItem.Stage.PAIR)


class _Truth:
    """Ground-truth facts per pool member, read once per video."""

    def __init__(self):
        self._scenes: dict[int, SceneTruth | None] = {}
        self._facts: dict[int, set[tuple[str, str]] | None] = {}

    def facts(self, trajectory_id: int) -> set[tuple[str, str]] | None:
        """``{(name, value)}`` of the member's person, or None when it belongs to nobody."""
        if trajectory_id not in self._facts:
            member = PoolMember.objects.select_related("pool").filter(trajectory_id=trajectory_id).first()
            video_id = member.pool.video_id
            if video_id not in self._scenes:
                gt = video_ground_truth(Video.objects.get(pk=video_id))
                self._scenes[video_id] = SceneTruth.of(gt) if gt is not None else None
            scene = self._scenes[video_id]
            person = None
            if scene is not None:
                frames = np.frombuffer(bytes(member.frames), dtype="<i4")
                boxes = np.frombuffer(bytes(member.boxes), dtype="<f4").reshape(-1, 4)
                person = scene.person_of(frames, boxes)
            self._facts[trajectory_id] = None if person is None else {
                (f.name, f.value) for f in scene.gt.people[person].facts}
        return self._facts[trajectory_id]

    def holds(self, predicates: list[dict], trajectory_id: int) -> int:
        facts = self.facts(trajectory_id)
        if facts is None:
            return 0
        return int(all((p["name"], p["value"]) in facts for p in predicates))

    def has_truth(self, item: WorkItem) -> bool:
        tid = {WorkItem.Stage.DESCRIPTION: item.trajectory_id, WorkItem.Stage.RELATION: item.query.target_id
               if item.query_id else None, WorkItem.Stage.PAIR: item.pair.trajectory_id if item.pair_id else None}[item.stage]
        if tid is None:
            return False
        self.facts(tid)
        member = PoolMember.objects.select_related("pool").filter(trajectory_id=tid).first()
        return self._scenes.get(member.pool.video_id) is not None


def _corrected(content: dict, truth: set[tuple[str, str]]) -> dict | None:
    """The proposal with its wrong checked facts fixed, or None when nothing is wrong."""
    values: dict[str, set[str]] = {}
    for name, value in truth:
        values.setdefault(name, set()).add(value)
    changed = False
    facts = []
    for f in content["facts"]:
        f = dict(f)
        if f["name"] in CHECKED and f.get("known", True) and (f["name"], f["value"]) not in truth:
            changed = True
            options = sorted(values.get(f["name"], ()))
            if len(options) == 1 and f["name"] in ("upper_colour", "lower_colour", "speed", "walks"):
                f["value"] = options[0]
            else:
                f["value"], f["known"] = "", False
        facts.append(f)
    return {**content, "facts": facts} if changed else None


def _vote(item: WorkItem, user, truth: _Truth, rng: random.Random, accuracy: float) -> dict:
    unsure = rng.random() >= accuracy
    if item.stage == WorkItem.Stage.DESCRIPTION:
        facts = truth.facts(item.trajectory_id)
        if unsure:
            return {"label": description.UNCERTAIN}
        if facts is None:
            return {"label": description.UNUSABLE}
        corrected = _corrected(item.description.content, facts)
        return {"label": description.USABLE} if corrected is None else {"label": description.MINOR,
                                                                        "correction": corrected}
    if item.stage == WorkItem.Stage.RELATION:
        members = item.disputed or list(PoolMember.objects.filter(pool_id=item.query.pool_id)
                                        .values_list("trajectory_id", flat=True))
        judgments = {tid: (-1 if rng.random() >= accuracy else truth.holds(item.query.predicates, tid))
                     for tid in members}
        first = not item.disputed
        payload = {"faithful": bool(truth.holds(item.query.predicates, item.query.target_id)), "natural": 4} \
            if first else {}
        return {"label": relation.REVIEWED, "judgments": judgments, "payload": payload}
    if unsure:
        return {"label": pair.UNCERTAIN}
    return {"label": pair.MATCH if truth.holds(item.pair.query.predicates, item.pair.trajectory_id) else pair.MISMATCH}


def simulate_relation_review(*, n_annotators: int = 3, accuracy: float = 0.95, adjudicators: int = 1, seed: int = 0,
                             stage: str | None = None, progress: Callable[[float, str], None] | None = None) -> dict:
    """Play reviewers on open description, relation and pair items until none is left; returns
    the votes and adjudications cast per stage."""
    stages = [stage] if stage else list(STAGES)
    crowd = _simulated_users(ANNOTATOR_NAME, Role.ANNOTATOR, n_annotators)
    deciders = _simulated_users(ADJUDICATOR_NAME, Role.ADJUDICATOR, adjudicators)
    truth = _Truth()
    counts = {s: 0 for s in stages} | {"adjudications": 0, "skipped": 0}
    blocked: set[tuple[int, str]] = set()    # (user, stage) handed an item without truth
    for _round in range(100_000):
        cast = 0
        for s in stages:
            for user in crowd:
                if (user.pk, s) in blocked:
                    continue
                seat = work_item_claim_next(annotator=user, stage=s)
                if seat is None:
                    continue
                item = WorkItem.objects.select_related("description", "query", "pair__query").get(pk=seat.item_id)
                if not truth.has_truth(item):
                    counts["skipped"] += 1
                    assignment_release(assignment=seat)
                    blocked.add((user.pk, s))
                    continue
                rng = random.Random(f"{seed}:{item.pk}:{user.username}")
                vote = _vote(item, user, truth, rng, accuracy)
                vote_cast(item_id=item.pk, annotator=user, client_request_id=uuid.uuid4(), **vote)
                counts[s] += 1
                cast += 1
        for adjudicator in deciders:
            item = adjudication_queue(user=adjudicator).filter(stage__in=stages).first()
            if item is None:
                continue
            judgments = None
            if item.stage == WorkItem.Stage.PAIR:
                label = pair.MATCH if truth.holds(item.pair.query.predicates, item.pair.trajectory_id) \
                    else pair.MISMATCH
            elif item.stage == WorkItem.Stage.RELATION:   # a dev/test row's ⊥ candidates, labelled from the truth
                label = relation.REVIEWED
                judgments = {tid: truth.holds(item.query.predicates, tid) for tid in relation.bottom_candidates(item)}
            else:
                facts = truth.facts(item.trajectory_id)
                label = description.UNUSABLE if facts is None or _corrected(item.description.content, facts) is not None \
                    else description.USABLE
            adjudication_cast(item_id=item.pk, adjudicator=adjudicator, label=label, reason=ADJUDICATION_REASON,
                              judgments=judgments)
            counts["adjudications"] += 1
            cast += 1
        if progress is not None:
            progress(0.0, f"{sum(counts[s] for s in stages)} votes")
        if cast == 0:
            break
    counts["open"] = WorkItem.objects.filter(stage__in=stages, state=WorkItem.State.OPEN).count()
    counts["not_sampled_pairs"] = CrossPair.objects.filter(review=CrossPair.Review.NOT_SAMPLED).count()
    return counts


def _run_now(run, execute) -> dict:
    """Run a model run inline through its lifecycle (it ends succeeded, with its job, as a worker's
    would); its counts, or an ApplicationError with the reason it failed."""
    run, counts = model_run_execute(run=run, execute=execute)
    if run.status != RunStatus.SUCCEEDED:
        raise ApplicationError(f"{type(run).__name__} {run.pk} {run.status}: {run.error}", code="run_failed")
    return counts


def simulated_benchmark_build(*, seed: int = 0, accuracy: float = 0.95, created_by=None,
                              progress: Callable[[str], None] | None = None) -> dict:
    """Take the rendered videos from review to relation snapshots with the embedded defaults and
    simulated people: curation votes, pool freezing, descriptions, queries, relation rows, mining
    and pair review per split, completion of dev/test, then one snapshot per split. Videos without
    ground truth (or whose runs are still running) are left as they are. Returns what it did."""

    def say(message: str) -> None:
        if progress is not None:
            progress(message)

    out: dict = {}
    out["curation"] = simulate_annotators(n_annotators=3, accuracy=1.0 if accuracy >= 1 else max(accuracy, 0.9),
                                          seed=seed)
    say(f"curation: {out['curation']['votes']} votes")
    pools = []
    for run in ProposalRun.objects.filter(status=ProposalRun.Status.SUCCEEDED).select_related("video").order_by("pk"):
        if video_ground_truth(run.video) is None:
            continue
        existing = CandidatePool.objects.filter(run=run, frozen_at__isnull=False).first()
        if existing is not None:
            pools.append(existing)
            continue
        try:
            pools.append(pool_freeze(run=run, frozen_by=created_by))
        except ApplicationError as exc:
            say(f"video {run.video_id}: not frozen ({exc.message})")
    pools = [p for p in pools if not p.descriptions.exists()]
    out["pools"] = len(pools)
    if pools:
        out["descriptions"] = _run_now(description_run_create(pools=pools, created_by=created_by, queue=False),
                                       description_run_execute)
        out["description_review"] = simulate_relation_review(accuracy=accuracy, seed=seed,
                                                              stage=WorkItem.Stage.DESCRIPTION)
        out["queries"] = _run_now(generation_run_create(pools=pools, created_by=created_by, queue=False),
                                  generation_run_execute)
        out["relation_review"] = simulate_relation_review(accuracy=accuracy, seed=seed, stage=WorkItem.Stage.RELATION)
    say("descriptions, queries and relation rows reviewed")
    out["mining"] = {}
    for split in ("train", "dev", "test"):
        out["mining"][split] = _run_now(mining_run_create(split=split, created_by=created_by, queue=False),
                                        mining_run_execute)
    simulate_relation_review(accuracy=accuracy, seed=seed, stage=WorkItem.Stage.PAIR)
    for split in ("dev", "test"):
        completion_pairs_queue(split=split)
    out["pair_review"] = simulate_relation_review(accuracy=1.0, seed=seed + 1, stage=WorkItem.Stage.PAIR)
    say("cross-video pairs reviewed")
    out["snapshots"] = {}
    for split in ("train", "dev", "test"):
        report = completeness_report(split=split)
        try:
            snap = relation_snapshot_create(split=split, name=f"simulated seed {seed}", created_by=created_by,
                                            allow_incomplete=split == "train")
            out["snapshots"][split] = {"id": snap.pk, "sha256": snap.content_sha256, "complete": snap.complete,
                                       **{k: snap.counts[k] for k in ("n_queries", "n_tracks", "n_relations")}}
        except ApplicationError as exc:
            out["snapshots"][split] = {"error": exc.message, "missing": report["missing"]}
    return out
