"""SCOUT's VLM rerank term from a scorer: shortlisted trajectories in, ``attribute_vlm_score`` out.

:func:`vlm_term` scores one query text against a shortlist of trajectory ids with a scorer
(``models.backends.vlm.scoring``: heuristic, transformers or openai) and returns, per candidate,
``attribute_vlm_score(log_p_yes, appearance, action, scene)`` over the shortlist (½ the holistic
log P(yes) + ½ the geometric mean of the decomposed scores, each min-max normalised over the
shortlist, ``models.retrievers.rerank``) with the inputs it was computed from and the scorer's
counts for this call (one request per candidate). A value the scorer could not read enters as the
neutral value of ``ScoreResult.vlm_inputs`` (log P(yes) = log 0.5, a score of 50) and is counted
in ``counts.invalid``. :func:`vlm_term_rows` does it for ``[Q, M]`` shortlists and
gives the ``vlm`` array ``rerank_blend`` takes.

What is read (DESIGN 4.4): the query text, and for each trajectory its video (path and fps),
frames and boxes from the snapshot (a ``models.training.snapshot.RelationSnapshotData`` or its
``model_inputs()`` view; only ``tracks`` and ``videos`` are touched), nothing human-side.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from models.backends.vlm.scoring import ScoreCounts, Scorer, ScoreRequest, ScoreResult
from models.retrievers.rerank import attribute_vlm_score


@dataclass
class VLMTerm:
    """The VLM term of one query over its shortlist (candidates in the order given)."""

    values: np.ndarray                           # [M] attribute_vlm_score, in [0, 1]
    log_p_yes: np.ndarray                        # [M] holistic log P(yes) (neutral where unread)
    appearance: np.ndarray                       # [M] 0..100 (neutral where unread)
    action: np.ndarray                           # [M]
    scene: np.ndarray                            # [M]
    results: list[ScoreResult]                   # [M] the scorer's results
    counts: ScoreCounts                          # this call's requests, model calls and invalid marks


def score_requests(snapshot, query_text: str, trajectory_ids: Sequence[int]) -> list[ScoreRequest]:
    """One :class:`ScoreRequest` per trajectory id (tracks of ``snapshot``), in order; an id that
    is not a track of the snapshot is a ``KeyError``."""
    tracks = {t.id: t for t in snapshot.tracks}
    videos = {v.id: v for v in snapshot.videos}
    out = []
    for t in trajectory_ids:
        if int(t) not in tracks:
            raise KeyError(f"trajectory {t} is not a track of snapshot {snapshot.split!r}")
        track = tracks[int(t)]
        video = videos[track.video_id]
        out.append(ScoreRequest(query_text, video.path, track.frames, track.boxes, fps=video.fps,
                                trajectory_id=int(t)))
    return out


def vlm_term(scorer: Scorer, snapshot, query_text: str, trajectory_ids: Sequence[int]) -> VLMTerm:
    """Score ``query_text`` against each shortlisted trajectory (see the module docstring)."""
    counts = ScoreCounts()
    results = []
    for request in score_requests(snapshot, query_text, trajectory_ids):
        result = scorer.score(request)
        counts.add(result)
        results.append(result)
    inputs = np.array([r.vlm_inputs() for r in results], np.float64).reshape(-1, 4)   # [M, 4]
    lp, app, act, sce = inputs.T                                                      # [M] each
    return VLMTerm(values=attribute_vlm_score(lp, app, act, sce), log_p_yes=lp, appearance=app, action=act,
                   scene=sce, results=results, counts=counts)


def vlm_term_rows(scorer: Scorer, snapshot, query_texts: Sequence[str], shortlist_ids
                  ) -> tuple[np.ndarray, ScoreCounts]:
    """The VLM term ``[Q, M]`` for each query's shortlisted trajectory **ids** ``[Q, M]`` (row q
    scored against ``query_texts[q]``) and the counts of all ``Q · M`` requests. A shortlist of
    gallery column positions (what ``models.retrievers.rerank.fuse_and_rerank`` hands its
    ``rerank_scores``) must be mapped to ids first: ``gallery_ids[positions]``."""
    ids = np.asarray(shortlist_ids)
    if ids.ndim != 2 or len(ids) != len(query_texts):
        raise ValueError(f"shortlist_ids must be [Q, M] with Q = {len(query_texts)} queries, "
                         f"got shape {list(ids.shape)}")
    counts = ScoreCounts()
    rows = []
    for text, row in zip(query_texts, ids):
        term = vlm_term(scorer, snapshot, text, [int(t) for t in row])
        counts = counts.merged(term.counts)
        rows.append(term.values)
    return np.array(rows, np.float64).reshape(ids.shape), counts                      # [Q, M]
