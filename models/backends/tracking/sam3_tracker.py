"""SAM 3 as a proposal tracker: concept (text) prompts find and track every instance, no detector.

The seed's own proposal model. A local SAM 3 checkpoint is loaded through the ``sam3`` package's
builder (``sam3.model_builder.build_sam3_video_model`` with ``load_from_HF=False``: nothing is
downloaded), and each category prompt of the proposal run's inventory runs one SAM 3 session::

    tracker = Sam3Tracker(Sam3TrackerConfig(checkpoint="weights/sam3.pt"))
    state = tracker.init_state(frames)                 # frames: a FrameSource, read lazily
    tracker.add_prompt(state, category="person")       # a text prompt on frame 0
    tracker.add_prompt(state, category="car", frame_index=40, boxes=[[10, 20, 80, 64]])  # + exemplars
    for step in tracker.propagate(state):               # per prompt: forward, then backward
        ...
    proposals = tracker.proposals(state)                # one trajectory per SAM 3 identity

How a run goes:

1. **Prompts.** SAM 3's ``add_prompt`` starts a semantic prompt over, so every category gets its
   own inference state: the text prompt (the category's name) on ``frame_index`` (frame 0 for a
   bare category), with optional exemplar boxes of that frame as positive visual prompts. In the
   query-conditioned mode (seed 002, C.1) a ``concept`` such as "person with a red umbrella" is
   the text prompt instead, for the run's one category: only objects of that appearance are
   proposed, still stored under the category.
2. **Propagation.** ``propagate_in_video`` runs forward from the prompted frame, then
   ``reverse=True`` backward from it (at most ``max_propagation_frames`` each way), as the
   package's predictor does for ``propagation_direction="both"``. SAM 3 detects new instances on
   every frame and associates them with its tracked masklets itself.
3. **Observations.** On each frame an identity has an observation only if its binary mask at the
   original resolution covers at least ``min_mask_area`` pixels; the box is the mask's pixel-edge
   bounding box ``[x_min, y_min, x_max + 1, y_max + 1]`` in original pixels, the score SAM 3's
   tracker score of the object on that frame (its detection score where the tracker has none).
   Nothing is interpolated.
4. **Identities.** An identity is an object id as SAM 3 reports it within its category's session;
   track ids number the (category, object id) pairs in the order they first appear.

Frames are fed from the ``FrameSource`` in memory one at a time when the model asks for them,
preprocessed as SAM 3's image-folder loader does (RGB, PIL bilinear resize to ``image_size``
square, /255, mean and std 0.5, float16; its cv2 video-file loader in sam3 0.1.4 skips the /255
and is not followed); per-frame outputs already reported are dropped from the session's cache,
so host memory does not grow with the video's length.

Devices: the model runs under ``torch.autocast(bfloat16)``, as SAM 3's demos do (the global CUDA
autocast sam3's tracker enters at construction is left again after loading). sam3
0.1.4 is written for CUDA: it builds and moves tensors with hard-coded ``.cuda()`` and
``device="cuda"`` and casts features to bfloat16 itself. On the CPU those requests are routed to
the CPU for the duration of each call (``CudaToCpu``, a torch function mode; nothing is changed
globally) and the model runs under CPU bfloat16 autocast; hole filling in masks (which needs
Triton or scikit-image there) is off. The CPU path exists for tests and small jobs: see
``tests/benchmarks/bench_sam3.py`` for seconds per frame.
"""
from __future__ import annotations

import importlib.util
import logging
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

from models.backends.tracking.base import (
    FrameObjects,
    FrameSource,
    TrackerConfigError,
    TrackProposal,
    check_frame_source,
    mask_boxes,
    resolve_torch_device,
)
from models.backends.tracking.sam2_frames import FrameImages
from models.config import PlainConfig
from models.media.video import content_sha256

logger = logging.getLogger(__name__)

IMAGE_MEAN = (0.5, 0.5, 0.5)  # SAM 3's input normalisation (build_sam3_video_model)
IMAGE_STD = (0.5, 0.5, 0.5)
BPE_VOCAB = "bpe_simple_vocab_16e6.txt.gz"  # the CLIP BPE vocabulary SAM 3's text encoder reads
_CUDA_NAME = re.compile(r"cuda(:\d+)?")     # a device string that names CUDA
# A concept prompt's length: SAM 3's text encoder reads 32 BPE tokens (sam3 VETextEncoder
# context_length) and cuts the rest silently; 120 characters of plain words stay well inside.
MAX_CONCEPT_CHARS = 120


