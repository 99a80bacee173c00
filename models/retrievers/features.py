"""Frozen per-track and per-query features, computed once and cached on disk (paper Appendix C.2-C.4).

For each trajectory (or a training variant of one, see ``models.training.batching``):

- **Fast observations.** ``n_f = min(n, n_f^max)`` of the ``n`` stored observations (``n_f^max = 32``),
  at evenly spaced positions of the time-ordered list, both endpoints included; a single
  selected observation is the first one (:func:`uniform_positions`). The stored observations are
  never changed.
- **Appearance** ``a_t``: the frozen Fast encoder's vector of the box's region of interest (the
  box grown by ``crop_pad``, clipped to the frame). With ``fast_input="rois"`` (VTrajEmbed, C.3)
  the encoder reads the box from the full frame at its own pixel budget ``P_f``
  (``ImageEncoder.encode_rois``: ROI-align over a vision tower's feature maps, or the handcrafted
  descriptor of the box's pixels at that resolution); with ``"crops"`` (SCOUT, ActPair) it encodes
  the crop alone (``encode_crops``). Without a Fast encoder ``a_t`` has width 0.
- **Geometry** ``g_t = [cx, cy, w, h, A_t, d_t, log(A_t / A_t⁻), t / max(T - 1, 1)]``
  (:func:`geometry_features`): the box centre, width and height as fractions of the frame's width
  and height; ``A_t = w·h`` the box area as a fraction of the frame; ``t⁻`` the previous Fast
  observation, ``d_t`` the distance the normalised centre moved since it (the paper leaves
  ``d_t`` undefined: this is the displacement that pairs with the scale change next to it) and
  ``log(A_t / A_t⁻)`` the log scale change (both 0 at the first observation); ``t`` the frame
  index and ``T`` the video's frame count, so the last entry places the observation in the video.
- **Slow context** for ``n_s = min(budget, n_f)`` observations preselected at evenly spaced
  positions of the Fast list (same rule): the frozen Slow encoder's spatial context tokens of the
  full frame (read at its own pixel budget ``P_s``) and a unit global feature of the frame, used by
  the model's redundancy pruning at threshold τ (a model setting, so it needs no new features):
  the separate pruning encoder's when there is one (the paper's CLIP-style auxiliary encoder),
  else the Slow encoder's. Without a Slow encoder a record has no Slow frames.

Queries get the frozen text encoder's pooled vector and token vectors (:class:`TextFeatures`).

Entries are cached by content (``models.backends.encoders.cache``): the video file's SHA-256, the exact
observations, the names of the Fast, Slow and pruning encoders (which hold their pixel budgets,
tapped layers and projectors) and the sampling settings. Frames are read with
``models.media.video.FrameReader`` in increasing order, once per video, and a frame used by several
tracks is encoded once.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from models.backends.encoders import (
    FeatureCache,
    ImageEncoder,
    TextEncoder,
    array_digest,
    cache_key,
)
from models.backends.encoders.base import region
from models.config import PlainConfig
from models.media.video import FrameReader, content_sha256
from models.training.snapshot import RelationSnapshotData, SnapshotVideo

GEOMETRY_DIM = 8
FEATURES_VERSION = "track-features/v2"
TEXT_FEATURES_VERSION = "text-features/v1"
RecordKey = tuple[int, int]                      # (trajectory id, variant): variant 0 is the stored track
FAST_PIXEL_BUDGET = 65_536                       # P_f: pixels per full frame read by the Fast branch (C.3, 256²)
SLOW_PIXEL_BUDGET = 200_704                      # P_s: pixels per full frame read by the Slow branch (C.4, 448²)
FAST_INPUTS = ("rois", "crops")                  # FeatureConfig.fast_input
FRAMES_PER_PASS = 32                             # full frames held and encoded at a time for the Fast branch


@dataclass
class FeatureConfig(PlainConfig):
    """Sampling settings of the frozen features (paper Appendix C.2)."""

    n_fast_max: int = 32                         # n_f^max: Fast observations per track
    n_slow_budget: int = 4                       # n_s budget: Slow frames preselected per track (1-4)
    crop_pad: float = 0.0                        # ROI growth around the box, as a fraction of its size
    fast_input: str = "rois"                     # "rois": boxes read from full frames (C.3) | "crops": box crops alone
    cache_dir: str | None = None                 # disk cache folder; None keeps nothing

    def __post_init__(self) -> None:
        problems = []
        if self.n_fast_max < 1:
            problems.append(f"n_fast_max must be >= 1, got {self.n_fast_max}")
        if not 1 <= self.n_slow_budget <= 4:
            problems.append(f"n_slow_budget must be in 1..4 (paper C.2), got {self.n_slow_budget}")
        if not 0.0 <= self.crop_pad <= 1.0:
            problems.append(f"crop_pad must be in [0, 1], got {self.crop_pad}")
        if self.fast_input not in FAST_INPUTS:
            problems.append(f"fast_input must be one of {', '.join(FAST_INPUTS)}, got {self.fast_input!r}")
        if problems:
            raise ValueError("FeatureConfig: " + "; ".join(problems))


@dataclass
class TrackFeatures:
    """The frozen features of one trajectory record (any model can consume them)."""

    track_id: int                                # trajectory id
    video_id: int                                # its video
    variant: int                                 # 0: the stored observations; k >= 1: a training variant
    frames: np.ndarray                           # [n_f] int32 frame indices of the Fast observations
    boxes: np.ndarray                            # [n_f, 4] float32 their boxes (xyxy, pixels)
    appearance: np.ndarray                       # [n_f, D_a] float32 a_t (D_a = 0 without a Fast encoder)
    geometry: np.ndarray                         # [n_f, 8] float32 g_t
    slow_positions: np.ndarray                   # [n_s] int64 positions in the Fast list (the preselected S_0)
    context_global: np.ndarray                   # [n_s, D_g] float32 unit global features of those frames (pruning)
    context_tokens: np.ndarray                   # [n_s, N_t, D_x] float32 their context tokens
    context_mask: np.ndarray                     # [n_s, N_t] bool: real tokens

    @property
    def key(self) -> RecordKey:
        return (self.track_id, self.variant)

    def arrays(self) -> dict[str, np.ndarray]:
        return {f.name: np.asarray(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_arrays(cls, data: Mapping[str, np.ndarray]) -> TrackFeatures:
        values = {f.name: data[f.name] for f in dataclasses.fields(cls)}
        for name in ("track_id", "video_id", "variant"):
            values[name] = int(values[name])
        return cls(**values)


@dataclass
class TextFeatures:
    """Frozen features of a list of queries (any model can consume them)."""

    ids: list[int]                               # query ids, one per row
    texts: list[str]                             # the query texts
    pooled: np.ndarray                           # [Q, D_t] float32 pooled text vectors
    tokens: np.ndarray                           # [Q, L, D_tok] float32 token vectors, padded
    mask: np.ndarray                             # [Q, L] bool real tokens
    encoder: str = ""                            # the text encoder's name

    def rows(self, ids: Sequence[int]) -> np.ndarray:
        """Row indices of ``ids``; ``KeyError`` names the first unknown one."""
        index = {q: i for i, q in enumerate(self.ids)}
        try:
            return np.asarray([index[q] for q in ids], dtype=np.int64)
        except KeyError as exc:
            raise KeyError(f"query {exc.args[0]} has no text features") from None


# -- pure helpers -----------------------------------------------------------------------------------
def uniform_positions(n: int, k: int) -> np.ndarray:
    """``min(n, k)`` distinct, increasing positions evenly spaced over ``0..n-1`` with both endpoints;
    one selected position is ``0`` (paper C.2)."""
    if n < 1 or k < 1:
        raise ValueError(f"need n >= 1 and k >= 1, got n={n}, k={k}")
    m = min(n, k)
    if m == 1:
        return np.zeros(1, dtype=np.int64)
    return np.floor(np.linspace(0.0, n - 1, m) + 0.5).astype(np.int64)


def geometry_features(frames: np.ndarray, boxes: np.ndarray, width: int, height: int, n_frames: int) -> np.ndarray:
    """``g_t`` for each observation (the module docstring): ``[n, 8]`` float32."""
    frames = np.asarray(frames, dtype=np.float64).reshape(-1)
    boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    if len(frames) != len(boxes) or len(frames) == 0:
        raise ValueError(f"need as many frames as boxes (at least one), got {len(frames)} and {len(boxes)}")
    if width < 1 or height < 1 or n_frames < 1:
        raise ValueError(f"bad frame size {width}x{height} or frame count {n_frames}")
    w = (boxes[:, 2] - boxes[:, 0]) / width                                            # [n]
    h = (boxes[:, 3] - boxes[:, 1]) / height                                           # [n]
    cx = (boxes[:, 0] + boxes[:, 2]) / 2 / width                                       # [n]
    cy = (boxes[:, 1] + boxes[:, 3]) / 2 / height                                      # [n]
    area = np.clip(w, 0, None) * np.clip(h, 0, None)                                   # [n]
    prev = np.concatenate([[0], np.arange(len(frames) - 1)])                          # [n] index of t⁻
    moved = np.hypot(cx - cx[prev], cy - cy[prev])                                     # [n] 0 at the first
    log_scale = np.log(np.maximum(area, 1e-8) / np.maximum(area[prev], 1e-8))          # [n] 0 at the first
    when = frames / max(n_frames - 1, 1)                                               # [n]
    return np.stack([cx, cy, w, h, area, moved, log_scale, when], axis=1).astype(np.float32)


def grow_box(box: np.ndarray, pad: float) -> np.ndarray:
    """``box`` (xyxy) grown by ``pad`` of its width and height on each side: ``[4]`` float32."""
    x1, y1, x2, y2 = (float(v) for v in box)
    px, py = (x2 - x1) * pad, (y2 - y1) * pad
    return np.asarray([x1 - px, y1 - py, x2 + px, y2 + py], np.float32)


def clip_box(box: np.ndarray, width: int, height: int) -> np.ndarray:
    """``box`` clipped to a ``width × height`` frame, at least one pixel wide and high (the pixels
    :func:`roi` reads): ``[4]`` float32."""
    x1, y1, x2, y2 = (float(v) for v in box)
    xa, ya = float(np.clip(np.floor(x1), 0, width - 1)), float(np.clip(np.floor(y1), 0, height - 1))
    return np.asarray([xa, ya, np.clip(np.ceil(x2), xa + 1, width), np.clip(np.ceil(y2), ya + 1, height)], np.float32)


def roi(frame: np.ndarray, box: np.ndarray, pad: float) -> np.ndarray:
    """The box's region (grown by ``pad``), clipped to the frame and at least one pixel."""
    return region(frame, grow_box(box, pad))


