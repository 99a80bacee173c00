"""Describing backends behind one interface (see ``base.py``): a trajectory in, a validated
:class:`models.facts.Description` (or a recorded failure) out.

``heuristic`` is the embedded default (clothing colours and motion measured from pixels and boxes,
no model); ``transformers`` runs a local Hugging Face vision-language model (Qwen2-VL family);
``openai`` asks an OpenAI-compatible chat-completions endpoint (vLLM, llama.cpp server). Backends
import lazily, so importing this package needs neither torch nor transformers.

Scoring backends (``scoring.py``: a (query text, trajectory) pair in, SCOUT's holistic log P(yes)
and decomposed appearance / action / scene scores out) sit behind a second registry,
:data:`SCORERS` (``heuristic``: the pixel scorer; ``transformers``; ``openai``).
"""
from __future__ import annotations

from models.backends.registry import BackendEntry, entry_of
from models.backends.vlm.base import (
    DescribeBudget,
    Describer,
    DescriberConfigError,
    DescribeRequest,
    DescribeResult,
    check_description,
    select_inputs,
)
from models.backends.vlm.scoring import (
    SCORERS,
    ScoreCounts,
    Scorer,
    ScoreRequest,
    ScoreResult,
    build_scorer,
    resolve_scorer_settings,
)

# The describing backends: name -> its settings' config class and the describer built from that config.
DESCRIBERS: dict[str, BackendEntry] = {
    "heuristic": BackendEntry(config="models.backends.vlm.heuristic:HeuristicDescriberConfig",
                              build="models.backends.vlm.heuristic:HeuristicDescriber"),
    "transformers": BackendEntry(config="models.backends.vlm.transformers_backend:TransformersVLMConfig",
                                 build="models.backends.vlm.transformers_backend:TransformersDescriber"),
    "openai": BackendEntry(config="models.backends.vlm.openai_backend:OpenAIVLMConfig",
                           build="models.backends.vlm.openai_backend:OpenAIDescriber"),
}
BACKENDS = tuple(DESCRIBERS)

__all__ = [
    "BACKENDS",
    "DESCRIBERS",
    "SCORERS",
    "DescribeBudget",
    "DescribeRequest",
    "DescribeResult",
    "Describer",
    "DescriberConfigError",
    "ScoreCounts",
    "ScoreRequest",
    "ScoreResult",
    "Scorer",
    "build_describer",
    "build_scorer",
    "check_description",
    "resolve_describer_settings",
    "resolve_scorer_settings",
    "select_inputs",
]


def _entry(backend: str) -> BackendEntry:
    return entry_of(DESCRIBERS, backend, "describing backend", DescriberConfigError)


def resolve_describer_settings(backend: str, settings: dict | None) -> dict:
    """The backend's complete settings with every default filled in (unknown keys and bad values
    raise ``ValueError``), so two spellings of one configuration resolve to the same dict."""
    return _entry(backend).resolved(settings)


def build_describer(backend: str, settings: dict | None = None) -> Describer:
    """The describer of ``backend`` built from plain settings. The ``transformers`` backend loads
    its model here and fails with a clear ``ValueError`` when the folder is missing."""
    return _entry(backend).built(settings)
