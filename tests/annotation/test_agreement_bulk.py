"""The bulk readers of the stored votes against the obvious ORM reading, on random cases.

``decisions_audit``, ``agreement_stats``, ``vote_columns`` and the stages' ``agreement_rows`` read
the votes as integer arrays (``common.columns``); here each is compared with the same figures
computed from one ORM row per vote (the reading they replace), on random stores: several
policies, missing times, adjudication votes, votes whose ids are not in table order, items of
two splits interleaved (dense and sparse item ids), corrupted and reopened items, and labels
outside the stage.
"""
from __future__ import annotations

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.core.management.color import no_style
from django.db import connection
from django.db.models import Case, Count, FloatField, IntegerField, Value, When
from django.db.models.functions import Cast, Coalesce
from django.utils import timezone

from annotation.curation.services.agreement import agreement_stats, decisions_audit, vote_columns
from annotation.curation.services.agreement_review import review_design
from annotation.curation.services.votes import vote_cast
from annotation.curation.stages import relation as relation_stage
from annotation.curation.stages import stage_get
from annotation.curation.stages.base import AgreementRows
from annotation.curation.stages.relation import CATEGORY_OF
from annotation.models import RelationJudgment, Vote, WorkItem
from annotation.rules import ADJUDICATE_CODE, PENDING_CODE, UNRESOLVED_CODE, decide_counts
from common.columns import integer_columns, integer_columns_among, order_by_column
from models.curation.agreement import agreement_report
from tests.annotation.conftest import seat
from tests.trajectories.factories import run_factory, video_factory
from trajectories.models import Trajectory

pytestmark = pytest.mark.django_db

LABELS = ("usable", "unusable", "uncertain")
STATES = ("open", "adjudicate", "decided", "unresolved")


# -- the readings the bulk paths replace -----------------------------------------------------------
def orm_rows(votes) -> dict[str, np.ndarray]:
    """A label stage's agreement rows read one ORM row per vote, in vote order."""
    index = Case(*[When(label=name, then=Value(i)) for i, name in enumerate(LABELS)], output_field=IntegerField())
    seconds = Coalesce(Cast("time_spent_ms", FloatField()) / 1000.0, Value(float("nan")), output_field=FloatField())
    values = list(votes.order_by("id").values_list("item_id", "annotator_id", index,
                                                   Cast("is_adjudication", IntegerField()), seconds))
    table = np.array(values, dtype=np.float64).reshape(-1, 5)                              # [V, 5]
    with np.errstate(invalid="ignore"):  # a label outside the stage reads NaN, which no index holds
        label = table[:, 2].astype(np.int64)
    return {"item": table[:, 0].astype(np.int64), "rater": table[:, 1].astype(np.int64), "label": label,
            "is_adjudication": table[:, 3].astype(bool), "time_spent": table[:, 4]}


def json_safe(value):
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, float) and not np.isfinite(value):
        return None
    if isinstance(value, np.generic):
        return json_safe(value.item())
    return value


def orm_agreement_stats(stage: str, split: str | None) -> dict:
    """``agreement_stats`` of a label stage over ORM-read rows."""
    declared = stage_get(stage)
    votes = Vote.objects.filter(item__stage=stage)
    votes = votes.filter(item__video__split_group__split=split) if split else votes
    panel = int(WorkItem.objects.filter(stage=stage).values_list("panel_size", flat=True).first() or 3)
    rows = orm_rows(votes)
    _, unit = np.unique(rows["item"], return_inverse=True)
    report = agreement_report(unit.reshape(-1), rows["rater"], rows["label"], rows["is_adjudication"],
                              len(declared.categories), labels=list(declared.categories),
                              time_spent=rows["time_spent"], panel=panel)
    report["vote_distributions"].pop("combinations", None)
    report["review"] = review_design(declared, panel)           # what a three-vote panel measures
    names = dict(get_user_model().objects.values_list("pk", "username"))
    report["per_rater"] = {names[int(k)]: v for k, v in report["per_rater"].items()}
    report.update(stage=stage, split=split or "all")
    return json_safe(report)


