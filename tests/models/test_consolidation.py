from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from models.curation.consolidation import Conflict, Group, TrackObs, consolidate


def obs(tid, frames, seed=None):
    """A track on ``frames`` whose boxes differ per (track, frame), so a moved or made-up
    observation shows."""
    f = np.asarray(frames, dtype=np.int64)
    x = 1000.0 * tid + f.astype(np.float64) + (0.0 if seed is None else seed)
    return TrackObs(tid, f, np.stack([x, x / 2, x + 10, x / 2 + 20], axis=1))


def by_id(result):
    return {t.id: t for t in result.kept}


def roles(result):
    return {d["source_id"]: d["role"] for d in result.lineage}


# -- grouping ------------------------------------------------------------------------------------
def test_chain_of_same_edges_makes_one_group():
    tracks = [obs(1, range(0, 10)), obs(2, range(10, 15)), obs(3, range(15, 18))]
    r = consolidate(tracks, same_edges=[(2, 3), (1, 2)], different_edges=[])
    assert r.groups == [Group(representative=1, members=(1, 2, 3))]
    assert r.applied == [(1, 2), (2, 3)]
    assert r.conflicts == []
    # Disjoint frames: nothing is covered, the other members stay as fragments in full.
    assert roles(r) == {1: "representative", 2: "fragment", 3: "fragment"}
    assert r.removed == []


def test_different_pair_refuses_the_merge_that_would_join_it():
    tracks = [obs(1, range(0, 10)), obs(2, range(5, 12)), obs(3, range(8, 20))]
    r = consolidate(tracks, same_edges=[(1, 2), (2, 3)], different_edges=[(3, 1)])
    # (1, 2) comes first in the sorted order and is applied; (2, 3) would put 1 and 3 together.
    assert r.applied == [(1, 2)]
    assert r.conflicts == [Conflict(edge=(2, 3), different_pairs=((1, 3),), path_edges=((1, 2),))]
    assert r.conflicts[0].pairs_to_adjudicate() == [(1, 2), (1, 3), (2, 3)]
    assert r.groups == [Group(representative=1, members=(1, 2))]
    assert roles(r)[3] == "single"
    assert np.array_equal(by_id(r)[3].frames, np.arange(8, 20))


def test_conflict_reports_the_different_pair_away_from_the_refused_edge_and_the_path():
    tracks = [obs(i, range(10 * i, 10 * i + 5)) for i in (1, 2, 3, 4)]
    r = consolidate(tracks, same_edges=[(3, 4), (1, 2), (2, 3)], different_edges=[(1, 4)])
    assert r.applied == [(1, 2), (2, 3)]
    (c,) = r.conflicts
    assert c.edge == (3, 4)
    assert c.different_pairs == ((1, 4),)
    assert c.path_edges == ((1, 2), (2, 3))
    assert r.groups == [Group(1, (1, 2, 3))]


def test_later_edges_still_merge_around_a_refused_one():
    tracks = [obs(i, [i]) for i in (1, 2, 3, 4)]
    r = consolidate(tracks, same_edges=[(1, 2), (2, 3), (3, 4)], different_edges=[(1, 3)])
    # (2, 3) is refused, then (3, 4) joins two components with no different pair between them.
    assert r.applied == [(1, 2), (3, 4)]
    assert [c.edge for c in r.conflicts] == [(2, 3)]
    assert [g.members for g in r.groups] == [(1, 2), (3, 4)]


def test_redundant_edge_inside_a_group_is_applied_and_unresolved_pairs_stay_apart():
    tracks = [obs(i, [i]) for i in (1, 2, 3, 4)]
    r = consolidate(tracks, same_edges=[(1, 2), (2, 3), (1, 3)], different_edges=[])
    assert r.applied == [(1, 2), (1, 3), (2, 3)]
    assert [g.members for g in r.groups] == [(1, 2, 3)]
    assert roles(r)[4] == "single"


# -- representative ------------------------------------------------------------------------------
def test_representative_most_observations_beats_longer_run_and_lower_id():
    a = obs(1, [0, 1, 2, 3, 10])          # 5 observations, run 4
    b = obs(2, [0, 2, 4, 6, 8, 10])       # 6 observations, run 1
    r = consolidate([a, b], same_edges=[(1, 2)], different_edges=[])
    assert r.groups[0].representative == 2


def test_representative_equal_counts_longest_run_wins():
    a = obs(1, [0, 2, 4, 6])              # run 1
    b = obs(2, [0, 1, 2, 9])              # run 3
    r = consolidate([a, b], same_edges=[(1, 2)], different_edges=[])
    assert r.groups[0].representative == 2


