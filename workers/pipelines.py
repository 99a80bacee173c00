"""A retrieval pipeline as requests give it and records keep it, and as the executor runs it.

A request's pipeline names each stage's backend (``rewrite``, ``scorer``, ``comparator``) by an
implementation that reaches nothing (``heuristic``, ``template``) or by a backend the operator
registered (``common.registry``); it never carries an endpoint, a path or a credential, and of a
registered backend it sets only the tunables. The record keeps the registered names with every
default filled in; :func:`pipeline_resolve` turns a request or a record into the
:class:`RetrievalPipeline` that runs, with each registered name replaced by what it stands for,
every time a pipeline is built.
"""
from __future__ import annotations

from common.errors import ApplicationError
from common.registry import backend_resolve, entry_digest, is_registered, refuse_locations, tunables
from models.retrievers.pipeline import RetrievalPipeline, record_sha256

STAGES = ("rewrite", "scorer", "comparator")     # the pipeline's stages that name a backend


def pipeline_resolve(pipeline: dict, *, field: str = "pipeline") -> tuple[RetrievalPipeline, dict]:
    """``(the pipeline to run, its record)`` of a request's or a record's ``pipeline``; 400
    ``invalid_pipeline`` when it does not validate (a stage or its settings not an object
    included), ``location_in_request``, ``setting_not_allowed`` or ``backend_not_registered``
    (naming the field) when it would reach out by itself."""
    if not isinstance(pipeline, dict):
        raise ApplicationError(f"{field} must be a JSON object", code="invalid_pipeline")
    refuse_locations({k: v for k, v in pipeline.items() if k not in STAGES}, field=field)
    resolved, registered = dict(pipeline), {}
    for stage in STAGES:
        if stage not in pipeline:
            continue                             # the stage's default
        spec = pipeline[stage]
        if not isinstance(spec, dict) or not isinstance(spec.get("settings", {}), dict):
            raise ApplicationError(f"{field}.{stage} must be an object with a backend and settings (an object)",
                                   code="invalid_pipeline", extra={"field": f"{field}.{stage}"})
        refuse_locations({k: v for k, v in spec.items() if k != "settings"}, field=f"{field}.{stage}")
        name = spec.get("backend")
        implementation, settings = backend_resolve(name, spec.get("settings"), field=f"{field}.{stage}")
        resolved[stage] = {**spec, "settings": settings, **({"backend": implementation} if "backend" in spec else {})}
        if is_registered(name):
            registered[stage] = (name, tunables(spec.get("settings") or {}))
    try:
        runnable = RetrievalPipeline.from_dict(resolved)
    except (ValueError, TypeError, AttributeError) as exc:
        raise ApplicationError(f"invalid {field}: {exc}", code="invalid_pipeline") from None
    record = runnable.as_dict()
    for stage, (name, own) in registered.items():
        record[stage] = {**record[stage], "backend": name, "settings": own}
    return runnable, record


def pipeline_sha256(record: dict) -> str:
    """What stored evaluations are keyed by: the record's SHA-256 (``RetrievalPipeline.sha256``
    of the same dict when it names no registered backend), and with registered backends what
    each name stands for as well, so re-pointing a name keys a new evaluation."""
    entries = {stage: entry_digest(record.get(stage, {}).get("backend")) for stage in STAGES
               if isinstance(record.get(stage), dict) and is_registered(record[stage].get("backend"))}
    return record_sha256({**record, "registered": entries} if entries else record)
