"""The version of the defaults a run reads (no Django).

A training or evaluation run fills every setting it was not given from the code's defaults: the
model kind's config class (``models.retrievers.registry``, nested configs and the model's
``optimizer_defaults`` included) and :class:`models.training.trainer.TrainConfig`. Each of these
classes keeps a ``DEFAULTS_VERSION`` integer beside its defaults, bumped by the change that alters
one, so two runs with the same stored config but different versions may have trained different
models. Runs and experiments record :func:`defaults_version`; :func:`defaults_label` names it in
tables, and :func:`defaults_order` sorts labels so a table can mark runs on older defaults.
"""
from __future__ import annotations

from collections.abc import Mapping

from models.retrievers.registry import RETRIEVERS
from models.training.trainer import TrainConfig

UNRECORDED = "unrecorded"


def defaults_version(model_kind: str) -> dict:
    """``{"model_kind", "model": <the kind's config DEFAULTS_VERSION>, "train": TrainConfig's}``;
    an unknown kind is a ``ValueError``."""
    kind = RETRIEVERS.get(model_kind)
    if kind is None:
        raise ValueError(f"unknown model kind {model_kind!r}; known: {', '.join(sorted(RETRIEVERS))}")
    return {"model_kind": model_kind, "model": int(kind.config.DEFAULTS_VERSION),
            "train": int(TrainConfig.DEFAULTS_VERSION)}


def defaults_label(record: Mapping | None) -> str:
    """``"vtrajembed v2, train v1"`` for a recorded :func:`defaults_version` (``"... resumed over
    <label>"`` when a run continued a checkpoint of other defaults), ``"unrecorded"`` for a run
    from before versions were kept."""
    if not record or "model" not in record:
        return UNRECORDED
    label = f"{record.get('model_kind', '?')} v{record['model']}, train v{record.get('train', '?')}"
    if record.get("resumed_over"):
        label += f" resumed over {defaults_label(record['resumed_over'])}"
    return label


def defaults_order(record: Mapping | None) -> tuple[int, int, int]:
    """A sort key: unrecorded first, then by model and train version; a run resumed over other
    defaults sorts below a clean run of its own version."""
    if not record or "model" not in record:
        return (-1, -1, -1)
    return (int(record["model"]), int(record.get("train", 0)), 0 if record.get("resumed_over") else 1)


def same_defaults(a: Mapping | None, b: Mapping | None) -> bool:
    """Whether two records name the same defaults (the commit and anything else aside)."""
    keys = ("model_kind", "model", "train")
    return bool(a) == bool(b) and (not a or all(a.get(k) == b.get(k) for k in keys))
