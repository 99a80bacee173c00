"""SAM 2 as a proposal tracker: box prompts on anchor frames, mask propagation both ways.

The real-model tracking backend. A local SAM 2 checkpoint and its model config are loaded
through SAM 2's own builder pieces (the config composed with the same overrides as
``sam2.build_sam.build_sam2_video_predictor``, ``hydra.utils.instantiate``,
``sam2.build_sam._load_checkpoint``)::

    tracker = Sam2Tracker(Sam2TrackerConfig(checkpoint="weights/sam2.1_hiera_tiny.pt"))
    state = tracker.init_state(frames)                 # frames: a FrameSource, read lazily
    tracker.add_prompt(state, category="person")       # detector boxes on the anchor frames
    tracker.add_prompt(state, category="ball", frame_index=40, boxes=[[10, 20, 30, 44]])
    for step in tracker.propagate(state):               # forward, then backward, per anchor
        ...
    proposals = tracker.proposals(state)                # identities merged across anchors


How a run goes:

1. **Anchors.** A box prompt lives on an anchor frame. Explicit ``boxes`` go on their
   ``frame_index``; a bare category prompt runs the category's detector on the anchor frames of
   the anchor policy (``anchor_frames``) and keeps the ``max_objects_per_anchor`` best boxes
   (a stateful detector, e.g. background subtraction, sees every frame up to the last anchor).
2. **Propagation.** Each anchor frame gets its own SAM 2 inference state holding the objects
   prompted there; ``propagate_in_video`` runs forward from the anchor, then ``reverse=True``
   backward from it (at most ``max_propagation_frames`` each way). Every (anchor, object) pair is
   a provisional identity.
3. **Observations.** On each frame an identity has an observation only if its mask (logits
   ``> mask_threshold`` at the original resolution) covers at least ``min_mask_area`` pixels; the
   box is the mask's pixel-edge bounding box ``[x_min, y_min, x_max + 1, y_max + 1]``, the score
   the model's object-presence probability. Nothing is interpolated.
4. **Identities.** Provisional identities of one category from different anchors are merged when
   the median IoU of their masks, over the frames where both have an observation, is at least
   ``merge_iou`` (greedy, best pairs first; two identities prompted on the same anchor are never
   merged). The IoU is computed on the model's own low-resolution mask grid (``image_size / 4``
   square), which preserves IoU because it is an axis-aligned rescaling of the image (a mask too
   small to show on that grid counts as IoU 0). On a frame covered by several members the member
   whose anchor is nearest wins.

Frames are fed from the ``FrameSource`` in memory, in the original order, preprocessed exactly as
SAM 2's JPEG loader does (RGB, PIL bicubic resize to ``image_size`` square, ImageNet mean/std),
one frame at a time when the model asks for it; masks come back at the original width and height.
Per-frame model outputs that the memory can no longer reach are dropped as propagation moves on
(``prune_memory``), so memory stays bounded on long videos with identical results.

The anchor policy and the identity merge are pure functions in
:mod:`models.backends.tracking.sam2_anchors`; frame preprocessing and the per-video state are in
:mod:`models.backends.tracking.sam2_frames`.
"""
from __future__ import annotations

import contextlib
import importlib.util
import logging
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from models.backends.tracking.base import (
    FrameObjects,
    FrameSource,
    TrackerConfigError,
    TrackProposal,
    check_frame_source,
    mask_boxes,
    resolve_torch_device,
)
from models.backends.tracking.sam2_anchors import (
    AnchorIdentity,
    MaskCrop,
    Observation,
    anchor_frames,
    merge_anchor_identities,
)
from models.backends.tracking.sam2_frames import BoxPrompt, FrameImages, Sam2State
from models.config import PlainConfig
from models.media.video import content_sha256

logger = logging.getLogger(__name__)


DEFAULT_MODEL_CONFIG = "configs/sam2.1/sam2.1_hiera_t.yaml"


