"""SCOUT's data helpers: a snapshot's frozen features as observation-token tensors (one row per
track record), the rows of a batch, and the in-batch contrastive pairs. ActPair reuses them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from models.retrievers.scout.model import pad_tokens


@dataclass
class ObservationData:
    """A snapshot's frozen features as tensors: one row of observation tokens per track record."""

    rows: dict[tuple[int, int], int]             # record (track id, variant) -> row
    tokens: torch.Tensor                         # [R, n, d_in] observation tokens, zero-padded
    mask: torch.Tensor                           # [R, n] bool real observations
    text: object | None                          # models.retrievers.features.TextFeatures of the queries
    query_video: dict[int, int]                  # query id -> video id
    query_predicates: dict[int, list[dict]]      # query id -> its predicates


def observation_tokens(features, geometry: bool = True) -> np.ndarray:
    """One token per Fast observation of a ``models.retrievers.features.TrackFeatures``: the appearance
    vector ``a_t``, followed by the geometry ``g_t`` when ``geometry`` — ``[n_f, D_a (+ 8)]``."""
    parts = [np.asarray(features.appearance, np.float32)]
    if geometry:
        parts.append(np.asarray(features.geometry, np.float32))
    return np.concatenate(parts, axis=1)


def prepare_observations(extractor, snapshot, records=None, *, geometry: bool = True,
                         with_text: bool = True) -> ObservationData:
    """Frozen features of every stored track of ``snapshot`` (variant 0), of the extra ``records``
    (training variants) and of every query, packed as :class:`ObservationData`."""
    tracks = extractor.snapshot_tracks(snapshot, records)
    keys = sorted(tracks)
    if not keys:
        raise ValueError(f"snapshot {snapshot.split!r} has no tracks")
    tokens, mask = pad_tokens([torch.from_numpy(observation_tokens(tracks[k], geometry)) for k in keys],
                              extractor.config.n_fast_max)
    text = None
    if with_text and snapshot.queries:
        text = extractor.text_features([q.id for q in snapshot.queries], [q.text for q in snapshot.queries])
    return ObservationData(rows={k: i for i, k in enumerate(keys)}, tokens=tokens, mask=mask, text=text,
                           query_video={q.id: q.video_id for q in snapshot.queries},
                           query_predicates={q.id: list(q.predicates) for q in snapshot.queries})


def record_rows(data: ObservationData, records) -> torch.Tensor:
    try:
        return torch.as_tensor([data.rows[tuple(k)] for k in records], dtype=torch.long)
    except KeyError as exc:
        raise KeyError(f"record {exc.args[0]} was not prepared") from None


def query_rows(data: ObservationData, query_ids) -> np.ndarray:
    if data.text is None:
        raise ValueError("no query features were prepared (the snapshot has no queries)")
    return data.text.rows([int(q) for q in query_ids])


def contrastive_pairs(batch, within: slice | None = None) -> torch.Tensor:
    """Which groups of a ``models.training.batching.TrainBatch`` give an in-batch contrastive pair.

    Each group pairs its query with its clean target (its first column, ``batch.target_columns``).
    InfoNCE and SigLIP treat every other pair they score as a negative, so a group is left out
    (``False``) when its target is the target of an earlier kept group, or when a verified match
    links it to one (the query of one and the target of the other, ``relation == 1``): those would
    be false negatives. Unknown (⊥) pairs stay in-batch negatives, as in the papers. ``[B]`` bool.

    ``within`` (a slice of groups, e.g. a rank's share when the ranks' pairs are not gathered)
    restricts the choice to those groups, checked against each other only: the others are
    ``False``, and a conflict with a group outside cannot drop a group inside (the two are never
    scored together). Without it the whole batch is one set, the same on every rank.
    """
    b = len(batch.query_ids)
    columns = batch.target_columns                                          # [B]
    targets = [batch.records[j][0] for j in columns]
    match = (batch.relation[:, columns] == 1).tolist()                      # [B][B] query i, target j
    keep = torch.zeros(b, dtype=torch.bool)
    kept: list[int] = []
    for i in range(b)[within if within is not None else slice(None)]:
        if all(targets[i] != targets[j] and not match[i][j] and not match[j][i] for j in kept):
            keep[i] = True
            kept.append(i)
    return keep


def no_pair_loss(module: nn.Module) -> torch.Tensor:
    """A zero loss that still reaches every trained parameter of ``module`` (each gets a zero
    gradient): what a process returns when none of its groups gives a pair, so gradient
    synchronisation across processes (DistributedDataParallel's hooks, the trainer's all-reduce)
    sees the same parameters on every rank."""
    return 0.0 * sum(p.sum() for p in module.parameters() if p.requires_grad)