def test_representative_equal_counts_and_runs_lowest_id_wins():
    a = obs(7, [0, 1, 5])
    b = obs(3, [2, 3, 9])
    r = consolidate([a, b], same_edges=[(7, 3)], different_edges=[])
    assert r.groups[0] == Group(representative=3, members=(3, 7))


# -- consolidation -------------------------------------------------------------------------------
def test_partial_coverage_leaves_a_fragment_with_its_original_boxes():
    rep = obs(1, range(0, 10))
    other = obs(2, range(5, 13))
    r = consolidate([other, rep], same_edges=[(1, 2)], different_edges=[])
    kept = by_id(r)
    assert np.array_equal(kept[1].frames, rep.frames) and np.array_equal(kept[1].boxes, rep.boxes)
    assert np.array_equal(kept[2].frames, [10, 11, 12])
    assert np.array_equal(kept[2].boxes, other.boxes[5:])  # not interpolated, not moved
    assert [(tid, f.tolist()) for tid, f in r.removed] == [(2, [5, 6, 7, 8, 9])]
    assert r.lineage == [
        {"source_id": 1, "representative": 1, "role": "representative", "n_kept": 10, "n_removed": 0},
        {"source_id": 2, "representative": 1, "role": "fragment", "n_kept": 3, "n_removed": 5},
    ]


def test_gap_in_the_representative_is_not_filled_from_the_member():
    rep = obs(1, [0, 1, 2, 4, 5, 6])      # no frame 3
    other = obs(2, [2, 3, 4])
    r = consolidate([rep, other], same_edges=[(1, 2)], different_edges=[])
    assert np.array_equal(by_id(r)[1].frames, [0, 1, 2, 4, 5, 6])
    assert np.array_equal(by_id(r)[2].frames, [3])
    assert np.array_equal(by_id(r)[2].boxes, other.boxes[[1]])


def test_full_coverage_removes_the_track():
    rep = obs(1, range(0, 10))
    inside = obs(2, [2, 3, 7])
    r = consolidate([rep, inside], same_edges=[(1, 2)], different_edges=[])
    assert [t.id for t in r.kept] == [1]
    assert [(tid, f.tolist()) for tid, f in r.removed] == [(2, [2, 3, 7])]
    assert r.lineage[1] == {"source_id": 2, "representative": 1, "role": "removed",
                            "n_kept": 0, "n_removed": 3}


def test_members_are_compared_with_the_representative_only():
    rep = obs(1, range(0, 10))
    b = obs(2, [8, 9, 10, 11])
    c = obs(3, [10, 11, 12])              # overlaps b on 10-11, not the representative
    r = consolidate([rep, b, c], same_edges=[(1, 2), (1, 3)], different_edges=[])
    assert np.array_equal(by_id(r)[2].frames, [10, 11])
    assert np.array_equal(by_id(r)[3].frames, [10, 11, 12])


def test_input_arrays_are_not_changed_or_shared():
    rep, other = obs(1, range(0, 5)), obs(2, range(3, 8))
    before = [(t.frames.copy(), t.boxes.copy()) for t in (rep, other)]
    r = consolidate([rep, other], same_edges=[(1, 2)], different_edges=[])
    for t in r.kept:
        t.boxes[:] = -1
    for t, (f, b) in zip((rep, other), before):
        assert np.array_equal(t.frames, f) and np.array_equal(t.boxes, b)


# -- bad input -----------------------------------------------------------------------------------
@pytest.mark.parametrize(("tracks", "same", "different", "message"), [
    ([obs(1, [0]), obs(2, [1])], [(1, 3)], [], r"same edge \(1, 3\) names track\(s\) \[3\]"),
    ([obs(1, [0]), obs(2, [1])], [], [(9, 8)], r"different edge \(9, 8\) names track\(s\) \[9, 8\]"),
    ([obs(1, [0]), obs(2, [1])], [(2, 2)], [], r"joins track 2 to itself"),
    ([obs(1, [0]), obs(2, [1])], [(1, 2)], [(2, 1)], r"both same and different: \[\(1, 2\)\]"),
    ([obs(1, [0]), obs(2, [1])], [(1, 2, 3)], [], r"not a pair of track ids"),
    ([obs(1, [0]), obs(2, [1])], [(1, "2")], [], r"integer track id"),
    ([obs(1, [0]), obs(2, [1])], [(True, 2)], [], r"integer track id"),
    ([obs(1, [0]), obs(1, [1])], [], [], r"track 1 is listed twice"),
    ([TrackObs(1, np.array([0, 2, 1]), np.zeros((3, 4)))], [], [], r"frame 1 comes after frame 2"),
    ([TrackObs(1, np.array([0, 2, 2]), np.zeros((3, 4)))], [], [], r"frame 2 repeats frame 2"),
    ([TrackObs(1, np.array([0, 1]), np.zeros((3, 4)))], [], [], r"shape \[2, 4\].*got \[3, 4\]"),
    ([TrackObs(1, np.array([0, 1]), np.zeros((2, 5)))], [], [], r"shape \[2, 4\].*got \[2, 5\]"),
    ([TrackObs(1, np.array([0.0, 1.0]), np.zeros((2, 4)))], [], [], r"must be integers"),
    ([TrackObs(1, np.array([], dtype=int), np.zeros((0, 4)))], [], [], r"non-empty 1-D"),
    ([TrackObs(1, np.array([[0, 1]]), np.zeros((2, 4)))], [], [], r"non-empty 1-D"),
])
def test_bad_input_is_refused(tracks, same, different, message):
    with pytest.raises(ValueError, match=message):
        consolidate(tracks, same_edges=same, different_edges=different)


