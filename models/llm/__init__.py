"""Language backends behind one interface (see ``base.py``): queries from approved facts,
relation proposals, within-video pre-labels and canonical tags.

``template`` is the embedded default (a deterministic verbaliser and predicate matcher, no model);
``transformers`` runs a local Hugging Face causal LM; ``openai`` asks an OpenAI-compatible
chat-completions endpoint (vLLM, llama.cpp server). Backends import lazily, so importing this
package needs neither torch nor transformers.
"""
from __future__ import annotations

BACKENDS = ("template", "transformers", "openai")

__all__ = ["BACKENDS", "build_llm", "resolve_llm_settings"]


def _config_class(backend: str):
    if backend == "template":
        from models.llm.template import TemplateLLMConfig

        return TemplateLLMConfig
    if backend == "transformers":
        from models.llm.transformers_backend import TransformersLLMConfig

        return TransformersLLMConfig
    if backend == "openai":
        from models.llm.openai_chat import ChatEndpointConfig

        return ChatEndpointConfig
    raise ValueError(f"unknown language backend {backend!r}; known: {', '.join(BACKENDS)}")


def resolve_llm_settings(backend: str, settings: dict | None) -> dict:
    """The backend's complete settings with every default filled in (unknown keys and bad values
    raise ``ValueError``)."""
    return _config_class(backend).from_dict(settings).to_dict()


def build_llm(backend: str, settings: dict | None = None):
    """The language backend of ``backend`` (a ``models.llm.base.LanguageBackend``) from plain
    settings. The ``transformers`` backend loads its model here and fails with a clear
    ``ValueError`` when the folder is missing."""
    config = _config_class(backend).from_dict(settings)
    if backend == "template":
        from models.llm.template import TemplateLLM

        return TemplateLLM(config)
    if backend == "transformers":
        from models.llm.transformers_backend import TransformersLLM

        return TransformersLLM(config)
    from models.llm.openai_backend import OpenAILLM

    return OpenAILLM(config)