def check_concept(concept) -> str:
    """A concept prompt as SAM 3 is given it (inner whitespace collapsed); ``ValueError`` when it is
    not text, is blank, holds control characters or is longer than ``MAX_CONCEPT_CHARS``."""
    if not isinstance(concept, str):
        raise ValueError(f"concept must be text, got {type(concept).__name__}")
    text = " ".join(concept.split())
    if not text:
        raise ValueError("concept must not be blank: give the appearance to look for, e.g. 'person with a red umbrella'")
    if not text.isprintable():
        raise ValueError("concept must be plain text without control characters")
    if len(text) > MAX_CONCEPT_CHARS:
        raise ValueError(f"concept is {len(text)} characters long; at most {MAX_CONCEPT_CHARS} "
                         "(SAM 3's text encoder reads 32 tokens)")
    return text


@dataclass
class Sam3TrackerConfig(PlainConfig):
    """Settings of the SAM 3 proposal tracker (plain data; recorded with every proposal run)."""

    # local SAM 3 checkpoint (sam3.pt: the video model's state dict, or {"model": state_dict})
    checkpoint: str = ""
    # SAM 3's architecture is fixed by its builder: no model config file (must stay empty)
    model_config: str = ""
    # the text encoder's BPE vocabulary; empty: the copy shipped with sam3, else with open_clip
    bpe_path: str = ""
    # "cpu", "cuda", "cuda:N" or "auto" (CUDA when available)
    device: str = "auto"
    # the category prompts of the run (the proposal configuration's inventory)
    categories: list[str] = field(default_factory=lambda: ["person"])
    # detections above this score are kept on a frame (the builder's score_threshold_detection)
    score_threshold: float = 0.5
    # a kept detection that matches no tracked masklet starts a new identity above this score
    new_object_threshold: float = 0.7
    # frames tracked each way from the prompted frame (None: to both ends of the video)
    max_propagation_frames: int | None = None
    # masks smaller than this many pixels (original resolution) give no observation
    min_mask_area: int = 16
    # SAM 3's hole filling in masks (pixels; the builder's 16); CUDA only
    fill_hole_area: int = 16
    # SAM 3's temporal disambiguation heuristics (hotstart, reconditioning); off for ablations
    temporal_disambiguation: bool = True
    # query-conditioned mode (seed 002 C.1): a free-text concept prompted in place of the one
    # category's name, e.g. "person with a red umbrella"; empty: the category prompts themselves
    concept: str = ""

    def __post_init__(self) -> None:
        problems = []
        if self.model_config:
            problems.append("model_config must be empty: SAM 3's builder fixes the architecture")
        if not isinstance(self.categories, list) or not self.categories \
                or not all(isinstance(c, str) and c.strip() for c in self.categories):
            problems.append("categories must be a non-empty list of non-empty text prompts")
        for name in ("score_threshold", "new_object_threshold"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and 0.0 <= value <= 1.0):
                problems.append(f"{name} must be in [0, 1], got {value!r}")
        if self.max_propagation_frames is not None and self.max_propagation_frames < 0:
            problems.append(f"max_propagation_frames must be >= 0 or None, got {self.max_propagation_frames}")
        if self.min_mask_area < 1:
            problems.append(f"min_mask_area must be >= 1, got {self.min_mask_area}")
        if self.fill_hole_area < 0:
            problems.append(f"fill_hole_area must be >= 0, got {self.fill_hole_area}")
        if self.concept != "":
            try:
                self.concept = check_concept(self.concept)
            except ValueError as exc:
                problems.append(str(exc))
            if isinstance(self.categories, list) and len(self.categories) != 1:
                problems.append("a concept prompt describes one kind of object: give exactly one category "
                                f"with it, got {len(self.categories) if isinstance(self.categories, list) else 0}")
        if not (self.device == "auto" or self.device == "cpu" or self.device.startswith("cuda")):
            problems.append(f"device must be 'auto', 'cpu' or 'cuda[:N]', got {self.device!r}")
        if problems:
            raise ValueError("Sam3TrackerConfig: " + "; ".join(problems))

    @classmethod
    def known_categories(cls) -> tuple[str, ...]:
        """The category prompts a proposal run may name: the COCO categories, as text."""
        from models.backends.tracking.dnn_detector import COCO_CATEGORIES

        return COCO_CATEGORIES

    def check_files(self) -> tuple[Path, Path]:
        """The resolved (checkpoint, BPE vocabulary) paths; TrackerConfigError when one is missing.

        Cheap (nothing is loaded or imported), so a configuration can be checked when it is saved.
        """
        checkpoint = Path(self.checkpoint).expanduser() if self.checkpoint else None
        if checkpoint is None or not checkpoint.is_file():
            raise TrackerConfigError(
                f"SAM 3 checkpoint not found: {self.checkpoint or '(none set)'}; set the tracker's "
                f"'checkpoint' setting to a local sam3.pt (from huggingface.co/facebook/sam3 under the "
                f"SAM License; nothing is downloaded)"
            )
        if importlib.util.find_spec("sam3") is None:
            raise TrackerConfigError("the sam3 package is not installed (pip install --no-deps sam3==0.1.4)")
        vocab = _resolve_bpe(self.bpe_path)
        if vocab is None:
            raise TrackerConfigError(
                f"SAM 3 text-encoder vocabulary not found: {self.bpe_path or BPE_VOCAB}; set the "
                f"tracker's 'bpe_path' setting to a local {BPE_VOCAB}"
            )
        return checkpoint.resolve(), vocab


