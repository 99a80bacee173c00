"""Tracking backends behind one SAM 2-shaped interface (see ``base.py``).

``hog-bytetrack`` is the embedded default (OpenCV HOG people detector or background subtraction,
associated by ByteTrack); ``sam2`` propagates detector-anchored boxes with the SAM 2 video
predictor loaded from a local checkpoint. Backends import lazily so that importing this package
needs neither torch nor sam2.
"""
from __future__ import annotations

from models.tracking.base import (
    FrameObjects,
    FrameSource,
    Tracker,
    TrackerConfigError,
    TrackProposal,
    run_tracker,
)

BACKENDS = ("hog-bytetrack", "sam2")
# Settings that name files: they are recorded by content hash, not by path.
FILE_SETTINGS = ("checkpoint", "model_config")

__all__ = [
    "BACKENDS",
    "FILE_SETTINGS",
    "FrameObjects",
    "FrameSource",
    "TrackProposal",
    "Tracker",
    "TrackerConfigError",
    "build_tracker",
    "normalize_categories",
    "resolve_tracker_settings",
    "run_tracker",
]


def normalize_categories(categories: list[str]) -> list[str]:
    """Canonical category prompts ("  Person " -> "person"), de-duplicated, order kept; unknown ones
    raise ``TrackerConfigError`` naming the known categories."""
    from models.tracking.detectors import KNOWN_CATEGORIES, normalize_category

    out: list[str] = []
    for category in categories:
        name = normalize_category(category)
        if name not in KNOWN_CATEGORIES:
            raise TrackerConfigError(f"unknown category prompt {category!r}; known: {', '.join(KNOWN_CATEGORIES)}")
        if name and name not in out:
            out.append(name)
    if not out:
        raise TrackerConfigError("at least one category prompt is required")
    return out


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
    anchor_policy, detector_settings, tracker_settings = anchor_policy or {}, detector_settings or {}, tracker_settings or {}
    both = sorted(set(anchor_policy) & set(tracker_settings))
    if both:
        raise ValueError(f"{', '.join(both)} given both as anchor policy and as tracker settings; give each once")
    categories = normalize_categories(categories)
    settings = {**tracker_settings, **anchor_policy}
    if backend == "hog-bytetrack":
        if checkpoint_path or model_config_path:
            raise ValueError("hog-bytetrack uses no checkpoint or model config; leave both empty")
        from models.tracking.hog_bytetrack import HogByteTrackConfig

        if detector_settings:
            settings["detectors"] = detector_settings
        return HogByteTrackConfig.from_dict({**settings, "categories": categories}).to_dict()
    if backend == "sam2":
        from models.tracking.sam2_tracker import Sam2TrackerConfig

        if detector_settings:
            settings["detector"] = detector_settings
        settings.update(checkpoint=checkpoint_path, model_config=model_config_path)
        try:
            config = Sam2TrackerConfig.from_dict(settings)
        except (TypeError, AttributeError) as exc:  # a setting of the wrong type
            raise ValueError(f"SAM 2 settings: {exc}") from exc
        config.check_files()
        return config.as_dict()
    raise TrackerConfigError(f"unknown tracking backend {backend!r}; known: {', '.join(BACKENDS)}")


def build_tracker(backend: str, settings: dict) -> Tracker:
    """The tracker for ``backend`` built from resolved settings (see ``resolve_tracker_settings``)."""
    if backend == "hog-bytetrack":
        from models.tracking.hog_bytetrack import HogByteTrackConfig, HogByteTrackTracker

        return HogByteTrackTracker(HogByteTrackConfig.from_dict(settings))
    if backend == "sam2":
        from models.tracking.sam2_tracker import Sam2Tracker, Sam2TrackerConfig

        return Sam2Tracker(Sam2TrackerConfig.from_dict(settings))
    raise TrackerConfigError(f"unknown tracking backend {backend!r}; known: {', '.join(BACKENDS)}")
