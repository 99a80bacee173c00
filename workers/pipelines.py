"""A retrieval pipeline as requests give it and records keep it, and as the executor runs it.

A request's pipeline names each stage's backend (``rewrite``, ``scorer``, ``comparator``) by an
implementation that reaches nothing (``heuristic``, ``template``) or by a backend the operator
registered (``common.registry``); it never carries an endpoint, a path or a credential. The
record keeps the registered names with every default filled in; :func:`pipeline_resolve` turns
a request or a record into the :class:`RetrievalPipeline` that runs, with each registered name
replaced by what it stands for, every time a pipeline is built.
"""
from __future__ import annotations

import hashlib
import json

from common.errors import ApplicationError
from common.registry import backend_resolve, is_registered, refuse_locations, without_locations
from models.retrievers.pipeline import RetrievalPipeline

STAGES = ("rewrite", "scorer", "comparator")     # the pipeline's stages that name a backend


def pipeline_resolve(pipeline: dict, *, field: str = "pipeline") -> tuple[RetrievalPipeline, dict]:
    """``(the pipeline to run, its record)`` of a request's or a record's ``pipeline``; 400
    ``invalid_pipeline`` when it does not validate, ``location_in_request`` or
    ``backend_not_registered`` (naming the field) when it would reach out by itself."""
    if not isinstance(pipeline, dict):
        raise ApplicationError(f"{field} must be a JSON object", code="invalid_pipeline")
    refuse_locations({k: v for k, v in pipeline.items() if k not in STAGES}, field=field)
    resolved, registered = dict(pipeline), {}
    for stage in STAGES:
        spec = pipeline.get(stage)
        if not isinstance(spec, dict):
            continue                             # absent (the default) or malformed (from_dict says so)
        refuse_locations({k: v for k, v in spec.items() if k != "settings"}, field=f"{field}.{stage}")
        settings = spec.get("settings") or {}
        if not isinstance(settings, dict):
            continue
        name = spec.get("backend")
        implementation, settings = backend_resolve(name, settings, field=f"{field}.{stage}")
        resolved[stage] = {**spec, "settings": settings, **({"backend": implementation} if "backend" in spec else {})}
        if is_registered(name):
            registered[stage] = name
    try:
        runnable = RetrievalPipeline.from_dict(resolved)
    except (ValueError, TypeError) as exc:
        raise ApplicationError(f"invalid {field}: {exc}", code="invalid_pipeline") from None
    record = runnable.as_dict()
    for stage, name in registered.items():
        record[stage] = {**record[stage], "backend": name, "settings": without_locations(record[stage]["settings"])}
    return runnable, record


def pipeline_sha256(record: dict) -> str:
    """SHA-256 of a pipeline record's canonical JSON (``RetrievalPipeline.sha256`` of the same
    dict when it names no registered backend)."""
    return hashlib.sha256(json.dumps(record, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