def _resolve_bpe(path: str) -> Path | None:
    """The BPE vocabulary: the given file, else the one sam3 or open_clip ship (found without import)."""
    if path:
        candidate = Path(path).expanduser()
        return candidate.resolve() if candidate.is_file() else None
    for package, relative in (("sam3", f"../assets/{BPE_VOCAB}"), ("open_clip", BPE_VOCAB)):
        spec = importlib.util.find_spec(package)
        for root in (spec.submodule_search_locations or []) if spec else []:
            candidate = (Path(root) / relative).resolve()
            if candidate.is_file():
                return candidate
    return None


def sam3_frame_images(frames: FrameSource, image_size: int) -> FrameImages:
    """Frames read lazily and preprocessed as SAM 3's image-folder loader does
    (``sam3.model.io_utils.load_video_frames_from_image_folder``: PIL RGB, bilinear resize to a
    square, /255, mean and std 0.5, float16)."""
    from PIL import Image

    return FrameImages(frames, image_size, torch.device("cpu"), mean=IMAGE_MEAN, std=IMAGE_STD, dtype=torch.float16,
                       resample=Image.BILINEAR)


class CudaToCpu(TorchFunctionMode):
    """Route the CUDA requests of code written for CUDA to the CPU, while the mode is active.

    ``tensor.cuda()`` becomes ``tensor.to("cpu")``, a ``device`` that names CUDA (positional or
    keyword, a string or a ``torch.device``) becomes the CPU, and ``pin_memory()`` (which needs a
    GPU) returns the tensor. Everything else runs unchanged.
    """

    cpu = torch.device("cpu")

    @classmethod
    def _map(cls, value):
        if isinstance(value, torch.device) and value.type == "cuda":
            return cls.cpu
        if isinstance(value, str) and _CUDA_NAME.fullmatch(value):
            return cls.cpu
        return value

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.device and args and self._map(args[0]) is self.cpu:
            return self.cpu                              # torch.device("cuda"), torch.device("cuda", 0)
        if func is torch.Tensor.cuda:
            return args[0].to(self.cpu)
        if func is torch.Tensor.pin_memory:
            return args[0]
        args = tuple(self._map(a) for a in args)
        kwargs = {k: self._map(v) for k, v in kwargs.items()}
        return func(*args, **kwargs)


@dataclass
class Sam3Identity:
    track_id: int
    category: str
    obj_id: int                                       # the id SAM 3 reported in its category's session
    observations: dict[int, tuple[np.ndarray, float]] = field(default_factory=dict)  # frame -> (box, score)


@dataclass
class Sam3Prompt:
    category: str
    frame_index: int
    boxes: np.ndarray | None = None                   # [n, 4] xyxy exemplar boxes, original pixels
    text: str = ""                                    # what SAM 3 reads: the concept, else the category