# -- properties ----------------------------------------------------------------------------------
def slow_longest_run(frames):
    best = run = 0
    prev = None
    for f in frames:
        run = run + 1 if prev is not None and f == prev + 1 else 1
        best = max(best, run)
        prev = f
    return best


def slow_components(ids, edges):
    """Connected components by repeated relabelling (no union-find)."""
    label = {i: i for i in ids}
    changed = True
    while changed:
        changed = False
        for a, b in edges:
            low = min(label[a], label[b])
            if label[a] != low or label[b] != low:
                label[a] = label[b] = low
                changed = True
    comps = {}
    for i in ids:
        comps.setdefault(label[i], set()).add(i)
    return {i: frozenset(comps[label[i]]) for i in ids}


def slow_greedy(ids, same, different):
    """Reference for the grouping rule: walk the sorted same edges, recomputing the components
    of the applied edges from scratch before each one."""
    different = {tuple(sorted(p)) for p in different}
    applied = []
    for edge in sorted({tuple(sorted(e)) for e in same}):
        comp = slow_components(ids, applied)
        merged = comp[edge[0]] | comp[edge[1]]
        if not any(p in different for p in itertools.combinations(sorted(merged), 2)):
            applied.append(edge)
    return applied


@st.composite
def scenes(draw):
    ids = draw(st.lists(st.integers(0, 30), min_size=1, max_size=8, unique=True))
    tracks = []
    for tid in ids:
        if draw(st.booleans()):
            start = draw(st.integers(0, 15))
            frames = list(range(start, start + draw(st.integers(1, 10))))
        else:
            frames = sorted(draw(st.sets(st.integers(0, 25), min_size=1, max_size=12)))
        seed = draw(st.floats(0, 1, allow_nan=False))
        tracks.append(obs(tid, frames, seed))
    pairs = list(itertools.combinations(sorted(ids), 2))
    labels = draw(st.lists(st.sampled_from([None, None, "same", "same", "different"]),
                           min_size=len(pairs), max_size=len(pairs)))
    same = [p for p, lab in zip(pairs, labels) if lab == "same"]
    different = [p for p, lab in zip(pairs, labels) if lab == "different"]
    return tracks, same, different


def canonical(r):
    return (
        r.groups,
        [(t.id, t.frames.tolist(), t.boxes.tolist()) for t in r.kept],
        [(tid, f.tolist()) for tid, f in r.removed],
        r.lineage, r.conflicts, r.applied,
    )


