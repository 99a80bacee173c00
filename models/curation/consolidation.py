"""Consolidation of duplicate trajectories of one video (DESIGN 2.4).

Input: the video's tracks and its decided duplicate-pair judgments, ``same`` and ``different``
(pairs still unresolved are in neither list and simply stay apart). Output: the duplicate groups,
the consolidated tracks, what was removed and why, and the merges that were refused.

Grouping rule. Groups are the connected components of confirmed ``same`` edges, except that a
merge which would put two trajectories with a confirmed ``different`` judgment into one group is
refused: transitivity never overrides ``different``. The ``same`` edges are applied one by one in
a fixed order, sorted by ``(min id, max id)``, with a union-find that keeps, per component, its
members and the tracks confirmed ``different`` from any of them. An edge whose union would join a
``different`` pair is not applied and is reported as a :class:`Conflict`, together with the
``different`` pairs it would have joined and the applied ``same`` edges that close the cycle, so
the caller can send all of them to adjudication.

The result depends on the order of the edges only through that sorted order: the same judgments,
listed in any order or orientation, give the same output. Which side of a conflict keeps its
merge is decided by track id, not by evidence (with ``1-2 same``, ``2-3 same``, ``1-3 different``,
track 2 joins track 1 and the edge ``2-3`` is refused). That is acceptable because the result of a
video with conflicts is provisional: its cycle goes to adjudication, and the pool is only frozen
once duplicates are resolved (DESIGN 2.5), i.e. once ``conflicts`` is empty. The alternative of
refusing every ``same`` edge of a component that contains a conflict is independent of ids, but
one bad judgment at the end of a long chain would then undo every well-supported merge of that
chain; and it gains nothing at freeze time, when there are no conflicts and both rules agree.

Consolidation rule. Within a group the representative is the highest-quality member: most
observations, then longest contiguous run, then lowest id. It keeps all its observations. Every
other member loses only its observations on frames the representative covers (an observation on
that exact frame); what remains stays a separate fragment with its own id and its original boxes,
never interpolated and never merged into the representative. A member with nothing left is
removed. Members are compared with the representative only, never with each other.

Pure Python/NumPy, no Django: the services call :func:`consolidate` and store its result.
"""
from __future__ import annotations

import operator
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from models.media.trajectory_ops import longest_run

Pair = tuple[int, int]

ROLE_REPRESENTATIVE = "representative"  # the member of a group that keeps all its observations
ROLE_FRAGMENT = "fragment"              # another member, with the observations it has left
ROLE_SINGLE = "single"                  # a track in no group, untouched
ROLE_REMOVED = "removed"                # a member all of whose frames the representative covers


@dataclass(frozen=True, eq=False)
class TrackObs:
    """The observations of one trajectory."""

    id: int
    frames: np.ndarray  # [N] int, strictly increasing
    boxes: np.ndarray   # [N, 4] float, xyxy in original pixels


@dataclass(frozen=True)
class Group:
    """Tracks joined by applied ``same`` edges (two or more)."""

    representative: int
    members: tuple[int, ...]  # sorted, representative included


@dataclass(frozen=True)
class Conflict:
    """A ``same`` edge that was refused because it would have joined ``different`` pairs."""

    edge: Pair                         # the refused ``same`` edge, (min id, max id)
    different_pairs: tuple[Pair, ...]  # confirmed ``different`` pairs the merge would have joined
    path_edges: tuple[Pair, ...]       # applied ``same`` edges that, with ``edge``, connect them

    def pairs_to_adjudicate(self) -> list[Pair]:
        """Every judgment on the cycle(s): at least one of them is wrong."""
        return sorted({self.edge, *self.different_pairs, *self.path_edges})


@dataclass
class Consolidation:
    groups: list[Group]                    # sorted by smallest member id
    kept: list[TrackObs]                   # output tracks, sorted by id, each with its source id
    removed: list[tuple[int, np.ndarray]]  # (track id, frames removed as covered), non-empty, by id
    lineage: list[dict]                    # one entry per input track, sorted by source id
    conflicts: list[Conflict]              # in the order the refused edges were met
    applied: list[Pair]                    # ``same`` edges that were applied, sorted