def orm_decisions_audit(stage: str) -> dict:
    """``decisions_audit`` from grouped ORM counts and one Python value per item."""
    declared = stage_get(stage)
    labels = declared.label_values
    items = list(WorkItem.objects.filter(stage=stage, reopened_at__isnull=True).order_by("id")
                 .values_list("id", "state", "decision", "panel_size", "required_votes"))
    if not items:
        return {"stage": stage, "n_items": 0, "outcomes": {}, "mismatched": []}
    ids = np.array([r[0] for r in items])
    panel_counts = np.zeros((len(ids), len(labels)), np.int64)
    adjudication_counts = np.zeros_like(panel_counts)
    for item_id, label, adj, n in (Vote.objects.filter(item__stage=stage, item__reopened_at__isnull=True).order_by()
                                   .values_list("item_id", "label", "is_adjudication").annotate(n=Count("id"))):
        (adjudication_counts if adj else panel_counts)[np.searchsorted(ids, item_id), labels.index(label)] += n
    decisive = np.array([label in declared.decisive for label in labels])
    outcome = np.full(len(ids), PENDING_CODE)
    panel_sizes = np.array([r[3] for r in items])
    required = np.array([r[4] for r in items])
    for panel, req in {(r[3], r[4]) for r in items}:
        rows_of = (panel_sizes == panel) & (required == req)
        outcome[rows_of] = decide_counts(panel_counts[rows_of], panel_counts[rows_of] + adjudication_counts[rows_of],
                                         adjudication_counts[rows_of].sum(axis=1), decisive, req, panel)
    names = {PENDING_CODE: "open", ADJUDICATE_CODE: "adjudicate", UNRESOLVED_CODE: "unresolved"}
    expected_state = np.array([names.get(int(c), "decided") for c in outcome])
    expected_decision = np.array(["" if c < 0 else labels[int(c)] for c in outcome])
    wrong = ((expected_state != np.array([r[1] for r in items]))
             | (expected_decision != np.array([r[2] for r in items])))
    states, counts = np.unique(expected_state, return_counts=True)
    return {"stage": stage, "n_items": len(ids), "outcomes": dict(zip(states.tolist(), counts.tolist())),
            "mismatched": ids[wrong].tolist()}


# -- random stores ---------------------------------------------------------------------------------
def store(rng, *, n_items: int = 240, n_raters: int = 9) -> list[WorkItem]:
    """Usability items on a train and a dev video in random order (so each split's item ids are
    interleaved), random policies, states and decisions (some corrupted), a few reopened; votes
    from distinct raters with missing times and adjudications, stored with ids out of table order."""
    users = get_user_model().objects.bulk_create(
        [get_user_model()(username=f"rater-{rng.integers(1 << 30)}-{i}", password="!") for i in range(n_raters)])
    runs = [run_factory(video=video_factory(split=split)) for split in ("train", "dev")]
    packed = {"frames": np.zeros(1, "<i4").tobytes(), "boxes": np.zeros((1, 4), "<f4").tobytes(),
              "scores": np.ones(1, "<f4").tobytes()}
    which = rng.integers(0, 2, n_items)
    trajectories = Trajectory.objects.bulk_create([
        Trajectory(run=runs[w], video=runs[w].video, track_id=i + 1, category="person", n_obs=1, first_frame=0,
                   last_frame=0, temporal_coverage=1.0, longest_run=1, median_area=1.0, abrupt_changes=0,
                   mean_score=1.0, **packed) for i, w in enumerate(which)])
    now = timezone.now()
    items = []
    for trajectory, w in zip(trajectories, which):
        panel = int(rng.choice([3, 3, 5]))
        state = str(rng.choice(STATES))
        items.append(WorkItem(stage="usability", video=runs[w].video, trajectory=trajectory, panel_size=panel,
                              required_votes=int(rng.integers(1, panel + 1)) if rng.random() < 0.3 else 2,
                              state=state, decision=str(rng.choice(LABELS[:2])) if state == "decided" else "",
                              reopened_at=now if rng.random() < 0.05 else None))
    items = WorkItem.objects.bulk_create(items)
    votes = []
    for item in items:
        n_panel = int(rng.integers(0, item.panel_size + 2)) if rng.random() < 0.3 else item.panel_size
        raters = rng.permutation(n_raters)[:min(n_panel + 1, n_raters)]
        for k, r in enumerate(raters):
            adjudication = k >= item.panel_size or (k == len(raters) - 1 and rng.random() < 0.2)
            votes.append(Vote(item=item, annotator=users[r], label=str(rng.choice(LABELS)),
                              is_adjudication=bool(adjudication), comment="checked" if adjudication else "",
                              time_spent_ms=None if rng.random() < 0.15 else int(rng.gamma(2.0, 3000))))
    first = (Vote.objects.order_by("-id").values_list("id", flat=True).first() or 0) + 1
    for vote, pk in zip(votes, first + rng.permutation(len(votes))):
        vote.pk = int(pk)
    Vote.objects.bulk_create(votes)
    with connection.cursor() as cursor:  # later votes take ids after these
        for statement in connection.ops.sequence_reset_sql(no_style(), [Vote]):
            cursor.execute(statement)
    return items


