"""Tracking backends behind one SAM 2-shaped interface (see ``base.py``).

``hog-bytetrack`` is the embedded default (OpenCV HOG people detector or background subtraction,
associated by ByteTrack); ``sam2`` propagates detector-anchored boxes with the SAM 2 video
predictor loaded from a local checkpoint. Backends import lazily so that importing this package
needs neither torch nor sam2.
"""
from __future__ import annotations

from models.tracking.base import FrameObjects, FrameSource, Tracker, TrackerConfigError, TrackProposal, run_tracker

BACKENDS = ("hog-bytetrack", "sam2")

__all__ = ["BACKENDS", "FrameObjects", "FrameSource", "Tracker", "TrackerConfigError", "TrackProposal",
           "build_tracker", "run_tracker", "tracker_settings_for"]


def tracker_settings_for(backend: str, *, categories: list[str], checkpoint_path: str = "",
                         model_config_path: str = "", anchor_policy: dict | None = None,
                         detector_settings: dict | None = None, tracker_settings: dict | None = None,
                         validate: bool = False) -> dict:
    """Fold the parts of a stored proposal configuration into one backend settings dict.

    With ``validate`` the backend's config class parses it (unknown keys, bad values and, for
    SAM 2, missing files raise ``ValueError``/``TrackerConfigError``).
    """
    anchor_policy, detector_settings, tracker_settings = anchor_policy or {}, detector_settings or {}, tracker_settings or {}
    if backend == "hog-bytetrack":
        settings = {**tracker_settings, **anchor_policy}
        if detector_settings:
            settings["detectors"] = detector_settings
        if validate:
            from models.tracking.hog_bytetrack import HogByteTrackConfig

            HogByteTrackConfig.from_dict(settings)
            _check_categories(categories)
        return settings
    if backend == "sam2":
        settings = {**tracker_settings, **anchor_policy, "checkpoint": checkpoint_path, "model_config": model_config_path}
        if detector_settings:
            settings["detector"] = detector_settings
        if validate:
            from models.tracking.sam2_tracker import Sam2TrackerConfig

            Sam2TrackerConfig.from_dict(settings).check_files()
            _check_categories(categories)
        return settings
    raise TrackerConfigError(f"unknown tracking backend {backend!r}; known: {', '.join(BACKENDS)}")


def _check_categories(categories: list[str]) -> None:
    from models.tracking.detectors import build_detector

    for category in categories:
        build_detector(category, {})


def build_tracker(backend: str, settings: dict) -> Tracker:
    """The tracker for ``backend`` built from a settings dict (see ``tracker_settings_for``)."""
    if backend == "hog-bytetrack":
        from models.tracking.hog_bytetrack import HogByteTrackConfig, HogByteTrackTracker

        return HogByteTrackTracker(HogByteTrackConfig.from_dict(settings))
    if backend == "sam2":
        from models.tracking.sam2_tracker import Sam2Tracker, Sam2TrackerConfig

        return Sam2Tracker(Sam2TrackerConfig.from_dict(settings))
    raise TrackerConfigError(f"unknown tracking backend {backend!r}; known: {', '.join(BACKENDS)}")