def quality_key(track: TrackObs) -> tuple[int, int, int]:
    """Sort key: the smallest key is the best representative."""
    return (-len(track.frames), -longest_run(track.frames), track.id)


def consolidate(tracks: Iterable[TrackObs], *, same_edges: Iterable[Pair],
                different_edges: Iterable[Pair]) -> Consolidation:
    """Group the tracks of one video by their decided duplicate judgments and consolidate each
    group (see the module docstring for both rules).

    ``lineage`` has one dict per input track: ``source_id``, ``representative`` (of its group; its
    own id for a single track), ``role`` (``representative`` | ``fragment`` | ``single`` |
    ``removed``), ``n_kept`` and ``n_removed``. Raises ``ValueError`` on malformed input.
    """
    by_id = _check_tracks(tracks)
    same = _check_edges(same_edges, by_id, "same")
    different = _check_edges(different_edges, by_id, "different")
    both = sorted(set(same) & set(different))
    if both:
        raise ValueError(f"pairs judged both same and different: {both}")

    components, applied, conflicts = _group(sorted(by_id), same, different)

    groups: list[Group] = []
    kept: list[TrackObs] = []
    removed: list[tuple[int, np.ndarray]] = []
    lineage: list[dict] = []
    for members in components:
        if len(members) == 1:
            t = by_id[members[0]]
            kept.append(_copy(t))
            lineage.append(_lineage(t.id, t.id, ROLE_SINGLE, len(t.frames), 0))
            continue
        rep = min((by_id[m] for m in members), key=quality_key)
        groups.append(Group(representative=rep.id, members=tuple(members)))
        for m in members:
            t = by_id[m]
            if m == rep.id:
                kept.append(_copy(t))
                lineage.append(_lineage(m, rep.id, ROLE_REPRESENTATIVE, len(t.frames), 0))
                continue
            covered = np.isin(t.frames, rep.frames, assume_unique=True)  # [N] bool
            n_removed = int(covered.sum())
            if n_removed:
                removed.append((m, t.frames[covered].copy()))
            if n_removed < len(t.frames):
                keep = ~covered
                kept.append(TrackObs(m, t.frames[keep].copy(), t.boxes[keep].copy()))
                lineage.append(_lineage(m, rep.id, ROLE_FRAGMENT, len(t.frames) - n_removed, n_removed))
            else:
                lineage.append(_lineage(m, rep.id, ROLE_REMOVED, 0, n_removed))

    return Consolidation(
        groups=sorted(groups, key=lambda g: g.members[0]),
        kept=sorted(kept, key=lambda t: t.id),
        removed=sorted(removed, key=lambda r: r[0]),
        lineage=sorted(lineage, key=lambda d: d["source_id"]),
        conflicts=conflicts,
        applied=applied,
    )


# -- grouping -----------------------------------------------------------------------------------
def _group(ids: list[int], same: list[Pair], different: list[Pair]
           ) -> tuple[list[list[int]], list[Pair], list[Conflict]]:
    """Components (sorted member lists, sorted by first member), applied edges, conflicts."""
    parent = {i: i for i in ids}
    members = {i: {i} for i in ids}                 # per root
    differs = {i: set() for i in ids}               # per track: tracks judged different from it
    for a, b in different:
        differs[a].add(b)
        differs[b].add(a)
    blocked = {i: set(differs[i]) for i in ids}     # per root: tracks different from any member
    adjacency: dict[int, list[int]] = {i: [] for i in ids}
    applied: list[Pair] = []
    conflicts: list[Conflict] = []

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in same:  # sorted by (min id, max id)
        ra, rb = find(a), find(b)
        if ra != rb:
            if len(members[ra]) < len(members[rb]):
                ra, rb = rb, ra  # merge the smaller component into the larger
            clash = members[rb] & blocked[ra]
            if clash:
                pairs = sorted({(min(x, y), max(x, y)) for x in clash for y in differs[x] & members[ra]})
                conflicts.append(Conflict(edge=(a, b), different_pairs=tuple(pairs),
                                          path_edges=_cycle_edges(adjacency, find, (a, b), pairs)))
                continue
            parent[rb] = ra
            members[ra] |= members.pop(rb)
            blocked[ra] |= blocked.pop(rb)
        # An edge inside one component is redundant but consistent: it is applied too.
        applied.append((a, b))
        adjacency[a].append(b)
        adjacency[b].append(a)

    components = sorted(sorted(m) for m in members.values())
    return components, applied, conflicts


