from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.utils import timezone

from annotation.benchmark.services.descriptions import approved_facts
from annotation.curation.services.items import work_items_create_for_run
from annotation.curation.services.pools import pool_freeze
from annotation.curation.services.votes import vote_cast
from annotation.models import (
    Assignment,
    CrossPair,
    Description,
    DescriptionRun,
    DescriptionVersion,
    PoolMember,
    Query,
    Relation,
    ReviewPolicy,
    WorkItem,
)
from models.facts import parse_description, predicates_label
from tests.trajectories.factories import proposal, run_factory, video_factory
from trajectories.services.proposals import trajectories_store


@pytest.fixture
def reviewable_run(db):
    """A finished run with 4 trajectories (two of them overlapping: one duplicate pair), items open."""
    def make(video=None):
        run = run_factory(video=video or video_factory(split="train"))
        trajectories_store(run=run, proposals=[
            proposal(1, 0, 30, x=10), proposal(2, 10, 30, x=31),   # the same object twice
            proposal(3, 0, 30, x=300, y=200), proposal(4, 40, 30, x=500, y=10),
        ])
        run.refresh_from_db()
        work_items_create_for_run(run=run)
        return run

    return make


@pytest.fixture
def annotators(make_user):
    return [make_user("annotator", username=f"ann{i}") for i in range(5)]


@pytest.fixture
def adjudicator(make_user):
    return make_user("adjudicator", username="adj")


def panel_votes(item: WorkItem, annotators, labels):
    """Seat the annotators on the item (as claims would) and cast their votes."""
    now = timezone.now()
    for seat, (user, label) in enumerate(zip(annotators, labels)):
        Assignment.objects.create(item=item, annotator=user, seat=seat, claimed_at=now,
                                  lease_expires_at=now + timedelta(minutes=10))
        vote_cast(item_id=item.pk, annotator=user, label=label)
    item.refresh_from_db()
    return item


# -- building blocks -------------------------------------------------------------------------------
def frozen_pool(reviewable_run, annotators, split: str):
    """A frozen pool of four single members (every proposal usable, the duplicate pair different),
    reviewed by panels of one to keep the fixture small."""
    ReviewPolicy.objects.update_or_create(name="default", defaults={"panel_size": 1, "required_votes": 1})
    run = reviewable_run(video_factory(split=split))
    for item in WorkItem.objects.filter(stage="usability", trajectory__run=run):
        panel_votes(item, annotators[:1], ["usable"])
    for item in WorkItem.objects.filter(stage="identity", duplicate__trajectory_a__run=run):
        panel_votes(item, annotators[:1], ["different"])
    pool = pool_freeze(run=run)
    assert pool.n_members == 4
    return pool


def content(colour: str) -> dict:
    return {"appearance": f"a person in a {colour} top", "motion": "walks to the right",
            "facts": [{"id": "f1", "kind": "attribute", "name": "upper_colour", "value": colour, "start_frame": 0,
                       "end_frame": 60, "evidence_frames": [5, 20], "scope": "whole", "known": True},
                      {"id": "f2", "kind": "event", "name": "walks", "value": "right", "start_frame": 0,
                       "end_frame": 60, "evidence_frames": [10], "scope": "interval", "known": True}]}


def propose_description(pool, trajectory_id: int, colour: str, *, panel: int = 3) -> DescriptionVersion:
    """What a describer run stores: the description, its model version and its review item."""
    run = DescriptionRun.objects.create(backend={"name": "heuristic"}, prompt_version="fixture",
                                        prompt_sha256="0" * 64, budget={})
    run.pools.set([pool])
    description = Description.objects.create(run=run, pool=pool, trajectory_id=trajectory_id,
                                             status=Description.Status.IN_REVIEW, attempts=1,
                                             raw_outputs=[f'{{"appearance": "{colour}"}}'])
    data = content(colour)
    version = DescriptionVersion.objects.create(description=description, number=1, origin="model", content=data,
                                                content_sha256=parse_description(data).content_hash())
    WorkItem.objects.create(stage="description", video_id=pool.video_id, trajectory_id=trajectory_id,
                            description=version, panel_size=panel, required_votes=min(panel, 2))
    return version


