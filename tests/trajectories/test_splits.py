from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from common.errors import ApplicationError, ConflictError
from tests.trajectories.factories import config_factory, video_factory
from trajectories.models import SplitGroup
from trajectories.services.proposals import proposal_run_create
from trajectories.services.splits import plan_splits, split_group_set_split, splits_assign

RATIOS = {"train": 0.6, "dev": 0.2, "test": 0.2}


def test_plan_is_seeded_and_deterministic():
    groups = [(f"g{i}", 1 + i % 4, None) for i in range(40)]
    assert plan_splits(groups, RATIOS, seed=3) == plan_splits(list(reversed(groups)), RATIOS, seed=3)
    assert plan_splits(groups, RATIOS, seed=3) != plan_splits(groups, RATIOS, seed=4)


@hsettings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(1, 6), min_size=10, max_size=60), seed=st.integers(0, 10**6),
       ratios=st.tuples(st.floats(0.05, 1), st.floats(0.05, 1), st.floats(0.05, 1)))
def test_plan_follows_ratios_within_one_group(sizes, seed, ratios):
    ratio = dict(zip(["train", "dev", "test"], ratios))
    groups = [(f"g{i}", n, None) for i, n in enumerate(sizes)]
    plan = plan_splits(groups, ratio, seed)
    assert set(plan) == {g[0] for g in groups}  # every group gets exactly one split
    total = sum(sizes)
    counts = {s: sum(n for name, n, _ in groups if plan[name] == s) for s in ratio}
    norm = sum(ratios)
    for s, r in ratio.items():
        # Greedy largest-deficit filling ends within one group of the target.
        assert abs(counts[s] - r / norm * total) <= max(sizes) + 1e-9


def test_fixed_groups_keep_their_split_and_count():
    groups = [("locked", 10, "test")] + [(f"g{i}", 1, None) for i in range(10)]
    plan = plan_splits(groups, {"train": 0.5, "dev": 0, "test": 0.5}, seed=0)
    assert "locked" not in plan
    assert set(plan.values()) == {"train"}  # test already has its half
    assert "dev" not in plan.values()       # a zero ratio never receives a group


@pytest.mark.django_db
def test_assign_preserves_groups_and_skips_assigned():
    for g in ("a", "a", "b", "c", "d", "e"):
        video_factory(group=g, split="")
    assignment = splits_assign(seed=1, ratios=RATIOS)
    assert set(assignment.result) == {"a", "b", "c", "d", "e"}
    # Both videos of group a share its split by construction: the split lives on the group.
    before = dict(SplitGroup.objects.values_list("name", "split"))
    again = splits_assign(seed=99, ratios=RATIOS)
    assert again.result == {}  # nothing unassigned left
    assert dict(SplitGroup.objects.values_list("name", "split")) == before


@pytest.mark.django_db
def test_bad_ratios_are_refused():
    video_factory(group="a", split="")
    with pytest.raises(ApplicationError, match="unknown split"):
        splits_assign(seed=0, ratios={"train": 1, "val": 1})
    with pytest.raises(ApplicationError, match="non-negative"):
        splits_assign(seed=0, ratios={"train": -1, "test": 2})


@pytest.mark.django_db
def test_split_is_locked_by_the_first_proposal_run():
    video = video_factory(group="locked-group", split="dev")
    proposal_run_create(video=video, config=config_factory(), enqueue=False)
    group = SplitGroup.objects.get(name="locked-group")
    assert group.locked_at is not None
    with pytest.raises(ConflictError) as err:
        split_group_set_split(group=group, split="train")
    assert err.value.code == "split_locked" and "proposal run" in err.value.message
    # reassign never touches a locked group
    splits_assign(seed=5, ratios={"train": 1}, reassign=True)
    assert SplitGroup.objects.get(name="locked-group").split == "dev"


@pytest.mark.django_db
def test_proposal_run_needs_an_assigned_split():
    video = video_factory(group="nosplit", split="")
    with pytest.raises(ConflictError) as err:
        proposal_run_create(video=video, config=config_factory(), enqueue=False)
    assert err.value.code == "split_unassigned"
    assert SplitGroup.objects.get(name="nosplit").locked_at is None


@pytest.mark.django_db
def test_split_change_api_answers_409_when_locked(manager_client):
    video = video_factory(group="g", split="train")
    group = video.split_group
    r = manager_client.patch(f"/api/split-groups/{group.pk}/", {"split": "test"}, format="json")
    assert r.status_code == 200 and r.json()["split"] == "test"
    proposal_run_create(video=video, config=config_factory(), enqueue=False)
    r = manager_client.patch(f"/api/split-groups/{group.pk}/", {"split": "dev"}, format="json")
    assert r.status_code == 409
    assert r.json()["code"] == "split_locked" and "can no longer change" in r.json()["message"]
    assert SplitGroup.objects.get(pk=group.pk).split == "test"


@pytest.mark.django_db
def test_assign_api(manager_client, client_for, annotator):
    video_factory(group="x", split="")
    assert client_for(annotator).post("/api/splits/assign/", {"seed": 1}, format="json").status_code == 403
    r = manager_client.post("/api/splits/assign/", {"seed": 1, "ratios": {"train": 1}}, format="json")
    assert r.status_code == 201 and r.json()["result"] == {"x": "train"}


@pytest.mark.django_db
def test_the_database_refuses_to_change_a_locked_split():
    from django.db import IntegrityError, transaction
    from django.utils import timezone

    video = video_factory(group="locked", split="train")
    SplitGroup.objects.filter(pk=video.split_group_id).update(locked_at=timezone.now())
    with pytest.raises(IntegrityError), transaction.atomic():
        SplitGroup.objects.filter(pk=video.split_group_id).update(split="test")
    with pytest.raises(IntegrityError), transaction.atomic():
        SplitGroup.objects.filter(pk=video.split_group_id).update(locked_at=None)
    SplitGroup.objects.filter(pk=video.split_group_id).update(name="renamed")  # other fields may change
    assert SplitGroup.objects.get(pk=video.split_group_id).split == "train"


@pytest.mark.django_db
@pytest.mark.parametrize("fields", [{"split": "val"}, {"split": "", "locked_at": "2026-01-01T00:00:00Z"}])
def test_split_group_constraints_hold_without_the_service(fields):
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError), transaction.atomic():
        SplitGroup.objects.create(name="raw", **fields)