@pytest.mark.parametrize("seed", range(4))
def test_agreement_and_audit_match_the_orm_reading(seed):
    rng = np.random.default_rng(seed)
    store(rng)
    for split in (None, "train", "dev", "test"):
        # the full recomputation (the tallies are compared with it in test_agreement_tallies.py)
        assert agreement_stats(stage="usability", split=split, recompute=True) == orm_agreement_stats("usability", split)
    assert decisions_audit(stage="usability") == orm_decisions_audit("usability")
    columns = vote_columns(stage="usability", split="dev")
    expected = orm_rows(Vote.objects.filter(item__stage="usability", item__video__split_group__split="dev"))
    for key in ("item", "rater", "label", "is_adjudication"):
        assert np.array_equal(columns[key], expected[key]), key
    assert np.array_equal(columns["time_spent"], expected["time_spent"], equal_nan=True)


def test_no_items_and_no_votes():
    assert decisions_audit(stage="usability") == orm_decisions_audit("usability")
    assert agreement_stats(stage="usability") == orm_agreement_stats("usability", None)
    store(np.random.default_rng(9), n_items=6)
    assert agreement_stats(stage="usability", split="test") == orm_agreement_stats("usability", "test")


def test_a_label_outside_the_stage_is_refused_as_before():
    items = store(np.random.default_rng(3), n_items=30)
    voter = get_user_model().objects.create(username="stray", password="!")
    Vote.objects.create(item=items[0], annotator=voter, label="same")
    with pytest.raises(ValueError, match="has the label 'same', not one of usable, unusable, uncertain"):
        decisions_audit(stage="usability")
    with pytest.raises(ValueError):
        orm_decisions_audit("usability")
    with pytest.raises(ValueError, match="label must lie in 0..2"):
        agreement_stats(stage="usability")
    with pytest.raises(ValueError, match="label must lie in 0..2"):
        orm_agreement_stats("usability", None)