@dataclass
class Sam2TrackerConfig(PlainConfig):
    """Settings of the SAM 2 proposal tracker (plain data; recorded with every proposal run)."""

    # local SAM 2 checkpoint (.pt holding {"model": state_dict}), e.g. sam2.1_hiera_tiny.pt
    checkpoint: str = ""
    # SAM 2 model YAML: a file path, or a config name inside the sam2 package
    model_config: str = DEFAULT_MODEL_CONFIG
    # "cpu", "cuda", "cuda:N" or "auto" (CUDA when available)
    device: str = "auto"
    # frames between anchor frames for bare category prompts; the first anchor is frame 0
    anchor_stride: int = 30
    # at most this many anchor frames per video; more are spread evenly over the video instead
    max_anchors: int = 8
    # frames tracked each way from an anchor (None: to both ends of the video)
    max_propagation_frames: int | None = None
    # detector settings per category prompt, passed to detectors.build_detector(category, settings)
    detector: dict[str, dict] = field(default_factory=dict)
    # at most this many detector boxes (highest scores) become prompts on one anchor frame
    max_objects_per_anchor: int = 20
    # a pixel belongs to the mask when the mask logit exceeds this (SAM 2 uses 0.0)
    mask_threshold: float = 0.0
    # masks smaller than this many pixels (original resolution) give no observation
    min_mask_area: int = 16
    # identities from different anchors merge when their median mask IoU on shared frames >= this
    merge_iou: float = 0.5
    # SAM 2's hole filling in low-res masks (pixels); needs the sam2._C CUDA extension and a GPU
    fill_hole_area: int = 8
    # keep preprocessed frames in host memory and copy each to the device when the model reads it
    offload_video_to_cpu: bool = False
    # keep SAM 2's per-frame outputs (memory features, masks) in host memory
    offload_state_to_cpu: bool = False
    # drop per-frame outputs the memory can no longer reach (same results, bounded memory)
    prune_memory: bool = True
    # on CUDA, run under torch.autocast(bfloat16) as SAM 2's demos do (CPU always runs float32)
    autocast_bfloat16: bool = True
    # SAM2VideoPredictorVOS: torch.compile the model components (CUDA only; slow first frames)
    vos_optimized: bool = False

    def __post_init__(self) -> None:
        problems = []
        detector = self.detector
        if not isinstance(detector, dict) or not all(isinstance(v, dict) for v in detector.values()):
            problems.append("detector must map category names to settings dicts")
        if self.anchor_stride < 1:
            problems.append(f"anchor_stride must be >= 1, got {self.anchor_stride}")
        if self.max_anchors < 1:
            problems.append(f"max_anchors must be >= 1, got {self.max_anchors}")
        if self.max_propagation_frames is not None and self.max_propagation_frames < 0:
            problems.append(f"max_propagation_frames must be >= 0 or None, got {self.max_propagation_frames}")
        if self.max_objects_per_anchor < 1:
            problems.append(f"max_objects_per_anchor must be >= 1, got {self.max_objects_per_anchor}")
        if not math.isfinite(self.mask_threshold):
            problems.append("mask_threshold must be finite")
        if self.min_mask_area < 1:
            problems.append(f"min_mask_area must be >= 1, got {self.min_mask_area}")
        if not 0.0 < self.merge_iou <= 1.0:
            problems.append(f"merge_iou must be in (0, 1], got {self.merge_iou}")
        if self.fill_hole_area < 0:
            problems.append(f"fill_hole_area must be >= 0, got {self.fill_hole_area}")
        if not (self.device == "auto" or self.device == "cpu" or self.device.startswith("cuda")):
            problems.append(f"device must be 'auto', 'cpu' or 'cuda[:N]', got {self.device!r}")
        if problems:
            raise ValueError("Sam2TrackerConfig: " + "; ".join(problems))

    def check_files(self) -> tuple[Path, Path]:
        """The resolved (checkpoint, model config) paths; TrackerConfigError when one is missing.

        Cheap (nothing is loaded or imported), so a configuration can be checked when it is saved.
        """
        checkpoint = Path(self.checkpoint).expanduser() if self.checkpoint else None
        if checkpoint is None or not checkpoint.is_file():
            raise TrackerConfigError(
                f"SAM 2 checkpoint not found: {self.checkpoint or '(none set)'}; set the tracker's "
                f"'checkpoint' setting to a local SAM 2 .pt file (e.g. sam2.1_hiera_tiny.pt; nothing "
                f"is downloaded)"
            )
        model_config = _resolve_model_config(self.model_config)
        sam2_installed = importlib.util.find_spec("sam2") is not None
        if model_config is None:
            raise TrackerConfigError(
                f"SAM 2 model config not found: {self.model_config or '(none set)'}; set the "
                f"tracker's 'model_config' setting to a SAM 2 YAML file or to a config name inside "
                f"the sam2 package such as {DEFAULT_MODEL_CONFIG}"
                + ("" if sam2_installed else " (the sam2 package is not installed)")
            )
        if not sam2_installed:
            raise TrackerConfigError("the sam2 package is not installed; install the 'sam2' extra")
        return checkpoint.resolve(), model_config


