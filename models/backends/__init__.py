"""Pluggable backends, each a small interface with an embedded CPU default and a real model loaded
from a local path or an OpenAI-compatible endpoint: ``tracking``, ``vlm`` (describers), ``llm``
(query writers) and ``encoders`` (frozen image and text encoders). Each package's ``__init__``
holds its explicit registry of names to config classes and builders."""