@dataclass
class _Request:
    track_id: int
    variant: int
    frames: np.ndarray                           # [n_f] sampled
    boxes: np.ndarray                            # [n_f, 4] sampled
    slow: np.ndarray                             # [n_s] positions in the sampled list
    key: dict                                    # cache key parts


class FeatureExtractor:
    """Computes and caches :class:`TrackFeatures` and :class:`TextFeatures` (module docstring).

    ``fast`` makes ``a_t`` (None: no Fast features, width 0); ``slow`` the Slow frames' context
    tokens and, without a ``pruning`` encoder, their global features (None: no Slow frames). At
    least one of ``fast`` and ``slow`` is needed."""

    def __init__(self, config: FeatureConfig | None, fast: ImageEncoder | None, *,
                 slow: ImageEncoder | None = None, pruning: ImageEncoder | None = None,
                 text: TextEncoder | None = None):
        if fast is None and slow is None:
            raise ValueError("a feature extractor needs a Fast or a Slow encoder (or both)")
        if pruning is not None and slow is None:
            raise ValueError("a pruning encoder reads the Slow frames: it needs a Slow encoder")
        self.config = config or FeatureConfig()
        self.fast, self.slow, self.pruning = fast, slow, pruning
        self.fast_dim = 0 if fast is None else (fast.roi_dim if self.config.fast_input == "rois" else fast.dim)
        self.text = text
        self.cache = FeatureCache(self.config.cache_dir)
        self._video_sha: dict[str, str] = {}

    def video_sha(self, path: str) -> str:
        if path not in self._video_sha:
            self._video_sha[path] = content_sha256(path)
        return self._video_sha[path]

    # -- tracks --------------------------------------------------------------------------------
    def video_tracks(self, video: SnapshotVideo, observations: Mapping[RecordKey, tuple[np.ndarray, np.ndarray]]
                     ) -> dict[RecordKey, TrackFeatures]:
        """Features of several records of one video: ``{(track_id, variant): (frames, boxes)}``."""
        cfg = self.config
        out: dict[RecordKey, TrackFeatures] = {}
        todo: list[_Request] = []
        sha = self.video_sha(video.path) if observations else ""
        names = {role: (enc.name if enc is not None else None)
                 for role, enc in (("fast", self.fast), ("slow", self.slow), ("pruning", self.pruning))}
        for (track_id, variant), (frames, boxes) in observations.items():
            frames = np.asarray(frames, dtype=np.int32).reshape(-1)
            boxes = np.asarray(boxes, dtype=np.float32).reshape(-1, 4)
            if len(frames) == 0 or len(frames) != len(boxes):
                raise ValueError(f"record ({track_id}, {variant}): {len(frames)} frames and {len(boxes)} boxes")
            if np.any(np.diff(frames) <= 0) or frames[0] < 0 or frames[-1] >= video.n_frames:
                raise ValueError(f"record ({track_id}, {variant}): frames must increase within 0..{video.n_frames - 1}")
            pick = uniform_positions(len(frames), cfg.n_fast_max)
            sf, sb = frames[pick], boxes[pick]
            slow = uniform_positions(len(sf), cfg.n_slow_budget) if self.slow is not None else np.zeros(0, np.int64)
            key = {"kind": FEATURES_VERSION, **names, "fast_input": cfg.fast_input,
                   "video": sha, "size": [video.width, video.height, video.n_frames],
                   "observations": array_digest(frames, boxes), "n_fast_max": cfg.n_fast_max,
                   "n_slow_budget": cfg.n_slow_budget, "crop_pad": cfg.crop_pad}
            found = self.cache.get(cache_key(key))
            if found is not None:               # content-keyed: the ids are this snapshot's
                self.cache.stats["hits"] += 1
                feats = TrackFeatures.from_arrays(found)
                feats.track_id, feats.video_id, feats.variant = int(track_id), int(video.id), int(variant)
                out[(track_id, variant)] = feats
            else:
                todo.append(_Request(int(track_id), int(variant), sf, sb, slow, key))
        if todo:
            self.cache.stats["misses"] += len(todo)
            for feats, req in zip(self._compute(video, todo), todo):
                self.cache.put(cache_key(req.key), feats.arrays())
                out[(req.track_id, req.variant)] = feats
        return out

    def _compute(self, video: SnapshotVideo, todo: list[_Request]) -> list[TrackFeatures]:
        boxes_at: dict[int, list[tuple[int, int]]] = {}                  # frame -> [(request, position)]
        slow_frames: set[int] = set()
        for r, req in enumerate(todo):
            for j, f in enumerate(req.frames.tolist()):
                boxes_at.setdefault(f, []).append((r, j))
            slow_frames.update(req.frames[req.slow].tolist())
        appearance = [np.zeros((len(req.frames), self.fast_dim), np.float32) for req in todo]   # [n_f, D_a] each
        context_images: dict[int, np.ndarray] = {}
        pending: list[tuple[int, np.ndarray]] = []                       # (frame index, full frame) to encode

        def flush() -> None:
            where = [rj for f, _ in pending for rj in boxes_at[f]]
            vectors = self._fast_vectors(pending, boxes_at, todo)                     # [len(where), D_a]
            for (r, j), vec in zip(where, vectors):
                appearance[r][j] = vec
            pending.clear()

        with FrameReader(video.path, fps=video.fps, frame_count=video.n_frames, cache_frames=0) as reader:
            for f in sorted(boxes_at):
                if self.fast is None and f not in slow_frames:
                    continue
                frame = reader.read(f).copy()                            # held past the next read
                if self.fast is not None:
                    pending.append((f, frame))
                    if len(pending) >= FRAMES_PER_PASS:
                        flush()
                if f in slow_frames:
                    context_images[f] = frame
        if pending:
            flush()
        order = sorted(context_images)
        ctx_row = {f: i for i, f in enumerate(order)}
        ctx = glob = None
        if order:
            images = [context_images[f] for f in order]
            ctx = self.slow.encode_frames(images)
            glob = (self.pruning.encode_frames(images) if self.pruning is not None else ctx).global_features
        out = []
        for r, req in enumerate(todo):
            rows = [ctx_row[f] for f in req.frames[req.slow].tolist()]
            if ctx is not None:
                context = (glob[rows], ctx.tokens[rows], ctx.token_mask[rows])
            else:                                                        # no Slow encoder: no Slow frames
                context = (np.zeros((0, 0), np.float32), np.zeros((0, 1, 0), np.float32), np.zeros((0, 1), bool))
            out.append(TrackFeatures(
                track_id=req.track_id, video_id=int(video.id), variant=req.variant,
                frames=req.frames, boxes=req.boxes, appearance=appearance[r],
                geometry=geometry_features(req.frames, req.boxes, video.width, video.height, video.n_frames),
                slow_positions=req.slow.astype(np.int64), context_global=context[0],
                context_tokens=context[1], context_mask=context[2]))
        return out

    def _fast_vectors(self, pending: list[tuple[int, np.ndarray]], boxes_at: Mapping[int, list[tuple[int, int]]],
                      todo: list[_Request]) -> np.ndarray:
        """``a_t`` of every box on the ``pending`` frames, frame by frame: ``[n, D_a]``."""
        pad = self.config.crop_pad
        if self.config.fast_input == "crops":
            crops = [np.ascontiguousarray(roi(frame, todo[r].boxes[j], pad)) for f, frame in pending
                     for r, j in boxes_at[f]]
            return self.fast.encode_crops(crops)
        boxes = [np.stack([clip_box(grow_box(todo[r].boxes[j], pad), frame.shape[1], frame.shape[0])
                           for r, j in boxes_at[f]]) for f, frame in pending]                 # [n_i, 4] each
        return self.fast.encode_rois([frame for _, frame in pending], boxes)

    def snapshot_tracks(self, snapshot: RelationSnapshotData,
                        extra: Mapping[RecordKey, tuple[np.ndarray, np.ndarray]] | None = None
                        ) -> dict[RecordKey, TrackFeatures]:
        """Features of every stored track of ``snapshot`` (variant 0) and of ``extra`` records
        (training variants: ``{(track_id, k): (frames, boxes)}`` with ``k >= 1``)."""
        videos = {v.id: v for v in snapshot.videos}
        track_video = {t.id: t.video_id for t in snapshot.tracks}
        per_video: dict[int, dict[RecordKey, tuple[np.ndarray, np.ndarray]]] = {v: {} for v in videos}
        for t in snapshot.tracks:
            per_video[t.video_id][(t.id, 0)] = (t.frames, t.boxes)
        for (track_id, variant), obs in (extra or {}).items():
            if track_id not in track_video:
                raise ValueError(f"extra record ({track_id}, {variant}) names an unknown trajectory")
            if variant < 1:
                raise ValueError(f"extra record ({track_id}, {variant}): variant 0 is the stored track")
            per_video[track_video[track_id]][(track_id, variant)] = obs
        out: dict[RecordKey, TrackFeatures] = {}
        for vid, obs in per_video.items():
            out.update(self.video_tracks(videos[vid], obs))
        return out

    # -- texts ---------------------------------------------------------------------------------
    def text_features(self, ids: Sequence[int], texts: Sequence[str]) -> TextFeatures:
        """Pooled and token vectors of ``texts`` (one cache entry per distinct text)."""
        if self.text is None:
            raise ValueError("this extractor has no text encoder")
        ids, texts = [int(i) for i in ids], list(texts)
        if len(ids) != len(texts):
            raise ValueError(f"{len(ids)} ids but {len(texts)} texts")
        entries: dict[str, dict[str, np.ndarray]] = {}
        missing: list[str] = []
        for text in dict.fromkeys(texts):
            found = self.cache.get(cache_key(self._text_key(text)))
            if found is None:
                missing.append(text)
            else:
                self.cache.stats["hits"] += 1
                entries[text] = found
        if missing:
            self.cache.stats["misses"] += len(missing)
            enc = self.text.encode(missing)
            for i, text in enumerate(missing):
                n = int(enc.mask[i].sum())
                entry = {"pooled": enc.pooled[i], "tokens": enc.tokens[i][enc.mask[i]][:max(n, 1)]}
                self.cache.put(cache_key(self._text_key(text)), entry)
                entries[text] = entry
        longest = max([len(entries[t]["tokens"]) for t in texts], default=1)
        tokens = np.zeros((len(texts), longest, self.text.token_dim), np.float32)         # [Q, L, D]
        mask = np.zeros((len(texts), longest), bool)                                     # [Q, L]
        pooled = np.zeros((len(texts), self.text.dim), np.float32)                       # [Q, D]
        for i, text in enumerate(texts):
            tok = entries[text]["tokens"]
            tokens[i, :len(tok)] = tok
            mask[i, :len(tok)] = True
            pooled[i] = entries[text]["pooled"]
        return TextFeatures(ids=ids, texts=texts, pooled=pooled, tokens=tokens, mask=mask, encoder=self.text.name)

    def _text_key(self, text: str) -> dict:
        return {"kind": TEXT_FEATURES_VERSION, "encoder": self.text.name, "text": text}
