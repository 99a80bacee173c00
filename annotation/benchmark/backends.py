"""The model backends as the annotation services use them: a describer (VLM) and a query writer
(LLM), built from a run's recorded settings. Bad settings are a 400 ``invalid_backend``.

``backend`` settings are ``{"name": ..., ...backend fields}``: the describer's name is
``heuristic`` or a backend the operator registered (``common.registry``: a ``transformers`` or
``openai`` one), the writer's ``template`` or a registered one; the embedded defaults need nothing
else. A request never carries an endpoint or a path. A run records the name and the resolved
settings without their locations (every default filled in) and, from its first result, the
prompt version and hash; the name is resolved again whenever the backend is built.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from common.errors import ApplicationError
from common.registry import backend_resolve, is_registered, tunables, without_locations
from models.backends.llm import build_llm, resolve_llm_settings
from models.backends.llm.base import GenerationBudget
from models.backends.llm.openai_chat import EndpointError
from models.backends.vlm import build_describer as build
from models.backends.vlm import resolve_describer_settings
from models.backends.vlm.base import DescribeBudget, DescribeRequest
from models.facts import Description, Fact, Predicate, QueryProposal

DEFAULT_DESCRIBER = {"name": "heuristic"}
DEFAULT_WRITER = {"name": "template"}


@dataclass
class RunSettings:
    backend: dict
    budget: dict
    prompt_version: str
    prompt_sha256: str


def _endpoint_errors(call):
    """Run ``call``; an unreachable model endpoint becomes a 503-style ``backend_unavailable``
    error with the endpoint's message (the run's job fails with it and can be started again)."""

    try:
        return call()
    except EndpointError as exc:
        raise ApplicationError(f"the model endpoint failed: {exc}", code="backend_unavailable", status_code=503) from None


def _split(backend: dict | None, default: dict) -> tuple[str, str, dict]:
    """The backend's name, its implementation and its complete settings (``common.registry``): a
    location in the request, or an unregistered backend that reaches out, is refused here, before
    anything is read or called."""
    if backend is not None and not isinstance(backend, dict):
        raise ApplicationError("backend must be a JSON object with a 'name'", code="invalid_backend")
    backend = dict(backend or default)
    name = backend.pop("name", None)
    if not isinstance(name, str) or not name:
        raise ApplicationError("backend settings need a 'name'", code="invalid_backend")
    implementation, settings = backend_resolve(name, backend, field="backend", settings_field="backend")
    return name, implementation, settings


def _recorded(name: str, implementation: str, settings: dict, resolve) -> dict:
    """A run's record of its backend's settings: an embedded one's complete settings (every
    default filled in) without locations; a registered one's tunables only (the entry is the
    operator's, resolved again by name)."""
    if is_registered(name):
        return tunables(settings)
    return without_locations(resolve(implementation, settings))


# -- describer ------------------------------------------------------------------------------------
@dataclass
class Described:
    description: Description | None
    failure: str
    raw_outputs: list[str]
    attempts: int
    inputs: dict = field(default_factory=dict)
    prompt_version: str = ""
    prompt_sha256: str = ""


class DescriberAdapter:
    def __init__(self, describer, budget):
        self.describer = describer
        self.budget = budget

    def describe(self, *, video_path: str, frames: np.ndarray, boxes: np.ndarray, n_frames: int,
                 fps: float | None = None, trajectory_id: int | None = None) -> Described:

        request = DescribeRequest(video_path=video_path, frames=frames, boxes=boxes, budget=self.budget,
                                  fps=fps, trajectory_id=trajectory_id)
        result = _endpoint_errors(lambda: self.describer.describe(request))
        return Described(
            description=None if result.failed else result.description,
            failure="; ".join(result.errors[-3:]) if result.failed else "",
            raw_outputs=list(result.raw_texts), attempts=result.attempts,
            inputs={"crop_frames": result.crop_frames, "full_frames": result.full_frames,
                    "context_frames": result.context_frames, "seconds": round(result.seconds, 3)},
            prompt_version=result.prompt_version, prompt_sha256=result.prompt_sha256)


def describer_settings(backend: dict | None, budget: dict | None) -> RunSettings:
    """Check that the describer can be built and its budget is valid; the run's record."""
    adapter = build_describer(backend, budget)
    name, implementation, settings = _split(backend, DEFAULT_DESCRIBER)
    return RunSettings(backend={"name": name, **_recorded(name, implementation, settings, resolve_describer_settings)},
                       budget=adapter.budget.to_dict(), prompt_version="", prompt_sha256="")


def build_describer(backend: dict | None, budget: dict | None) -> DescriberAdapter:

    name, implementation, settings = _split(backend, DEFAULT_DESCRIBER)
    try:
        return DescriberAdapter(build(implementation, settings), DescribeBudget.from_dict(budget))
    except (ValueError, TypeError, AttributeError) as exc:  # wrong values or wrong types in the settings
        raise ApplicationError(f"describer {name!r}: {exc}", code="invalid_backend") from None


# -- query writer ---------------------------------------------------------------------------------
@dataclass
class Written:
    proposal: QueryProposal | None               # None: rejected
    raw: str
    reason: str = ""                             # why it was rejected


@dataclass
class WriterAdapter:
    writer: object
    budget: object

    def generate(self, facts: list[Fact]) -> tuple[list[Written], dict]:
        """Queries from ``facts`` alone: the accepted ones and the rejected ones with reasons."""
        result = _endpoint_errors(lambda: self.writer.generate_queries(facts, budget=self.budget))
        raw = "\n".join(result.provenance.raw_texts)[-20000:]
        out = [Written(q, raw) for q in result.queries]
        out += [Written(None, json.dumps(r.proposal)[:20000], r.reason) for r in result.rejected]
        return out, {"attempts": result.provenance.attempts, "prompt_version": result.provenance.prompt_version,
                     "prompt_sha256": result.provenance.prompt_sha256}

    def propose_relation(self, predicates: list[dict], facts: list[Fact], *, text: str = "") -> dict:
        """The writer's label for a query (its predicates) against a trajectory's facts."""
        query = QueryProposal(text=text or "query", predicates=[Predicate(**p) for p in predicates])
        proposal = _endpoint_errors(lambda: self.writer.propose_relation(query, facts))
        return {"label": int(proposal.label), "predicates": [vars(p) for p in proposal.decisive],
                "evidence": list(proposal.evidence_fact_ids), "reason": proposal.reason, "failed": proposal.failed}


def build_writer(backend: dict | None, budget: dict | None) -> WriterAdapter:

    name, implementation, settings = _split(backend, DEFAULT_WRITER)
    try:
        return WriterAdapter(build_llm(implementation, settings), GenerationBudget.from_dict(budget))
    except (ValueError, TypeError, AttributeError) as exc:  # wrong values or wrong types in the settings
        raise ApplicationError(f"query writer {name!r}: {exc}", code="invalid_backend") from None


def writer_settings(backend: dict | None, budget: dict | None) -> RunSettings:
    adapter = build_writer(backend, budget)
    name, implementation, settings = _split(backend, DEFAULT_WRITER)
    return RunSettings(backend={"name": name, **_recorded(name, implementation, settings, resolve_llm_settings)},
                       budget=adapter.budget.to_dict(),
                       prompt_version="", prompt_sha256="")
