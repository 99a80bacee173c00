"""Describing backends behind one interface (see ``base.py``): a trajectory in, a validated
:class:`models.facts.Description` (or a recorded failure) out.

``heuristic`` is the embedded default (clothing colours and motion measured from pixels and boxes,
no model); ``transformers`` runs a local Hugging Face vision-language model (Qwen2-VL family);
``openai`` asks an OpenAI-compatible chat-completions endpoint (vLLM, llama.cpp server). Backends
import lazily, so importing this package needs neither torch nor transformers.
"""
from __future__ import annotations

from models.vlm.base import (
    DescribeBudget,
    Describer,
    DescriberConfigError,
    DescribeRequest,
    DescribeResult,
    check_description,
    select_inputs,
)

BACKENDS = ("heuristic", "transformers", "openai")

__all__ = [
    "BACKENDS",
    "DescribeBudget",
    "DescribeRequest",
    "DescribeResult",
    "Describer",
    "DescriberConfigError",
    "build_describer",
    "check_description",
    "resolve_describer_settings",
    "select_inputs",
]


def _config_class(backend: str):
    if backend == "heuristic":
        from models.vlm.heuristic import HeuristicDescriberConfig

        return HeuristicDescriberConfig
    if backend == "transformers":
        from models.vlm.transformers_backend import TransformersVLMConfig

        return TransformersVLMConfig
    if backend == "openai":
        from models.vlm.openai_backend import OpenAIVLMConfig

        return OpenAIVLMConfig
    raise DescriberConfigError(f"unknown describing backend {backend!r}; known: {', '.join(BACKENDS)}")


def resolve_describer_settings(backend: str, settings: dict | None) -> dict:
    """The backend's complete settings with every default filled in (unknown keys and bad values
    raise ``ValueError``), so two spellings of one configuration resolve to the same dict."""
    return _config_class(backend).from_dict(settings).to_dict()


def build_describer(backend: str, settings: dict | None = None) -> Describer:
    """The describer of ``backend`` built from plain settings. The ``transformers`` backend loads
    its model here and fails with a clear ``ValueError`` when the folder is missing."""
    config = _config_class(backend).from_dict(settings)
    if backend == "heuristic":
        from models.vlm.heuristic import HeuristicDescriber

        return HeuristicDescriber(config)
    if backend == "transformers":
        from models.vlm.transformers_backend import TransformersDescriber

        return TransformersDescriber(config)
    from models.vlm.openai_backend import OpenAIDescriber

    return OpenAIDescriber(config)
