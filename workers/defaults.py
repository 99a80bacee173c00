"""What runs and experiments record of the defaults they read (``models.training.defaults``): the
model kind's and the trainer's ``DEFAULTS_VERSION`` with the commit of the code that read them."""
from __future__ import annotations

from collections.abc import Mapping

from common.versions import software_versions
from models.training.defaults import defaults_version, same_defaults


def defaults_record(model_kind: str, *, commit: str | None = None) -> dict:
    """:func:`models.training.defaults.defaults_version` of ``model_kind`` and ``commit`` (this
    checkout's, ``""`` outside git, when not given)."""
    if commit is None:
        commit = software_versions().get("trajlab_commit", "")
    return defaults_version(model_kind) | {"commit": commit}


def attempt_defaults(*, model_kind: str, recorded: Mapping | None, steps_done: int) -> dict:
    """The record of a training attempt that starts now: ``recorded`` as it is when this code's
    defaults are the same; this code's when they differ, with ``resumed_over`` the earlier record
    when the attempt continues a checkpoint trained under it (``steps_done`` > 0)."""
    now = defaults_record(model_kind)
    if recorded and same_defaults(recorded, now):
        return dict(recorded)
    if recorded and steps_done > 0:
        now["resumed_over"] = dict(recorded)
    return now