@dataclass
class Sam3State:
    """One video's tracking state (what ``init_state`` returns)."""

    frames: FrameSource
    images: FrameImages
    prompts: list[Sam3Prompt] = field(default_factory=list)
    identities: dict[tuple[str, int], Sam3Identity] = field(default_factory=dict)
    propagated: bool = False
    stats: dict = field(default_factory=lambda: {"sessions": 0, "frames_processed": 0, "objects_reported": 0})


class Sam3Tracker:
    """SAM 3's video model behind the Tracker interface (see the module docstring)."""

    name = "sam3"

    def __init__(self, config: Sam3TrackerConfig | None = None):
        config = config or Sam3TrackerConfig()
        checkpoint, vocab = config.check_files()  # before anything else
        self.config = config
        self.checkpoint_path = checkpoint
        self.bpe_path = vocab
        self.device = resolve_torch_device(config.device)
        self.fill_hole_area = config.fill_hole_area if self.device.type == "cuda" else 0
        if config.fill_hole_area and not self.fill_hole_area:
            logger.info("SAM 3 hole filling is off on the CPU; masks keep their small holes")
        self.checkpoint_sha256 = content_sha256(self.checkpoint_path)
        self.model = self._load_model()
        self.image_size = int(self.model.image_size)

    # -- loading -----------------------------------------------------------------------------------
    def on_device(self):
        """The context SAM 3 runs in. sam3 names "cuda" without an index in many places, so on CUDA
        the chosen GPU is made the current device for each call; on the CPU, CUDA requests are
        routed to the CPU."""
        return torch.cuda.device(self.device) if self.device.type == "cuda" else CudaToCpu()

    def _autocast(self):
        # bfloat16 autocast always, as SAM 3's demos run: sam3 casts backbone features and
        # memories to bfloat16 itself, so it does not run in float32 alone (on the CPU either)
        return torch.autocast(self.device.type, dtype=torch.bfloat16)

    def _load_model(self):
        from sam3.model_builder import build_sam3_video_model

        try:
            with self.on_device():
                model = build_sam3_video_model(
                    checkpoint_path=str(self.checkpoint_path), load_from_HF=False, bpe_path=str(self.bpe_path),
                    apply_temporal_disambiguation=self.config.temporal_disambiguation,
                    strict_state_dict_loading=True, device=str(self.device),
                )
        except Exception as exc:  # not a checkpoint, truncated, or weights of another model
            raise TrackerConfigError(
                f"SAM 3 checkpoint {self.checkpoint_path} does not load into SAM 3's video model "
                f"({type(exc).__name__}: {str(exc)[:300] or 'unreadable'}); it must be the sam3.pt "
                f"of facebook/sam3 or a state dict of build_sam3_video_model"
            ) from exc
        # sam3's tracker enters a CUDA bf16 autocast at construction and never leaves it ("for the
        # entire model process"): leave it here, so it does not outlive this model in a worker
        # that runs other jobs; every call of ours runs under its own autocast (_autocast)
        leaked = getattr(getattr(model, "tracker", None), "bf16_context", None)
        if leaked is not None:
            leaked.__exit__(None, None, None)
        model.score_threshold_detection = float(self.config.score_threshold)
        model.new_det_thresh = float(self.config.new_object_threshold)
        model.fill_hole_area = self.fill_hole_area
        return model.eval()

    # -- Tracker interface -------------------------------------------------------------------------
    def init_state(self, frames: FrameSource) -> Sam3State:
        check_frame_source(frames)
        images = sam3_frame_images(frames, self.image_size)
        return Sam3State(frames=frames, images=images)

    def add_prompt(self, state: Sam3State, *, category: str, frame_index: int | None = None,
                   boxes: np.ndarray | None = None) -> None:
        """Add a text prompt (the category), on ``frame_index`` (default 0), with optional exemplars.

        ``boxes`` (``[n, 4]`` xyxy, original pixels) are positive exemplars of the category on
        ``frame_index`` and need it.
        """
        if not isinstance(state, Sam3State):
            raise TypeError("state must come from Sam3Tracker.init_state")
        if state.propagated:
            raise ValueError("this state has already been propagated; start a new one with init_state")
        if not category or not isinstance(category, str) or not category.strip():
            raise ValueError("category must be a non-empty text prompt")
        n = state.frames.frame_count
        if frame_index is not None and not 0 <= int(frame_index) < n:
            raise ValueError(f"frame_index {frame_index} is outside 0..{n - 1}")
        exemplars = None
        if boxes is not None:
            if frame_index is None:
                raise ValueError("exemplar boxes need the frame_index they were drawn on")
            exemplars = self._check_boxes(np.asarray(boxes, dtype=np.float64), state)
        if any(p.category == category for p in state.prompts):
            raise ValueError(f"category {category!r} is already prompted; SAM 3 takes one prompt per concept")
        state.prompts.append(Sam3Prompt(category, int(frame_index or 0), exemplars,
                                        text=self.config.concept or category))

    def propagate(self, state: Sam3State) -> Iterator[FrameObjects]:
        """Run every category's session, forward then backward from its frame (a generator).

        A frame is reported once per category session and direction that reaches it.
        """
        if not isinstance(state, Sam3State):
            raise TypeError("state must come from Sam3Tracker.init_state")
        if not state.prompts:
            raise ValueError("no prompts: call add_prompt before propagate")
        if state.propagated:
            raise ValueError("this state has already been propagated")
        return self._propagate(state)

    def proposals(self, state: Sam3State) -> list[TrackProposal]:
        if not isinstance(state, Sam3State):
            raise TypeError("state must come from Sam3Tracker.init_state")
        if not state.propagated:
            raise ValueError("propagate the state to its end before asking for proposals")
        out = []
        for identity in sorted(state.identities.values(), key=lambda i: i.track_id):
            if not identity.observations:
                continue
            frames = sorted(identity.observations)
            out.append(TrackProposal(
                track_id=identity.track_id, category=identity.category, frames=np.asarray(frames),
                boxes=np.stack([identity.observations[f][0] for f in frames]),
                scores=np.asarray([identity.observations[f][1] for f in frames]),
                extra={"sam3_obj_id": identity.obj_id, "prompt": self.config.concept or identity.category},
            ))
        return out

    def run_info(self) -> dict:
        """What a proposal run records about this backend."""
        return {
            "backend": self.name,
            "checkpoint": str(self.checkpoint_path),
            "checkpoint_sha256": self.checkpoint_sha256,
            "bpe_path": str(self.bpe_path),
            "prompts": [self.config.concept] if self.config.concept else list(self.config.categories),
            "concept": self.config.concept,
            "device": str(self.device),
            "autocast": "bfloat16",
            "image_size": self.image_size,
            "fill_hole_area": self.fill_hole_area,
            "settings": self.config.as_dict(),
        }

    # -- prompts -----------------------------------------------------------------------------------
    @staticmethod
    def _check_boxes(arr: np.ndarray, state: Sam3State) -> np.ndarray:
        if arr.ndim != 2 or arr.shape[1] != 4 or len(arr) == 0:
            raise ValueError(f"boxes must have shape [n, 4] (xyxy) with n >= 1, got {list(arr.shape)}")
        if len(arr) > 1:
            raise ValueError(f"SAM 3 takes one exemplar box with a concept prompt, got {len(arr)}; "
                             "prompt the category with its best example")
        w, h = state.frames.width, state.frames.height
        for b in arr:
            if not (np.isfinite(b).all() and 0 <= b[0] < b[2] <= w and 0 <= b[1] < b[3] <= h):
                raise ValueError(
                    f"box {b.tolist()} is not finite, empty or inverted, or lies outside the {w}x{h} frame"
                )
        return arr.astype(np.float32)

    # -- propagation -------------------------------------------------------------------------------
    def _session(self, state: Sam3State) -> dict:
        """SAM 3's inference state (the keys of ``Sam3VideoInference.init_state``) on our frames."""
        session = {
            "image_size": self.image_size,
            "num_frames": len(state.images),
            "orig_height": int(state.frames.height),
            "orig_width": int(state.frames.width),
            "constants": {},
        }
        self.model._construct_initial_input_batch(session, state.images)
        session.update(tracker_inference_states=[], tracker_metadata={}, feature_cache={},
                       cached_frame_outputs={}, action_history=[], is_image_only=False)
        return session

    def _span(self, start: int, n: int) -> tuple[int, int]:
        """Frames tracked forward (start included) and backward (start excluded) from a frame."""
        reach = n if self.config.max_propagation_frames is None else self.config.max_propagation_frames
        return min(start + reach, n - 1) - start + 1, start - max(start - reach, 0)

    def _propagate(self, state: Sam3State) -> Iterator[FrameObjects]:
        n = state.frames.frame_count
        total = sum(sum(self._span(p.frame_index, n)) for p in state.prompts)
        done = 0
        w, h = state.frames.width, state.frames.height
        for prompt in state.prompts:
            state.stats["sessions"] += 1
            with torch.inference_mode(), self.on_device():
                session = self._session(state)
                boxes_xywh = labels = None
                if prompt.boxes is not None:
                    b = prompt.boxes
                    boxes_xywh = np.stack([b[:, 0] / w, b[:, 1] / h, (b[:, 2] - b[:, 0]) / w,
                                           (b[:, 3] - b[:, 1]) / h], axis=1)
                    labels = np.ones(len(b), dtype=np.int64)
                with self._autocast():
                    self.model.add_prompt(session, frame_idx=prompt.frame_index, text_str=prompt.text,
                                          boxes_xywh=boxes_xywh, box_labels=labels)
            for reverse in (False, True):
                if reverse and (prompt.frame_index == 0 or self.config.max_propagation_frames == 0):
                    continue
                if reverse:
                    # sam3 reads its action history to choose what a propagation does: after a
                    # pass from the last frame it would only fetch cached outputs; run in full
                    session["action_history"].clear()
                steps = self.model.propagate_in_video(
                    session, start_frame_idx=prompt.frame_index,
                    max_frame_num_to_track=self.config.max_propagation_frames, reverse=reverse,
                )
                while True:
                    with torch.inference_mode(), self.on_device(), self._autocast():
                        item = next(steps, None)
                    if item is None:
                        break
                    frame_idx, outputs = item
                    session["cached_frame_outputs"].pop(frame_idx, None)  # reported: not read again
                    frame_scores = session["tracker_metadata"].get("obj_id_to_tracker_score_frame_wise", {})
                    outputs = {**outputs, "tracker_scores": dict(frame_scores.get(frame_idx, {}))}
                    objects = self._observe(state, prompt.category, int(frame_idx), outputs)
                    done += 1
                    state.stats["frames_processed"] += 1
                    yield FrameObjects(
                        frame_index=int(frame_idx),
                        object_ids=[o[0] for o in objects],
                        boxes=np.asarray([o[1] for o in objects], dtype=np.float32).reshape(-1, 4),
                        scores=np.asarray([o[2] for o in objects], dtype=np.float32),
                        categories=[prompt.category] * len(objects),
                        fraction_done=min(1.0, done / total) if total else 1.0,
                    )
            del session
        state.propagated = True

    def _observe(self, state: Sam3State, category: str, frame_idx: int, outputs: dict) -> list[tuple]:
        """Boxes of the non-empty masks SAM 3 reports on one frame; records the observations."""
        obj_ids = [int(i) for i in outputs["out_obj_ids"]]
        if not obj_ids:
            return []
        masks = np.asarray(outputs["out_binary_masks"], dtype=bool)
        boxes, areas = mask_boxes(masks)
        # the score of an observation: the tracker's score of the object on this frame where SAM 3
        # has one, else its detection score (what out_probs holds: the score at the object's birth)
        tracked = outputs.get("tracker_scores") or {}
        probs = np.asarray([_frame_score(tracked.get(obj_id), p) for obj_id, p in zip(obj_ids, outputs["out_probs"])],
                           dtype=np.float64)
        objects = []
        for k, obj_id in enumerate(obj_ids):
            if areas[k] < self.config.min_mask_area or not math.isfinite(probs[k]):
                continue
            key = (category, obj_id)
            identity = state.identities.get(key)
            if identity is None:
                identity = state.identities[key] = Sam3Identity(len(state.identities) + 1, category, obj_id)
            identity.observations[frame_idx] = (boxes[k], float(probs[k]))
            state.stats["objects_reported"] += 1
            objects.append((identity.track_id, boxes[k], float(probs[k])))
        return objects


def _frame_score(tracked, detected) -> float:
    """The tracker's score on a frame when it is a probability (sam3 marks removed objects -1e4),
    else the detection score."""
    try:
        value = float(tracked)
    except (TypeError, ValueError):
        return float(detected)
    return value if math.isfinite(value) and 0.0 <= value <= 1.0 else float(detected)
