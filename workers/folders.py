"""The folders of this host that runs write to: training output and the frozen-feature cache."""
from __future__ import annotations

from pathlib import Path

from django.conf import settings


def training_root() -> Path:
    """Where a training run writes its ``out_dir`` (``VAR_DIR/training/<run id>``)."""
    return Path(settings.VAR_DIR) / "training"


def feature_cache_dir() -> str:
    """The content-keyed frozen-feature cache shared by every run of this machine."""
    return str(Path(settings.VAR_DIR) / "feature_cache")
