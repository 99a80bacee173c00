"""VTrajEmbed's prepared data: a snapshot's frozen track and text features, and the padded
Fast/Slow tensors (:func:`pack_tracks`) the model reads.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch

from models.retrievers.features import (
    GEOMETRY_DIM,
    RecordKey,
    TextFeatures,
    TrackFeatures,
)


# -- prepared data ------------------------------------------------------------------------------------
@dataclass
class VTrajEmbedData:
    """A snapshot's frozen features packed as tensors (rows by record, frames deduplicated)."""

    rows: dict[RecordKey, int]                   # record -> row
    record_video: np.ndarray                     # [R] video id of each row
    appearance: torch.Tensor                     # [R, N, D_a] a_t, zero-padded to N = K_max · block_size (D_a = 0: no Fast)
    geometry: torch.Tensor                       # [R, N, 8] g_t
    obs_valid: torch.Tensor                      # [R, N] bool
    slow_positions: torch.Tensor                 # [R, S] long positions in the Fast list (S_0)
    slow_frames: torch.Tensor                    # [R, S] long rows of the frame table
    slow_valid: torch.Tensor                     # [R, S] bool
    frame_global: torch.Tensor                   # [F, D_g] unit global features (pruning)
    frame_tokens: torch.Tensor                   # [F, N_t, D_x] context tokens
    frame_token_mask: torch.Tensor               # [F, N_t] bool
    text: TextFeatures | None                    # query features (None for the causal-LM text pass)
    query_texts: dict[int, str]                  # query id -> text
    query_video: dict[int, int]                  # query id -> video id


def pack_tracks(features: Mapping[RecordKey, TrackFeatures], n_max: int) -> dict:
    """Pad track features into the tensors of :class:`VTrajEmbedData` (frames shared by records of
    the same video are stored once)."""
    keys = sorted(features)
    if not keys:
        raise ValueError("no track features to pack")
    first = features[keys[0]]
    d_a = first.appearance.shape[1]
    s_max = max(1, max(len(f.slow_positions) for f in features.values()))
    r = len(keys)
    app = np.zeros((r, n_max, d_a), np.float32)
    geo = np.zeros((r, n_max, GEOMETRY_DIM), np.float32)
    obs_valid = np.zeros((r, n_max), bool)
    slow_pos = np.zeros((r, s_max), np.int64)
    slow_frames = np.zeros((r, s_max), np.int64)
    slow_valid = np.zeros((r, s_max), bool)
    frame_row: dict[tuple[int, int], int] = {}
    f_global, f_tokens, f_masks = [], [], []
    for i, key in enumerate(keys):
        f = features[key]
        n = len(f.frames)
        if n > n_max:
            raise ValueError(f"record {key}: {n} Fast observations, more than the model's {n_max}")
        app[i, :n], geo[i, :n], obs_valid[i, :n] = f.appearance, f.geometry, True
        for j, pos in enumerate(f.slow_positions.tolist()):
            fk = (f.video_id, int(f.frames[pos]))
            if fk not in frame_row:
                frame_row[fk] = len(f_global)
                f_global.append(f.context_global[j])
                f_tokens.append(f.context_tokens[j])
                f_masks.append(f.context_mask[j])
            slow_pos[i, j], slow_frames[i, j], slow_valid[i, j] = pos, frame_row[fk], True
    if not f_global:                                     # no Slow frames (no Slow encoder): one empty row
        f_global, f_tokens, f_masks = [first.context_global.reshape(0)], [np.zeros((1, 0), np.float32)], [np.zeros(1, bool)]
    n_tok = max(t.shape[0] for t in f_tokens)
    tokens = np.zeros((len(f_tokens), n_tok, f_tokens[0].shape[1]), np.float32)
    tmask = np.zeros((len(f_tokens), n_tok), bool)
    for i, (t, m) in enumerate(zip(f_tokens, f_masks)):
        tokens[i, :len(t)], tmask[i, :len(t)] = t, m
    return {"rows": {k: i for i, k in enumerate(keys)},
            "record_video": np.asarray([features[k].video_id for k in keys], np.int64),
            "appearance": torch.from_numpy(app), "geometry": torch.from_numpy(geo),
            "obs_valid": torch.from_numpy(obs_valid), "slow_positions": torch.from_numpy(slow_pos),
            "slow_frames": torch.from_numpy(slow_frames), "slow_valid": torch.from_numpy(slow_valid),
            "frame_global": torch.from_numpy(np.stack(f_global).astype(np.float32)),
            "frame_tokens": torch.from_numpy(tokens), "frame_token_mask": torch.from_numpy(tmask)}
