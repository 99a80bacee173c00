"""Split assignment (DESIGN 2.1): seeded, ratio-driven, group-preserving, locked by proposals."""
from __future__ import annotations

import random

from django.db import transaction
from django.db.models import Count

from common.errors import ApplicationError, ConflictError
from trajectories.models import Split, SplitAssignment, SplitGroup

SPLITS = [Split.TRAIN.value, Split.DEV.value, Split.TEST.value]


def _validate_ratios(ratios: dict[str, float]) -> dict[str, float]:
    unknown = set(ratios) - set(SPLITS)
    if unknown:
        raise ApplicationError(f"unknown split(s) {sorted(unknown)}; use {SPLITS}", code="invalid_ratios")
    values = {s: float(ratios.get(s, 0.0)) for s in SPLITS}
    if any(v < 0 or v != v for v in values.values()) or sum(values.values()) <= 0:
        raise ApplicationError("ratios must be non-negative numbers with a positive sum", code="invalid_ratios")
    total = sum(values.values())
    return {s: v / total for s, v in values.items()}


def plan_splits(groups: list[tuple[str, int, str | None]], ratios: dict[str, float], seed: int) -> dict[str, str]:
    """Choose a split for each unfixed group so that video counts follow ``ratios``.

    ``groups``: (name, video count, fixed split or None). Fixed groups keep their split and count
    toward the totals. Free groups are visited in a seeded random order, largest first (ties
    keep the seeded order), and each goes to the split furthest below its target share (the
    largest deficit); the result depends only on the groups, the ratios and the seed.
    """
    ratios = _validate_ratios(ratios)
    rng = random.Random(seed)
    free = [g for g in sorted(groups) if g[2] is None]
    rng.shuffle(free)
    free.sort(key=lambda g: -g[1])  # stable: keeps the seeded order among equal sizes
    total = sum(n for _, n, _ in groups) or 1
    have = {s: 0 for s in SPLITS}
    for _, n, split in groups:
        if split is not None:
            have[split] += n
    plan: dict[str, str] = {}
    for name, n, _ in free:
        # The split with the largest deficit (target minus current count); ties go to the
        # earlier split in train/dev/test order. Splits with ratio 0 never receive a group.
        best = max((s for s in SPLITS if ratios[s] > 0), key=lambda s: (ratios[s] * total - have[s], -SPLITS.index(s)))
        plan[name] = best
        have[best] += n
    return plan


@transaction.atomic
def splits_assign(*, seed: int, ratios: dict[str, float], created_by=None, reassign: bool = False) -> SplitAssignment:
    """Assign train/dev/test to split groups.

    By default only unassigned groups are assigned; ``reassign`` also re-draws assigned groups
    that are not locked. Locked groups (a video with a proposal run) never change.
    Locks every split group row (``select_for_update``) so a proposal run cannot lock a group
    between the plan and the write.
    """
    ratios = _validate_ratios(ratios)
    rows = list(SplitGroup.objects.select_for_update().order_by("name"))
    counts = dict(SplitGroup.objects.annotate(n=Count("videos")).values_list("pk", "n"))
    if not rows:
        raise ApplicationError("there are no split groups yet; import videos first", code="nothing_to_assign")
    groups = []
    for g in rows:
        fixed = g.split if (g.locked_at is not None or (g.split and not reassign)) else None
        groups.append((g.name, counts.get(g.pk, 0), fixed))
    plan = plan_splits(groups, ratios, seed)
    assignment = SplitAssignment.objects.create(seed=seed, ratios=ratios, result=plan, created_by=created_by)
    for g in rows:
        if g.name in plan:
            g.split = plan[g.name]
            g.assignment = assignment
            g.save(update_fields=["split", "assignment"])
    return assignment


@transaction.atomic
def split_group_set_split(*, group: SplitGroup, split: str) -> SplitGroup:
    """Set one group's split by hand; refused with 409 once the group is locked."""
    if split not in SPLITS:
        raise ApplicationError(f"unknown split {split!r}; use {SPLITS}", code="invalid_split")
    group = SplitGroup.objects.select_for_update().get(pk=group.pk)
    if group.locked_at is not None and group.split != split:
        raise ConflictError(
            f"split group {group.name!r} is locked to {group.split!r} since {group.locked_at:%Y-%m-%d %H:%M} UTC: "
            "one of its videos already has a proposal run, so its split can no longer change",
            code="split_locked", extra={"group": group.name, "split": group.split},
        )
    group.split = split
    group.save(update_fields=["split"])
    return group
