"""The embedded default appearance encoder: colour, shape and size read from pixels, no weights.

A region (an object crop, a grid cell of a frame, or a whole frame) becomes one vector of
``dim = 2·C + H + 2`` numbers (490 with the defaults):

- ``[0, C)`` and ``[C, 2C)``: colour histograms of the region's upper and lower halves (clothing
  is what tells people apart), in CIELAB, a perceptual colour space where distances follow what
  people see. Each pixel falls in one of ``C = lightness_bins · n_chroma²`` bins (4 × 5 × 5 = 100):
  uniform bins of L* and bins of a* and b* cut at ``chroma_edges`` (so the neutral greys, whites
  and blacks share the middle chroma bin and differ by lightness, and hues differ by chroma).
  Each half's histogram is normalised to sum 1 and square-rooted (the Hellinger map), so its
  Euclidean norm is 1 and dot products compare distributions.
- ``[2C, 2C + H)``: a HOG descriptor of the grey region resized to ``hog_size`` (32 × 64 with 16-px
  blocks of four 8-px cells, 9 orientations: ``H = 2 · 4 · 4 · 9 = 288``), divided by the square
  root of the number of blocks so that its norm is at most about 1: the silhouette's shape.
- ``[2C + H, 2C + H + 2)``: geometry. For a crop, ``log(h / w)`` (aspect) and
  ``log(sqrt(h · w) / 64)`` (size in pixels). For a grid cell of a frame (a context token), the
  cell's centre ``(cx, cy)`` as fractions of the frame: where in the scene the token is.

``encode_frames`` returns the whole-frame vector, L2-normalised, as the global feature (used for
the Slow branch's redundancy pruning) and one token per cell of a ``grid × grid`` partition.
``encode_rois`` is the Fast branch's reading of a box from the full frame: the frame is resized to
the encoder's pixel budget (:func:`models.backends.encoders.base.budget_grid`, aspect kept, never
enlarged), the box scaled with it, and the descriptor taken of the box's pixels there; its
geometry part is the crop's, measured at that resolution. Without a budget it equals
``encode_crops`` of the box's region. With a budget ``encode_frames`` reads the frame at that
resolution too. The budget is part of the encoder's name.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from models.backends.encoders.base import (
    FrameEncoding,
    budget_grid,
    check_boxes,
    check_images,
    l2_normalize,
    region,
)
from models.config import PlainConfig

HOG_BLOCK, HOG_CELL, HOG_BINS = 16, 8, 9


@dataclass
class HandcraftedConfig(PlainConfig):
    """Settings of the handcrafted encoder (they are part of its name)."""

    lightness_bins: int = 4                      # uniform bins of L* over [0, 100]
    chroma_edges: tuple[float, ...] = (-24.0, -8.0, 8.0, 24.0)  # cuts of a* and b* (CIELAB units), increasing
    hog_size: tuple[int, int] = (32, 64)         # (width, height) the grey region is resized to for HOG
    grid: int = 4                                # context tokens per frame: grid × grid cells

    def __post_init__(self) -> None:
        self.chroma_edges = tuple(float(e) for e in self.chroma_edges)
        self.hog_size = tuple(int(s) for s in self.hog_size)
        problems = []
        if self.lightness_bins < 1:
            problems.append(f"lightness_bins must be >= 1, got {self.lightness_bins}")
        if list(self.chroma_edges) != sorted(set(self.chroma_edges)):
            problems.append(f"chroma_edges must be strictly increasing, got {self.chroma_edges}")
        w, h = self.hog_size
        if w < HOG_BLOCK or h < HOG_BLOCK or w % HOG_BLOCK or h % HOG_BLOCK:
            problems.append(f"hog_size must be multiples of {HOG_BLOCK} px, got {self.hog_size}")
        if self.grid < 1:
            problems.append(f"grid must be >= 1, got {self.grid}")
        if problems:
            raise ValueError("HandcraftedConfig: " + "; ".join(problems))


class HandcraftedAppearanceEncoder:
    """Colour histograms of upper/lower halves in CIELAB, HOG and geometry (module docstring)."""

    def __init__(self, config: HandcraftedConfig | None = None, *, pixel_budget: int | None = None):
        if pixel_budget is not None and pixel_budget < 1:
            raise ValueError(f"pixel_budget must be >= 1 pixel, got {pixel_budget}")
        self.config = config or HandcraftedConfig()
        self.pixel_budget = pixel_budget         # full frames are read at most this many pixels (None: as they are)
        cfg = self.config
        self.n_chroma = len(cfg.chroma_edges) + 1
        self.colour_bins = cfg.lightness_bins * self.n_chroma ** 2
        w, h = cfg.hog_size
        self._hog = cv2.HOGDescriptor((w, h), (HOG_BLOCK, HOG_BLOCK), (HOG_BLOCK, HOG_BLOCK),
                                      (HOG_CELL, HOG_CELL), HOG_BINS)
        self.n_blocks = (w // HOG_BLOCK) * (h // HOG_BLOCK)
        self.hog_dim = self.n_blocks * (HOG_BLOCK // HOG_CELL) ** 2 * HOG_BINS
        self.dim = 2 * self.colour_bins + self.hog_dim + 2
        self.token_dim = self.roi_dim = self.dim
        settings = json.dumps(cfg.as_dict(), sort_keys=True)
        self.name = f"handcrafted-lab-hog-v1-{hashlib.sha256(settings.encode()).hexdigest()[:12]}" \
            + (f"-b{pixel_budget}" if pixel_budget is not None else "")
        # lookup tables: 8-bit OpenCV Lab (L·255/100, a+128, b+128) -> bin index
        levels = np.arange(256, dtype=np.float64)
        self._l_bin = np.minimum((levels / 255.0 * cfg.lightness_bins).astype(np.int64),
                                 cfg.lightness_bins - 1)                                  # [256] L* = level·100/255
        self._c_bin = np.searchsorted(np.asarray(cfg.chroma_edges), levels - 128.0, side="right")  # [256]

    # -- one region ----------------------------------------------------------------------------
    def _colour_histogram(self, lab: np.ndarray) -> np.ndarray:
        """Square-rooted, sum-1 histogram of an 8-bit Lab region ``[h, w, 3]`` -> ``[C]``."""
        flat = lab.reshape(-1, 3)
        index = (self._l_bin[flat[:, 0]] * self.n_chroma + self._c_bin[flat[:, 1]]) * self.n_chroma \
            + self._c_bin[flat[:, 2]]                                                      # [h·w]
        hist = np.bincount(index, minlength=self.colour_bins).astype(np.float64)          # [C]
        return np.sqrt(hist / max(hist.sum(), 1.0))

    def _descriptor(self, region: np.ndarray, geometry: tuple[float, float]) -> np.ndarray:
        h = region.shape[0]
        lab = cv2.cvtColor(region, cv2.COLOR_BGR2LAB)
        mid = max(1, h // 2)
        upper = self._colour_histogram(lab[:mid])
        lower = self._colour_histogram(lab[mid:] if h > 1 else lab)
        grey = cv2.cvtColor(cv2.resize(region, self.config.hog_size, interpolation=cv2.INTER_AREA),
                            cv2.COLOR_BGR2GRAY)
        hog = self._hog.compute(grey).reshape(-1) / np.sqrt(self.n_blocks)               # [H]
        return np.concatenate([upper, lower, hog, np.asarray(geometry)]).astype(np.float32)

    def _crop_descriptor(self, crop: np.ndarray) -> np.ndarray:
        h, w = crop.shape[:2]
        return self._descriptor(crop, (float(np.log(h / w)), float(np.log(np.sqrt(h * w) / 64.0))))

    def at_budget(self, frame: np.ndarray) -> np.ndarray:
        """``frame`` resized to the pixel budget (unchanged without one or when it is within it)."""
        if self.pixel_budget is None:
            return frame
        h, w = frame.shape[:2]
        rows, cols = budget_grid(h, w, self.pixel_budget, 1)
        if (rows, cols) == (h, w):
            return frame
        return cv2.resize(frame, (cols, rows), interpolation=cv2.INTER_AREA)

    # -- ImageEncoder --------------------------------------------------------------------------
    def encode_crops(self, crops: Sequence[np.ndarray]) -> np.ndarray:
        """``[N, dim]``: colour, HOG and the crop's aspect and pixel size."""
        check_images(crops, "crop")
        out = np.zeros((len(crops), self.dim), dtype=np.float32)                          # [N, D]
        for i, crop in enumerate(crops):
            out[i] = self._crop_descriptor(crop)
        return out

    def encode_rois(self, frames: Sequence[np.ndarray], boxes: Sequence[np.ndarray]) -> np.ndarray:
        """``[Σ n_i, dim]``: the descriptor of each box's pixels in its frame read at the pixel budget."""
        check_images(frames, "frame")
        boxes = check_boxes(frames, boxes)
        out = np.zeros((sum(len(b) for b in boxes), self.dim), dtype=np.float32)         # [N, D]
        row = 0
        for frame, frame_boxes in zip(frames, boxes):
            small = self.at_budget(frame)
            scale = np.asarray([small.shape[1] / frame.shape[1], small.shape[0] / frame.shape[0]] * 2,
                               dtype=np.float64)                                           # [4] x, y, x, y
            for box in frame_boxes:
                out[row] = self._crop_descriptor(region(small, box * scale))
                row += 1
        return out

    def encode_frames(self, frames: Sequence[np.ndarray]) -> FrameEncoding:
        """Unit whole-frame vectors and ``grid²`` cell tokens (geometry = the cell's centre)."""
        check_images(frames, "frame")
        g = self.config.grid
        glob = np.zeros((len(frames), self.dim), dtype=np.float32)                        # [N, D]
        tokens = np.zeros((len(frames), g * g, self.dim), dtype=np.float32)               # [N, g², D]
        for i, frame in enumerate(frames):
            frame = self.at_budget(frame)
            h, w = frame.shape[:2]
            glob[i] = self._descriptor(frame, (float(np.log(h / w)), float(np.log(np.sqrt(h * w) / 64.0))))
            ys = np.linspace(0, h, g + 1).round().astype(int)
            xs = np.linspace(0, w, g + 1).round().astype(int)
            for r in range(g):
                for c in range(g):
                    cell = frame[ys[r]:max(ys[r + 1], ys[r] + 1), xs[c]:max(xs[c + 1], xs[c] + 1)]
                    centre = ((xs[c] + xs[c + 1]) / 2 / w, (ys[r] + ys[r + 1]) / 2 / h)
                    tokens[i, r * g + c] = self._descriptor(cell, centre)
        return FrameEncoding(global_features=l2_normalize(glob), tokens=tokens,
                             token_mask=np.ones(tokens.shape[:2], dtype=bool))