@hsettings(max_examples=300, deadline=None)
@given(scenes())
def test_consolidation_properties(scene):
    tracks, same, different = scene
    r = consolidate(tracks, same_edges=same, different_edges=different)
    ids = [t.id for t in tracks]
    inputs = {t.id: t for t in tracks}
    different_set = set(different)
    group_of = {m: g for g in r.groups for m in g.members}

    # (1) No group contains a confirmed different pair.
    for g in r.groups:
        assert not any(p in different_set for p in itertools.combinations(g.members, 2))

    # (2) Every input observation is kept exactly once or removed as covered, never both.
    kept_obs = [(t.id, int(f)) for t in r.kept for f in t.frames]
    removed_obs = [(tid, int(f)) for tid, fs in r.removed for f in fs]
    assert len(set(kept_obs)) == len(kept_obs)
    assert len(set(removed_obs)) == len(removed_obs)
    assert not set(kept_obs) & set(removed_obs)
    assert set(kept_obs) | set(removed_obs) == {(t.id, int(f)) for t in tracks for f in t.frames}
    assert len({t.id for t in r.kept}) == len(r.kept)

    # (3) Every removed frame is covered by the representative of the track's group.
    for tid, fs in r.removed:
        assert len(fs) > 0
        g = group_of[tid]
        assert g.representative != tid
        assert set(fs.tolist()) <= set(inputs[g.representative].frames.tolist())

    # (4) Kept observations are input observations with their input boxes; the representative
    # and every untouched track come through whole.
    for t in r.kept:
        src = inputs[t.id]
        idx = np.searchsorted(src.frames, t.frames)
        assert np.array_equal(src.frames[idx], t.frames)
        assert np.array_equal(src.boxes[idx], t.boxes)
        if t.id not in group_of or group_of[t.id].representative == t.id:
            assert np.array_equal(src.frames, t.frames)
    # ... and a member loses exactly its frames the representative covers.
    for m, g in group_of.items():
        if m != g.representative:
            covered = set(inputs[m].frames.tolist()) & set(inputs[g.representative].frames.tolist())
            removed_here = {f for tid, f in removed_obs if tid == m}
            assert removed_here == covered

    # (5) Groups are exactly the components of the applied edges; applied and refused edges
    # split the same edges; the grouping is the greedy rule, and a refused edge would still
    # join a different pair.
    comp = slow_components(ids, r.applied)
    assert sorted(g.members for g in r.groups) == sorted(
        tuple(sorted(c)) for c in set(comp.values()) if len(c) > 1)
    refused = [c.edge for c in r.conflicts]
    assert sorted(r.applied + refused) == sorted(same)
    assert not set(r.applied) & set(refused)
    assert r.applied == slow_greedy(ids, same, different)
    for c in r.conflicts:
        a, b = c.edge
        assert comp[a] != comp[b]
        assert c.different_pairs
        for x, y in c.different_pairs:
            assert (x, y) in different_set
            assert {comp[x], comp[y]} == {comp[a], comp[b]}
        # The path edges with the refused edge connect both ends of every different pair.
        path_comp = slow_components(ids, [*c.path_edges, c.edge])
        assert set(c.path_edges) <= set(r.applied)
        for x, y in c.different_pairs:
            assert path_comp[x] == path_comp[y]

    # Representative: most observations, then longest run, then lowest id (plain loop).
    for g in r.groups:
        best = min(g.members, key=lambda m: (-len(inputs[m].frames),
                                             -slow_longest_run(inputs[m].frames.tolist()), m))
        assert g.representative == best

    # Lineage: one entry per input track, consistent with kept and removed.
    assert [d["source_id"] for d in r.lineage] == sorted(ids)
    kept_n = {t.id: len(t.frames) for t in r.kept}
    removed_n = {tid: len(fs) for tid, fs in r.removed}
    for d in r.lineage:
        sid = d["source_id"]
        assert d["n_kept"] == kept_n.get(sid, 0)
        assert d["n_removed"] == removed_n.get(sid, 0)
        assert d["n_kept"] + d["n_removed"] == len(inputs[sid].frames)
        g = group_of.get(sid)
        assert d["representative"] == (g.representative if g else sid)
        expected = ("single" if g is None else "representative" if g.representative == sid
                    else "removed" if d["n_kept"] == 0 else "fragment")
        assert d["role"] == expected


@hsettings(max_examples=150, deadline=None)
@given(scenes(), st.randoms(use_true_random=False))
def test_consolidation_is_deterministic_under_shuffled_input(scene, rnd: random.Random):
    tracks, same, different = scene
    expected = canonical(consolidate(tracks, same_edges=same, different_edges=different))

    def shuffled(edges):
        edges = [(b, a) if rnd.random() < 0.5 else (a, b) for a, b in edges]
        edges = edges + [e[::-1] for e in edges if rnd.random() < 0.3]  # repeats, either way
        rnd.shuffle(edges)
        return edges

    tracks2 = list(tracks)
    rnd.shuffle(tracks2)
    again = consolidate(tracks2, same_edges=shuffled(same), different_edges=shuffled(different))
    assert canonical(again) == expected


@hsettings(max_examples=100, deadline=None)
@given(scenes())
def test_without_different_edges_groups_are_the_connected_components(scene):
    tracks, same, _ = scene
    r = consolidate(tracks, same_edges=same, different_edges=[])
    comp = slow_components([t.id for t in tracks], same)
    assert r.conflicts == []
    assert sorted(g.members for g in r.groups) == sorted(
        tuple(sorted(c)) for c in set(comp.values()) if len(c) > 1)
