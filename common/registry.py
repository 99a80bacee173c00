"""The model backends an operator registered: the only way a request reaches a model endpoint, a
model file or a server folder.

``TRAJLAB_BACKENDS`` (settings; JSON in the environment variable of that name or in the file that
``TRAJLAB_BACKENDS_FILE`` names) maps a name to an entry::

    {"qwen-vl": {"backend": "openai", "label": "Qwen2.5-VL-7B on the GPU box",
                 "settings": {"base_url": "http://gpu-box:8000/v1", "model": "Qwen2.5-VL-7B-Instruct"}},
     "sam2-large": {"backend": "sam2", "settings": {"checkpoint": "/models/sam2.1_hiera_large.pt",
                                                     "model_config": "configs/sam2.1/sam2.1_hiera_l.yaml"}},
     "qwen-0.5b": {"path": "/models/Qwen2.5-0.5B"}}

A request names a backend where it names an implementation (a describer's ``name``, a pipeline
stage's ``backend``, a proposal configuration's ``backend``): the registered name stands for the
entry's implementation with the entry's settings, on top of the request's own settings. A model
configuration's folder field (``lm_path``, an encoder's ``path``) may hold the name of a folder
entry (``{"path": ...}``). Nothing else: a request that carries a location itself (a key of
:data:`LOCATION_KEYS` anywhere in its settings) or names an implementation that reaches out
(:data:`REACHING`) unregistered is a 400 that names the field. Records keep the registered name,
never what it stands for, and the name is resolved again wherever the backend is built.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from common.errors import ApplicationError
from models.backends.llm import BACKENDS as LLMS
from models.backends.tracking import BACKENDS as TRACKERS
from models.backends.vlm import BACKENDS as DESCRIBERS
from models.backends.vlm.scoring import SCORER_BACKENDS
from models.facts import canonical_json

# Settings that say where something is or what it may use: set by the operator only.
LOCATION_KEYS = frozenset({
    "base_url", "url", "endpoint", "api_key", "api_key_env",            # endpoints and their credentials
    "model_path", "path", "lm_path", "checkpoint", "checkpoint_path",   # model folders and files
    "model_config", "model_config_path", "bpe_path",
    "cache_dir", "out_dir", "cache_folder",                              # server folders
    "synonym_encoder",                                                   # the template writer's encoder folder
    "roi_projector",                                                     # an encoder's projector file
})
# Folder fields of model configurations that may hold the name of a registered folder entry.
FOLDER_KEYS = frozenset({"path", "lm_path", "model_path", "roi_projector"})
# Values of location keys that name a model packaged with the platform, not a place.
PACKAGED = frozenset({"packaged-minilm"})
# Implementations that call an endpoint or load a model folder: usable through an entry only.
REACHING = frozenset({"openai", "transformers"})
# What a request may set on a registered backend; everything else (its model, endpoint, limits,
# extra request fields) is the operator's entry.
TUNABLE = frozenset({"temperature", "seed"})
# The implementation families a request names a backend of, by use.
FAMILIES = (("tracker", TRACKERS), ("describer", DESCRIBERS), ("scorer", SCORER_BACKENDS), ("writer", LLMS))
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@dataclass(frozen=True)
class RegisteredBackend:
    """One entry of ``TRAJLAB_BACKENDS``."""

    name: str
    backend: str = ""                            # the implementation ("openai", "sam2", ...); "" for a folder
    settings: dict = field(default_factory=dict)  # the implementation's settings, locations included
    path: str = ""                               # a folder entry: the model folder
    label: str = ""                              # what people see

    def uses(self) -> list[str]:
        """What a request may name it as: ``tracker``, ``describer``, ``scorer`` (pipeline scorers
        and comparators), ``writer`` (query writing and rewrites) or ``folder`` (a model
        configuration's folder field)."""
        if self.path:
            return ["folder"]
        return [use for use, names in FAMILIES if self.backend in names]

    def public(self, *, manager: bool) -> dict:
        """The entry as the API shows it: the settings (and so every location) to managers only."""
        out = {"name": self.name, "backend": self.backend, "label": self.label, "uses": self.uses()}
        if manager:
            out["settings"] = dict(self.settings)
            out["path"] = self.path
        return out


def parse_backends(raw: object, *, reserved: frozenset[str] = frozenset()) -> dict[str, RegisteredBackend]:
    """The registry from its JSON form; ``ImproperlyConfigured`` naming the bad entry."""
    if not isinstance(raw, dict):
        raise ImproperlyConfigured("TRAJLAB_BACKENDS must be a JSON object: name -> entry")
    out = {}
    for name, entry in raw.items():
        where = f"TRAJLAB_BACKENDS[{name!r}]"
        if not isinstance(name, str) or not NAME.match(name) or name in reserved:
            raise ImproperlyConfigured(f"{where}: a name is 1-64 letters, digits, '.', '_' or '-' and not an "
                                       f"implementation's name ({', '.join(sorted(reserved))})")
        if not isinstance(entry, dict) or set(entry) - {"backend", "settings", "path", "label"}:
            raise ImproperlyConfigured(f"{where}: an entry is an object with backend, settings, path and label")
        backend, entry_settings = entry.get("backend", ""), entry.get("settings", {})
        path, label = entry.get("path", ""), entry.get("label", "")
        if not all(isinstance(v, str) for v in (backend, path, label)) or not isinstance(entry_settings, dict):
            raise ImproperlyConfigured(f"{where}: backend, path and label are strings, settings an object")
        if bool(backend) == bool(path):
            raise ImproperlyConfigured(f"{where}: give either a backend (with its settings) or a folder path")
        out[name] = RegisteredBackend(name=name, backend=backend, settings=entry_settings, path=path, label=label)
    return out


def embedded_backends() -> dict[str, list[str]]:
    """Per use, the implementations a request may name without an entry (they reach nothing)."""
    return {use: [name for name in names if name not in REACHING] for use, names in FAMILIES}


def implementation_names() -> frozenset[str]:
    """Every implementation's name (no entry may take one)."""
    return frozenset((*LLMS, *TRACKERS, *DESCRIBERS, *SCORER_BACKENDS))


def registered_backends() -> dict[str, RegisteredBackend]:
    """``settings.TRAJLAB_BACKENDS`` parsed (checked at start-up by ``common.apps``)."""
    return parse_backends(settings.TRAJLAB_BACKENDS, reserved=implementation_names())


def _registry_hint() -> str:
    names = sorted(registered_backends())
    listed = f"registered here: {', '.join(names)}" if names else "none is registered here"
    return f"name a backend the operator registered (GET /api/backends/; {listed})"


def refuse_locations(value: object, *, field: str, folders: bool = False) -> None:
    """400 ``location_in_request`` for a location key (:data:`LOCATION_KEYS`) with a value anywhere
    in ``value``, naming the field (``pipeline.scorer.settings.base_url``). With ``folders``, a
    folder field (:data:`FOLDER_KEYS`) may hold the name of a registered folder entry."""
    stack = [(value, field)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, dict):
            for key, sub in item.items():
                at = f"{where}.{key}" if where else str(key)
                if key in LOCATION_KEYS and sub not in (None, "", {}, []) and not (
                        isinstance(sub, str) and sub in PACKAGED):
                    entry = registered_backends().get(sub) if isinstance(sub, str) else None
                    if folders and key in FOLDER_KEYS and entry is not None and entry.path:
                        continue
                    raise ApplicationError(
                        f"{at}: a request cannot name a server path, endpoint or credential; {_registry_hint()}",
                        code="location_in_request", extra={"field": at})
                stack.append((sub, at))
        elif isinstance(item, list | tuple):
            stack.extend((sub, f"{where}[{i}]") for i, sub in enumerate(item))


def backend_resolve(name: object, request_settings: dict | None, *, field: str,
                    settings_field: str | None = None) -> tuple[str, dict]:
    """The implementation and complete settings a request's backend ``name`` stands for: a
    registered name gives its entry's implementation with the entry's settings, and the request
    may tune only :data:`TUNABLE` ones on top (any other key is the operator's: 400
    ``setting_not_allowed``); any other name is an implementation taken with the request's
    settings, refused when it reaches out (:data:`REACHING`). The request's settings
    (``settings_field`` in messages; default ``<field>.settings``) never carry a location."""
    if request_settings is not None and not isinstance(request_settings, dict):
        raise ApplicationError(f"{field}: settings must be a JSON object", code="invalid_backend",
                               extra={"field": field})
    request_settings = dict(request_settings or {})
    where = f"{field}.settings" if settings_field is None else settings_field
    refuse_locations(request_settings, field=where)
    entry = registered_backends().get(name) if isinstance(name, str) else None
    if entry is not None:
        if entry.path:
            raise ApplicationError(f"{field}: {name!r} is a registered model folder, not a backend",
                                   code="backend_not_registered", extra={"field": field})
        fixed = sorted(str(k) for k in set(request_settings) - TUNABLE)
        if fixed:
            raise ApplicationError(
                f"{where}.{fixed[0]}: the operator's entry {name!r} sets everything but {', '.join(sorted(TUNABLE))}",
                code="setting_not_allowed", extra={"field": f"{where}.{fixed[0]}", "tunable": sorted(TUNABLE)})
        return entry.backend, {**entry.settings, **request_settings}
    if name in REACHING:
        raise ApplicationError(f"{field}: {name!r} calls a model endpoint or loads a model folder; {_registry_hint()}",
                               code="backend_not_registered", extra={"field": field})
    return name, request_settings


def is_registered(name: object) -> bool:
    return isinstance(name, str) and name in registered_backends()


def without_locations(values: dict) -> dict:
    """``values`` without its location keys (what a record of an embedded backend keeps)."""
    return {k: v for k, v in values.items() if k not in LOCATION_KEYS}


def locations_hidden(value: object) -> object:
    """A copy of ``value`` without any location key at any depth (a record as non-managers see it)."""
    if isinstance(value, dict):
        return {k: locations_hidden(v) for k, v in value.items() if k not in LOCATION_KEYS}
    if isinstance(value, list):
        return [locations_hidden(v) for v in value]
    return value


def tunables(values: dict) -> dict:
    """What a record of a registered backend keeps of its settings: the request's tunables."""
    return {k: v for k, v in values.items() if k in TUNABLE}


def entry_digest(name: object) -> str:
    """SHA-256 of what a registered name stands for (its implementation, settings and path), for
    records that must change when the operator re-points the name; ``""`` for other names."""
    entry = registered_backends().get(name) if isinstance(name, str) else None
    if entry is None:
        return ""
    return hashlib.sha256(canonical_json({"backend": entry.backend, "settings": entry.settings,
                                          "path": entry.path}).encode()).hexdigest()


def folders_resolve(value: object) -> object:
    """A copy of a model configuration with each folder field that names a registered folder
    entry replaced by the entry's path (what the worker builds from; the record keeps the name)."""
    entries = registered_backends()
    if isinstance(value, dict):
        return {k: (entries[v].path if k in FOLDER_KEYS and isinstance(v, str) and v in entries and entries[v].path
                    else folders_resolve(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [folders_resolve(v) for v in value]
    return value