def _cycle_edges(adjacency: dict[int, list[int]], find, edge: Pair, pairs: list[Pair]) -> tuple[Pair, ...]:
    """Applied edges on the shortest paths from each end of each ``different`` pair to the end
    of the refused edge in its component."""
    a, b = edge
    out: set[Pair] = set()
    for x, y in pairs:
        for node in (x, y):
            end = a if find(node) == find(a) else b
            out.update(_path(adjacency, node, end))
    return tuple(sorted(out))


def _path(adjacency: dict[int, list[int]], src: int, dst: int) -> list[Pair]:
    """Edges of a shortest path (breadth first, neighbours in id order) from ``src`` to ``dst``."""
    came = {src: src}
    queue = deque([src])
    while queue and dst not in came:
        node = queue.popleft()
        for nxt in sorted(adjacency[node]):
            if nxt not in came:
                came[nxt] = node
                queue.append(nxt)
    if dst not in came:  # cannot happen: both lie in one component of applied edges
        raise AssertionError(f"no applied path from {src} to {dst}")
    edges = []
    while dst != src:
        prev = came[dst]
        edges.append((min(prev, dst), max(prev, dst)))
        dst = prev
    return edges


# -- input checks -------------------------------------------------------------------------------
def _as_id(value, what: str) -> int:
    if isinstance(value, bool | np.bool_):
        raise ValueError(f"{what} must be an integer track id, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise ValueError(f"{what} must be an integer track id, got {value!r}") from None


def _check_tracks(tracks: Iterable[TrackObs]) -> dict[int, TrackObs]:
    by_id: dict[int, TrackObs] = {}
    for t in tracks:
        tid = _as_id(t.id, "track id")
        if tid in by_id:
            raise ValueError(f"track {tid} is listed twice")
        frames = np.asarray(t.frames)
        if frames.ndim != 1 or len(frames) == 0:
            raise ValueError(f"track {tid}: frames must be a non-empty 1-D array, got shape {list(frames.shape)}")
        if not np.issubdtype(frames.dtype, np.integer):
            raise ValueError(f"track {tid}: frame indices must be integers, got dtype {frames.dtype}")
        try:
            boxes = np.asarray(t.boxes, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"track {tid}: boxes must be numbers") from None
        if boxes.shape != (len(frames), 4):
            raise ValueError(f"track {tid}: boxes must have shape [{len(frames)}, 4] to match its "
                             f"{len(frames)} frames, got {list(boxes.shape)}")
        steps = np.diff(frames)
        bad = np.flatnonzero(steps <= 0)
        if len(bad):
            i = int(bad[0])
            what = "repeats" if steps[i] == 0 else "comes after"
            raise ValueError(f"track {tid}: frames must be strictly increasing; frame "
                             f"{int(frames[i + 1])} {what} frame {int(frames[i])}")
        by_id[tid] = TrackObs(tid, frames.astype(np.int64), boxes)
    return by_id


def _check_edges(edges: Iterable[Pair], known: dict[int, TrackObs], kind: str) -> list[Pair]:
    out: set[Pair] = set()
    for edge in edges:
        try:
            a, b = edge
        except (TypeError, ValueError):
            raise ValueError(f"{kind} edge {edge!r} is not a pair of track ids") from None
        a, b = _as_id(a, f"{kind} edge {edge!r}"), _as_id(b, f"{kind} edge {edge!r}")
        if a == b:
            raise ValueError(f"{kind} edge ({a}, {b}) joins track {a} to itself")
        unknown = [x for x in (a, b) if x not in known]
        if unknown:
            raise ValueError(f"{kind} edge ({a}, {b}) names track(s) {unknown} that are not among "
                             f"the {len(known)} tracks given")
        out.add((min(a, b), max(a, b)))
    return sorted(out)


def _copy(t: TrackObs) -> TrackObs:
    return TrackObs(t.id, t.frames.copy(), t.boxes.copy())


def _lineage(source_id: int, representative: int, role: str, n_kept: int, n_removed: int) -> dict:
    return {"source_id": source_id, "representative": representative, "role": role,
            "n_kept": n_kept, "n_removed": n_removed}
