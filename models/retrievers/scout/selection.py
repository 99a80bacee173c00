"""Choosing SCOUT's frozen text target for a snapshot before any training (SCOUT paper, Sec. 5.2):
the alignment lenses of :mod:`models.retrievers.scout.alignment` between the snapshot's frozen
trajectory features and each candidate text encoder's query embeddings.

Pairs are the snapshot's verified matches (query, trajectory), pseudo-labels left out: ``X_i``
is the trajectory's observation tokens (the frozen appearance ``a_t``, with ``g_t`` when
``geometry``; SCOUT's own visual input) mean-pooled, ``Y_i`` the candidate's pooled embedding of
the query's text. Training may read verified relations: that is what they are for.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from models.retrievers.scout.alignment import AlignmentReport, alignment_report, pool_tokens


def match_pairs(snapshot) -> list[tuple[int, int]]:
    """``(query_id, trajectory_id)`` of every verified match of ``snapshot``, sorted."""
    return sorted({(r.query_id, r.trajectory_id) for r in snapshot.relations if r.label == 1 and not r.pseudo})


def check_candidates(text_encoders: Mapping[str, dict]) -> dict[str, dict]:
    """Candidate ``{name: TextEncoderConfig dict}`` as plain, validated configs (ValueError otherwise)."""
    from models.backends.encoders import TextEncoderConfig

    if not isinstance(text_encoders, Mapping) or not text_encoders:
        raise ValueError("text_encoders must be a non-empty object {name: TextEncoderConfig}")
    out = {}
    for name, config in text_encoders.items():
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"candidate names must be non-empty strings, got {name!r}")
        try:
            out[name] = TextEncoderConfig.from_dict(config).to_dict()
        except (TypeError, ValueError) as exc:
            raise ValueError(f"candidate {name!r}: {exc}") from None
    return out


def snapshot_alignment(snapshot, text_encoders: Mapping[str, dict], *, appearance: dict | None = None,
                       features: dict | None = None, geometry: bool = True, k: int = 10, alpha: float = 1.0,
                       n_folds: int = 5, seed: int = 0, cache_dir: str | None = None) -> AlignmentReport:
    """Rank the candidate text encoders for ``snapshot`` (a ``RelationSnapshotData``) by how well
    their query embeddings align with the frozen trajectory features (module docstring).

    ``appearance`` is the ImageEncoderConfig and ``features`` the FeatureConfig of the visual side
    (SCOUT's defaults: handcrafted crops). Refused with ValueError: an unknown encoder key, fewer
    than ``k + 1`` pairs or fewer pairs than ``n_folds``. The report's ``params`` add the pair count,
    the encoders' names and the visual side."""
    from dataclasses import replace

    from models.backends.encoders import (
        ImageEncoderConfig,
        TextEncoderConfig,
        build_image_encoder,
        build_text_encoder,
    )
    from models.retrievers.features import FeatureConfig, FeatureExtractor
    from models.retrievers.scout.data import observation_tokens

    candidates = check_candidates(text_encoders)
    fcfg = FeatureConfig.from_dict({"fast_input": "crops", **(features or {})})
    stored_features = fcfg.to_dict()
    fcfg = replace(fcfg, cache_dir=cache_dir or fcfg.cache_dir)
    image_cfg = ImageEncoderConfig.from_dict(appearance or {})
    pairs = match_pairs(snapshot)
    if len(pairs) < max(k + 1, n_folds, 2):
        raise ValueError(f"the snapshot has {len(pairs)} verified match pairs; k = {k} needs at least {k + 1} "
                         f"and {n_folds} folds at least {n_folds}")
    extractor = FeatureExtractor(fcfg, build_image_encoder(image_cfg))
    tracks = extractor.snapshot_tracks(snapshot)
    pooled = {tid: pool_tokens(torch.from_numpy(observation_tokens(tracks[(tid, 0)], geometry))[None])[0]
              for tid in sorted({t for _, t in pairs})}
    X = torch.stack([pooled[t] for _, t in pairs]).numpy()                                # [N, d_x]
    texts = {q.id: q.text for q in snapshot.queries}
    qids = sorted({q for q, _ in pairs})
    ys, names = {}, {}
    for name, config in candidates.items():
        encoder = build_text_encoder(TextEncoderConfig.from_dict(config))
        text = FeatureExtractor(fcfg, extractor.fast, text=encoder).text_features(qids, [texts[q] for q in qids])
        rows = text.rows([q for q, _ in pairs])
        ys[name] = np.asarray(text.pooled, dtype=np.float64)[rows]                       # [N, d_y]
        names[name] = encoder.name
    report = alignment_report(X, ys, k=k, alpha=alpha, n_folds=n_folds, seed=seed)
    report.params.update({"encoders": names, "appearance": image_cfg.to_dict(), "features": stored_features,
                          "geometry": geometry, "d_x": int(X.shape[1])})
    return report