def approve(version: DescriptionVersion, annotators) -> None:
    item = WorkItem.objects.get(description=version)
    panel_votes(item, annotators[:item.panel_size], ["usable"] * item.panel_size)
    version.description.refresh_from_db()
    assert version.description.status == Description.Status.APPROVED


def propose_query(pool, target_id: int, colour: str) -> Query:
    """What a generation run stores for one accepted proposal: the query and its relation row,
    pre-labelled by the automatic reading of the predicates against each member's approved facts."""
    description = Description.objects.get(pool=pool, trajectory_id=target_id)
    predicates = [{"name": "upper_colour", "value": colour, "fact_ids": ["f1"]}]
    query = Query.objects.create(pool=pool, video_id=pool.video_id, target_id=target_id,
                                 source_version=description.approved_version, text=f"the person in the {colour} top",
                                 predicates=predicates, status=Query.Status.IN_REVIEW)
    prelabels = {}
    for member in PoolMember.objects.filter(pool=pool):
        d = Description.objects.filter(pool=pool, trajectory_id=member.trajectory_id, status="approved").first()
        if d is None:
            prelabels[str(member.trajectory_id)] = {"label": -1, "predicates": [], "evidence": []}
        else:
            label = predicates_label(predicates, approved_facts(d))
            prelabels[str(member.trajectory_id)] = {"label": label, "predicates": ["upper_colour"], "evidence": ["f1"]}
    WorkItem.objects.create(stage="relation", video_id=pool.video_id, query=query, panel_size=1, required_votes=1,
                            prelabels=prelabels)
    return query


def seat(item: WorkItem, user) -> None:
    now = timezone.now()
    Assignment.objects.create(item=item, annotator=user, seat=item.assignments.count(), claimed_at=now,
                              lease_expires_at=now + timedelta(minutes=10))


def review_row(query: Query, user, labels: dict[int, int]) -> Query:
    """One reviewer labels a whole relation row (no disputes when the labels follow the pre-labels)."""
    item = WorkItem.objects.get(stage="relation", query=query)
    seat(item, user)
    vote_cast(item_id=item.pk, annotator=user, label="reviewed", judgments=labels,
              payload={"faithful": True, "natural": 4})
    query.refresh_from_db()
    return query


@pytest.fixture
def world(reviewable_run, annotators):
    """Two dev videos with frozen pools. Pool A: red (approved), blue (approved), green (in
    review), and a member without a description; query ``qa`` for the red one, its row open.
    Pool B: yellow (approved) and three undescribed members; query ``qb`` for the yellow one."""
    pool_a = frozen_pool(reviewable_run, annotators, "dev")
    pool_b = frozen_pool(reviewable_run, annotators, "dev")
    a = list(PoolMember.objects.filter(pool=pool_a).values_list("trajectory_id", flat=True))
    b = list(PoolMember.objects.filter(pool=pool_b).values_list("trajectory_id", flat=True))
    approve(propose_description(pool_a, a[0], "red", panel=1), annotators)
    approve(propose_description(pool_a, a[1], "blue", panel=1), annotators)
    green = propose_description(pool_a, a[2], "green")                 # reviewed by three in a test
    approve(propose_description(pool_b, b[0], "yellow", panel=1), annotators)
    return SimpleNamespace(pool_a=pool_a, pool_b=pool_b, a=a, b=b, green=green,
                           qa=propose_query(pool_a, a[0], "red"), qb=propose_query(pool_b, b[0], "yellow"))


@pytest.fixture
def auditor(make_user):
    return make_user("auditor", username="aud")


@pytest.fixture
def var_dir(settings, tmp_path):
    settings.VAR_DIR = tmp_path / "var"
    return settings.VAR_DIR


def reviewed_pair(query: Query, trajectory_id: int, label: int, *, blind: bool = True) -> CrossPair:
    """A mined easy negative that pair review has settled (by people not shown the writer's
    proposal unless ``blind`` is false: what pair review records as ``evidence["blind"]``)."""
    pair = CrossPair.objects.create(query=query, trajectory_id=trajectory_id, stratum="easy_negative",
                                    strata=["easy_negative"],
                                    provenance=[{"stratum": "easy_negative", "encoder": "minilm"}],
                                    similarity=0.1, review="done")
    Relation.objects.create(query=query, trajectory_id=trajectory_id, label=label, source="human",
                            stratum="easy_negative", evidence={"blind": blind})
    return pair