# -- tracker ---------------------------------------------------------------------------------------
def _resolve_model_config(name: str) -> Path | None:
    """A config file path, or a name inside the installed sam2 package (found without importing it)."""
    if not name:
        return None
    path = Path(name).expanduser()
    if path.is_file():
        return path.resolve()
    if not path.is_absolute():
        spec = importlib.util.find_spec("sam2")
        for root in (spec.submodule_search_locations or []) if spec else []:
            candidate = Path(root) / name
            if candidate.is_file():
                return candidate
    return None


class Sam2Tracker:
    """SAM 2 video predictor behind the Tracker interface (see the module docstring)."""

    name = "sam2"

    def __init__(self, config: Sam2TrackerConfig | None = None, *,
                 detector_factory: Callable[[str, dict], object] | None = None):
        config = config or Sam2TrackerConfig()
        checkpoint, model_config = config.check_files()  # before anything else
        self.config = config
        self.checkpoint_path = checkpoint
        self.model_config_path = model_config
        self.device = resolve_torch_device(config.device)
        if config.vos_optimized and self.device.type != "cuda":
            raise TrackerConfigError("vos_optimized compiles SAM 2 for CUDA; it cannot run on the CPU")
        self._detector_factory = detector_factory
        self.checkpoint_sha256 = content_sha256(self.checkpoint_path)
        self.fill_hole_area = self._effective_fill_hole_area()
        self.predictor = self._load_predictor()
        self.image_size = int(self.predictor.image_size)
        # How far (in frames) the model's memory reaches back: memory frames and object pointers.
        self.memory_reach = max(
            self.predictor.num_maskmem * self.predictor.memory_temporal_stride_for_eval + 1,
            self.predictor.max_obj_ptrs_in_encoder,
        )

    # -- loading -----------------------------------------------------------------------------------
    def _effective_fill_hole_area(self) -> int:
        """SAM 2 fills mask holes with its CUDA extension only; without it, no hole filling."""
        if self.config.fill_hole_area == 0:
            return 0
        if self.device.type == "cuda" and importlib.util.find_spec("sam2._C") is not None:
            return self.config.fill_hole_area
        logger.info(
            "SAM 2 hole filling is off: it needs the sam2._C CUDA extension and a CUDA device "
            "(device=%s); masks keep their small holes, boxes are practically unaffected", self.device,
        )
        return 0

    def model_overrides(self) -> list[tuple[str, object]]:
        """The overrides ``build_sam2_video_predictor`` applies (apply_postprocessing=True)."""
        if self.config.vos_optimized:
            target = [("model._target_", "sam2.sam2_video_predictor.SAM2VideoPredictorVOS"),
                      ("model.compile_image_encoder", True)]
        else:
            target = [("model._target_", "sam2.sam2_video_predictor.SAM2VideoPredictor")]
        return [*target, ("model.sam_mask_decoder_extra_args.dynamic_multimask_via_stability", True), ("model.sam_mask_decoder_extra_args.dynamic_multimask_stability_delta", 0.05), ("model.sam_mask_decoder_extra_args.dynamic_multimask_stability_thresh", 0.98), ("model.binarize_mask_from_pts_for_mem_enc", True), ("model.fill_hole_area", self.fill_hole_area)]

    def _load_predictor(self):
        from hydra.utils import instantiate
        from omegaconf import DictConfig, OmegaConf
        from sam2.build_sam import _load_checkpoint

        try:
            cfg = OmegaConf.load(self.model_config_path)
        except Exception as exc:
            raise TrackerConfigError(
                f"SAM 2 model config {self.model_config_path} is not readable YAML: {exc}"
            ) from exc
        if not isinstance(cfg, DictConfig) or "model" not in cfg:
            raise TrackerConfigError(f"SAM 2 model config {self.model_config_path} has no 'model' section")
        for key, value in self.model_overrides():
            OmegaConf.update(cfg, key, value, force_add=True)
        OmegaConf.resolve(cfg)
        try:
            model = instantiate(cfg.model, _recursive_=True)
        except Exception as exc:
            raise TrackerConfigError(
                f"SAM 2 model config {self.model_config_path} does not build a model: {exc}"
            ) from exc
        try:
            _load_checkpoint(model, str(self.checkpoint_path))
        except Exception as exc:  # missing/unexpected weights, no "model" key, not a checkpoint
            raise TrackerConfigError(
                f"SAM 2 checkpoint {self.checkpoint_path} does not load into the model built from "
                f"{self.model_config_path} ({type(exc).__name__}: "
                f"{exc or 'missing or unexpected weights, see the log'}); "
                f"checkpoint and model_config must be of the same SAM 2 variant"
            ) from exc
        return model.to(self.device).eval()

    # -- Tracker interface -------------------------------------------------------------------------
    def init_state(self, frames: FrameSource) -> Sam2State:
        check_frame_source(frames)
        device = torch.device("cpu") if self.config.offload_video_to_cpu else self.device
        return Sam2State(frames=frames, images=FrameImages(frames, self.image_size, device))

    def add_prompt(self, state: Sam2State, *, category: str, frame_index: int | None = None,
                   boxes: np.ndarray | None = None) -> None:
        """Add box prompts of one category: explicit boxes on a frame, or detector boxes.

        ``boxes`` (``[n, 4]`` xyxy, original pixels) need ``frame_index``. Without boxes the
        category's detector runs on ``frame_index``, or on every anchor frame of the policy.
        """
        if not isinstance(state, Sam2State):
            raise TypeError("state must come from Sam2Tracker.init_state")
        if state.propagated:
            raise ValueError("this state has already been propagated; start a new one with init_state")
        if not category or not isinstance(category, str):
            raise ValueError("category must be a non-empty string")
        n = state.frames.frame_count
        if frame_index is not None and not 0 <= int(frame_index) < n:
            raise ValueError(f"frame_index {frame_index} is outside 0..{n - 1}")
        if boxes is not None:
            if frame_index is None:
                raise ValueError("explicit boxes need the frame_index they were drawn on")
            arr = np.asarray(boxes, dtype=np.float64)
            if arr.ndim != 2 or arr.shape[1] != 4:
                raise ValueError(f"boxes must have shape [n, 4] (xyxy), got {list(arr.shape)}")
            clipped = self._clip_boxes(arr, state)
            bad = [i for i in range(len(arr)) if clipped[i] is None]
            if bad:
                raise ValueError(
                    f"box {arr[bad[0]].tolist()} is not finite, empty or inverted, or lies outside "
                    f"the {state.frames.width}x{state.frames.height} frame"
                )
            found = {int(frame_index): [(b, None) for b in clipped]}
        else:
            anchors = ([int(frame_index)] if frame_index is not None
                       else anchor_frames(n, self.config.anchor_stride, self.config.max_anchors))
            found = self._detect(state, category, anchors)
        if category not in state.categories:
            state.categories.append(category)
        for anchor, items in found.items():
            for box, score in items:
                state.prompts.setdefault(anchor, []).append(BoxPrompt(state.next_pid, category, box, score))
                state.next_pid += 1

    def propagate(self, state: Sam2State) -> Iterator[FrameObjects]:
        """Track every prompted object from its anchor forward, then backward (a generator).

        Anchors are processed in frame order; a frame is reported once per anchor pass that
        reaches it. ``object_ids`` are the per-anchor identities; ``proposals`` merges them and
        names each track after its smallest member id.
        """
        if not isinstance(state, Sam2State):
            raise TypeError("state must come from Sam2Tracker.init_state")
        if not state.categories:
            raise ValueError("no prompts: call add_prompt before propagate")
        if state.propagated:
            raise ValueError("this state has already been propagated")
        return self._propagate(state)

    def proposals(self, state: Sam2State) -> list[TrackProposal]:
        if not isinstance(state, Sam2State):
            raise TypeError("state must come from Sam2Tracker.init_state")
        if not state.propagated:
            raise ValueError("propagate the state to its end before asking for proposals")
        return merge_anchor_identities(list(state.identities.values()), self.config.merge_iou)

    def run_info(self) -> dict:
        """What a proposal run records about this backend."""
        return {
            "backend": self.name,
            "checkpoint": str(self.checkpoint_path),
            "checkpoint_sha256": self.checkpoint_sha256,
            "model_config": str(self.model_config_path),
            "device": str(self.device),
            "image_size": self.image_size,
            "fill_hole_area": self.fill_hole_area,
            "settings": self.config.as_dict(),
        }

    # -- prompts -----------------------------------------------------------------------------------
    @staticmethod
    def _clip_boxes(boxes: np.ndarray, state: Sam2State) -> list[np.ndarray | None]:
        w, h = state.frames.width, state.frames.height
        out = []
        for b in boxes:
            if not np.isfinite(b).all():
                out.append(None)
                continue
            c = np.array([min(max(b[0], 0), w), min(max(b[1], 0), h),
                          min(max(b[2], 0), w), min(max(b[3], 0), h)], dtype=np.float32)
            out.append(c if c[2] - c[0] >= 1 and c[3] - c[1] >= 1 else None)
        return out

    def _detect(self, state: Sam2State, category: str, anchors: list[int]) -> dict[int, list]:
        factory = self._detector_factory
        if factory is None:
            from models.backends.tracking.detectors import build_detector

            factory = build_detector
        detector = factory(category, dict(self.config.detector.get(category, {})))
        wanted = set(anchors)
        if getattr(detector, "stateful", False):
            # A stateful detector (background subtraction) must see every frame in order up to
            # the last anchor; only its answers on the anchor frames become prompts.
            if hasattr(detector, "reset"):
                detector.reset()
            frames = state.frames.iter_frames(0, max(anchors) + 1) if anchors else iter(())
        else:
            frames = ((a, state.frames.read(a)) for a in anchors)
        found: dict[int, list] = {}
        for anchor, frame in frames:
            boxes, scores = detector.detect(frame, anchor)
            if anchor not in wanted:
                continue
            boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
            scores = np.asarray(scores, dtype=np.float64).reshape(-1)
            if len(boxes) != len(scores):
                raise ValueError(
                    f"detector for {category!r} returned {len(boxes)} boxes and {len(scores)} scores"
                )
            kept = [(b, float(s)) for b, s in zip(self._clip_boxes(boxes, state), scores)
                    if b is not None and np.isfinite(s)]
            kept.sort(key=lambda item: -item[1])
            if kept:
                found[anchor] = kept[: self.config.max_objects_per_anchor]
        return found

    # -- propagation -------------------------------------------------------------------------------
    def _new_inference_state(self, state: Sam2State) -> dict:
        """SAM 2's inference state (the keys of SAM2VideoPredictor.init_state), on our frames."""
        from collections import OrderedDict

        offload_state = self.config.offload_state_to_cpu
        return {
            "images": state.images,
            "num_frames": len(state.images),
            "offload_video_to_cpu": self.config.offload_video_to_cpu,
            "offload_state_to_cpu": offload_state,
            "video_height": int(state.frames.height),
            "video_width": int(state.frames.width),
            "device": self.device,
            "storage_device": torch.device("cpu") if offload_state else self.device,
            "point_inputs_per_obj": {},
            "mask_inputs_per_obj": {},
            "cached_features": {},
            "constants": {},
            "obj_id_to_idx": OrderedDict(),
            "obj_idx_to_id": OrderedDict(),
            "obj_ids": [],
            "output_dict_per_obj": {},
            "temp_output_dict_per_obj": {},
            "frames_tracked_per_obj": {},
        }

    def _autocast(self):
        if self.device.type == "cuda" and self.config.autocast_bfloat16:
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def _span(self, anchor: int, n: int) -> tuple[int, int]:
        """Frames tracked forward (anchor included) and backward (anchor excluded) from an anchor."""
        reach = n if self.config.max_propagation_frames is None else self.config.max_propagation_frames
        forward = min(anchor + reach, n - 1) - anchor + 1
        backward = anchor - max(anchor - reach, 0)
        return forward, backward

    @torch.inference_mode()
    def _propagate(self, state: Sam2State) -> Iterator[FrameObjects]:
        n = state.frames.frame_count
        anchors = sorted(state.prompts)
        total = sum(sum(self._span(a, n)) for a in anchors)
        done = 0
        state.stats["anchors"] = len(anchors)
        for anchor in anchors:
            prompts = state.prompts[anchor]
            for p in prompts:
                state.identities[p.pid] = AnchorIdentity(p.pid, anchor, p.category)
            sam_state = self._new_inference_state(state)
            with self._autocast():
                for p in prompts:
                    self.predictor.add_new_points_or_box(
                        sam_state, frame_idx=anchor, obj_id=p.pid, box=torch.from_numpy(p.box.copy()),
                    )
            max_frames = self.config.max_propagation_frames
            for reverse in (False, True):
                if reverse and (anchor == 0 or max_frames == 0):
                    continue
                steps = self.predictor.propagate_in_video(
                    sam_state, start_frame_idx=anchor, max_frame_num_to_track=max_frames, reverse=reverse,
                )
                while True:
                    with self._autocast():
                        item = next(steps, None)
                        if item is None:
                            break
                        frame_idx, obj_ids, video_masks = item
                        if reverse and frame_idx == anchor:
                            continue  # the anchor frame was reported by the forward pass
                        objects = self._observe(state, sam_state, frame_idx, obj_ids, video_masks)
                        if self.config.prune_memory:
                            self._prune(sam_state, frame_idx, anchor, reverse)
                        self._note_storage(state, sam_state)
                    done += 1
                    state.stats["frames_processed"] += 1
                    yield FrameObjects(
                        frame_index=int(frame_idx),
                        object_ids=[o[0] for o in objects],
                        boxes=np.asarray([o[1] for o in objects], dtype=np.float32).reshape(-1, 4),
                        scores=np.asarray([o[2] for o in objects], dtype=np.float32),
                        categories=[o[3] for o in objects],
                        fraction_done=min(1.0, done / total) if total else 1.0,
                    )
            del sam_state
        state.propagated = True

    def _observe(self, state: Sam2State, sam_state: dict, frame_idx: int, obj_ids: list[int],
                 video_masks: torch.Tensor) -> list[tuple]:
        """Boxes of the non-empty masks on one frame; records the observations."""
        thr = self.config.mask_threshold
        boxes, areas = mask_boxes(video_masks[:, 0] > thr)          # [n, 4], [n]
        h, w = video_masks.shape[-2:]
        objects = []
        for k, pid in enumerate(obj_ids):
            if areas[k] < self.config.min_mask_area:
                continue
            obj_idx = sam_state["obj_id_to_idx"][pid]
            outputs = sam_state["output_dict_per_obj"][obj_idx]
            out = outputs["cond_frame_outputs"].get(frame_idx) or outputs["non_cond_frame_outputs"][frame_idx]
            score = float(torch.sigmoid(out["object_score_logits"].float()).reshape(-1)[0])
            low_res = (out["pred_masks"][0, 0] > thr).cpu().numpy()
            box = np.clip(boxes[k], 0, [w, h, w, h]).astype(np.float32)
            identity = state.identities[pid]
            identity.observations[int(frame_idx)] = Observation(box, score, MaskCrop.from_mask(low_res))
            objects.append((pid, box, score, identity.category))
        return objects

    def _prune(self, sam_state: dict, frame_idx: int, anchor: int, reverse: bool) -> None:
        """Drop non-conditioning outputs that no later frame of this anchor's passes reads.

        While tracking forward, frames more than ``memory_reach`` behind the current one are not
        read again, except those within reach of the anchor, which the backward pass reads; while
        tracking backward (the last pass), everything beyond reach ahead of the current frame goes.
        """
        reach = self.memory_reach
        for outputs in sam_state["output_dict_per_obj"].values():
            stored = outputs["non_cond_frame_outputs"]
            if reverse:
                stale = [t for t in stored if t > frame_idx + reach]
            else:
                stale = [t for t in stored if anchor + reach < t < frame_idx - reach]
            for t in stale:
                del stored[t]

    @staticmethod
    def _note_storage(state: Sam2State, sam_state: dict) -> None:
        stored = max((len(o["non_cond_frame_outputs"]) + len(o["cond_frame_outputs"])
                      for o in sam_state["output_dict_per_obj"].values()), default=0)
        state.stats["max_stored_frames"] = max(state.stats["max_stored_frames"], stored)