# -- the reader itself -----------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(3))
def test_columns_among_items_match_the_orm_filter(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    store(rng, n_items=120)
    for fraction in (0.9, 0.6, 0.2, 0.02):  # dense and sparse keys
        chosen = [pk for pk in WorkItem.objects.values_list("pk", flat=True) if rng.random() < fraction]
        parents = WorkItem.objects.filter(pk__in=chosen)
        keys = np.array(sorted(chosen), np.int64)
        position, vote_id, rater = integer_columns_among(Vote.objects.all(), "id", "annotator_id",
                                                         field="item_id", keys=keys, parents=parents)
        vote_id, position, rater = order_by_column(vote_id, position, rater)
        expected = np.array(list(Vote.objects.filter(item__in=parents).order_by("id")
                                 .values_list("id", "item_id", "annotator_id")), np.int64).reshape(-1, 3)
        assert np.array_equal(vote_id, expected[:, 0])
        assert np.array_equal(keys[position], expected[:, 1])
        assert np.array_equal(rater, expected[:, 2])
    # the portable path (no COPY) reads the same arrays; both refuse a NULL and read nothing as empty
    copied = order_by_column(*integer_columns(Vote.objects.all(), "id", "item_id"))
    assert Vote.objects.filter(time_spent_ms__isnull=True).exists()
    with pytest.raises(ValueError, match="NULL"):
        integer_columns(Vote.objects.all(), "id", "time_spent_ms")
    with pytest.raises(ValueError, match="NULL"):
        integer_columns(Vote.objects.all(), "time_spent_ms")
    assert [c.size for c in integer_columns(Vote.objects.filter(pk__in=[]), "id", "item_id")] == [0, 0]
    assert [c.size for c in integer_columns(Vote.objects.filter(pk=-1), "id")] == [0]
    monkeypatch.setattr("common.columns.connection.vendor", "sqlite")
    portable = order_by_column(*integer_columns(Vote.objects.all(), "id", "item_id"))
    assert all(np.array_equal(a, b) for a, b in zip(portable, copied, strict=True))
    with pytest.raises(ValueError, match="NULL"):
        integer_columns(Vote.objects.all(), "id", "time_spent_ms")
    assert [c.size for c in integer_columns(Vote.objects.filter(pk__in=[]), "id", "item_id")] == [0, 0]


def test_order_by_column_sorts_only_when_needed():
    rng = np.random.default_rng(0)
    key = rng.permutation(1000) * 7
    other = key * 3 + 1
    ordered_key, ordered_other = order_by_column(key, other)
    assert np.array_equal(ordered_key, np.sort(key)) and np.array_equal(ordered_other, ordered_key * 3 + 1)
    same = order_by_column(ordered_key, ordered_other)
    assert same[0] is ordered_key and same[1] is ordered_other


# -- the relation stage: one unit per candidate of a row ---------------------------------------------
def orm_relation_rows(items) -> AgreementRows:
    """The relation stage's agreement rows read one ORM row per judgment, in vote then judgment order."""
    seconds = Coalesce(Cast("vote__time_spent_ms", FloatField()) / 1000.0, Value(float("nan")),
                       output_field=FloatField())
    rows = list(RelationJudgment.objects.filter(vote__item__in=items.values("pk")).order_by("vote_id", "id")
                .values_list("vote__item_id", "trajectory_id", "vote__annotator_id", "label", "vote__is_adjudication",
                             "vote_id", seconds))
    table = np.array([(i, t, a, CATEGORY_OF[int(lab)], adj, v, s) for i, t, a, lab, adj, v, s in rows],
                     dtype=np.float64).reshape(-1, 7)                                     # [J, 7]
    _, unit = np.unique(table[:, :2].astype(np.int64), axis=0, return_inverse=True)
    _, vote_index, per_vote = np.unique(table[:, 5].astype(np.int64), return_inverse=True, return_counts=True)
    return AgreementRows(unit=unit.reshape(-1).astype(np.int64), rater=table[:, 2].astype(np.int64),
                         category=table[:, 3].astype(np.int64), is_adjudication=table[:, 4].astype(bool),
                         seconds=table[:, 6] / per_vote[vote_index])


def test_relation_rows_match_the_orm_reading(world, annotators):
    rows = relation_stage.STAGE.agreement_rows
    items = WorkItem.objects.filter(stage="relation")
    assert rows(items).unit.size == 0 and orm_relation_rows(items).unit.size == 0
    a, b = world.a, world.b
    for query, labels, second, minutes in ((world.qa, {a[0]: 1, a[1]: 1, a[2]: 0, a[3]: -1}, {a[1]: 0, a[3]: -1}, 8),
                                           (world.qb, {b[0]: 1, b[1]: 0, b[2]: -1, b[3]: 0}, None, None)):
        item = WorkItem.objects.get(stage="relation", query=query)
        seat(item, annotators[3])
        vote_cast(item_id=item.pk, annotator=annotators[3], label="reviewed", judgments=labels,
                  time_spent_ms=minutes and minutes * 1000, payload={"faithful": True, "natural": 4})
        item.refresh_from_db()
        if second is not None and item.disputed:
            seat(item, annotators[4])
            vote_cast(item_id=item.pk, annotator=annotators[4], label="reviewed", time_spent_ms=3000,
                      judgments={int(t): second.get(int(t), 1) for t in item.disputed})
    for chosen in (items, items.filter(query=world.qb), items.filter(query=world.qa)):
        new, old = rows(chosen), orm_relation_rows(chosen)
        for field in ("unit", "rater", "category", "is_adjudication"):
            assert np.array_equal(getattr(new, field), getattr(old, field)), field
        assert np.array_equal(new.seconds, old.seconds, equal_nan=True)
    assert rows(items).unit.size > 6
