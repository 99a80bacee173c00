"""The one registry of trainable retrievers: each model kind's config class and builder.

The trainer (:func:`models.training.trainer.build_model`) builds from it and the platform's training
service checks a run's ``model`` dict with the kind's ``config.from_dict`` before anything is queued.
A new kind is one more line here; nothing registers itself at import time.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch import nn

from models.retrievers.actpair.retriever import ActPairRetrieverConfig
from models.retrievers.actpair.retriever import build_retriever as build_actpair_retriever
from models.retrievers.scout.retriever import ScoutRetrieverConfig
from models.retrievers.scout.retriever import build_retriever as build_scout_retriever
from models.retrievers.vtrajembed.model import VTrajEmbedConfig, build_vtrajembed


@dataclass(frozen=True)
class ModelKind:
    """A trainable retriever: the config class of its ``model`` dict and its builder."""

    config: type                                 # has from_dict(dict) (strict) and as_dict()
    build: Callable[[dict], nn.Module]           # builder(config dict) -> module of the retriever interface


RETRIEVERS: dict[str, ModelKind] = {
    "vtrajembed": ModelKind(config=VTrajEmbedConfig, build=build_vtrajembed),
    "scout": ModelKind(config=ScoutRetrieverConfig, build=build_scout_retriever),
    "actpair": ModelKind(config=ActPairRetrieverConfig, build=build_actpair_retriever),
}
