"""Language backends behind one interface (see ``base.py``): queries from approved facts,
relation proposals, within-video pre-labels and canonical tags.

``template`` is the embedded default (a deterministic verbaliser and predicate matcher, no model);
``transformers`` runs a local Hugging Face causal LM; ``openai`` asks an OpenAI-compatible
chat-completions endpoint (vLLM, llama.cpp server). Backends import lazily, so importing this
package needs neither torch nor transformers.
"""
from __future__ import annotations

from models.backends.registry import BackendEntry, entry_of

# The language backends: name -> its settings' config class and the backend built from that config.
LLMS: dict[str, BackendEntry] = {
    "template": BackendEntry(config="models.backends.llm.template:TemplateLLMConfig",
                             build="models.backends.llm.template:TemplateLLM"),
    "transformers": BackendEntry(config="models.backends.llm.transformers_backend:TransformersLLMConfig",
                                 build="models.backends.llm.transformers_backend:TransformersLLM"),
    "openai": BackendEntry(config="models.backends.llm.openai_chat:ChatEndpointConfig",
                           build="models.backends.llm.openai_backend:OpenAILLM"),
}
BACKENDS = tuple(LLMS)

__all__ = ["BACKENDS", "LLMS", "build_llm", "resolve_llm_settings"]


def _entry(backend: str) -> BackendEntry:
    return entry_of(LLMS, backend, "language backend")


def resolve_llm_settings(backend: str, settings: dict | None) -> dict:
    """The backend's complete settings with every default filled in (unknown keys and bad values
    raise ``ValueError``)."""
    return _entry(backend).resolved(settings)


def build_llm(backend: str, settings: dict | None = None):
    """The language backend of ``backend`` (a ``models.backends.llm.base.LanguageBackend``) from plain
    settings. The ``transformers`` backend loads its model here and fails with a clear
    ``ValueError`` when the folder is missing."""
    return _entry(backend).built(settings)
