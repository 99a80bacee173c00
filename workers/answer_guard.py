"""No model reads the answer: a reranking stage may not be the backend that proposed the approved
descriptions of the videos it is judged on, and figures measured on rendered videos with the
embedded heuristics say that they are a smoke test.

- **Proposer and reranker.** The approved descriptions (``D_r^H``) of a snapshot's videos were
  proposed by description runs, each of which records its backend's name and settings. A
  pipeline's reranking stages (the pointwise scorer, the pairwise comparator) name a backend and
  settings too. A stage is *the proposer* when its backend name is a proposer's and every setting
  both record has the same value: the embedded heuristics read colours, paces and the scene with
  the same measurements whether they describe or score, so such a stage recomputes the approved
  answer instead of judging it. :func:`reranker_proposer_check` refuses it (400
  ``reranker_is_proposer``), naming both.
- **Smoke test.** A snapshot whose videos are all rendered by the demo (their source is named
  ``rendered-<scene>``, ``annotation.smoke_test``) and whose descriptions or reranking come
  from the embedded heuristics measures code that knows how its
  world is drawn: :func:`smoke_stamp` gives :data:`SMOKE_TEST_STAMP` for its figures, which are
  shown with :data:`SMOKE_TEST_NOTE`.
"""
from __future__ import annotations

from annotation.models import CandidatePool, Description, RelationSnapshot
from annotation.smoke_test import EMBEDDED_HEURISTICS, SMOKE_TEST_STAMP, rendered_only
from common.errors import ApplicationError
from workers.pipelines import pipeline_resolve


def rerank_stages(pipeline: dict | None) -> list[tuple[str, str, dict]]:
    """``(stage, backend name, settings)`` of each reranking stage of a stored pipeline."""
    p = pipeline or {}
    if p.get("reranker") == "pointwise":
        scorer, weights, c = p.get("scorer") or {}, p.get("weights") or {}, p.get("comparator") or {}
        stages = []
        if weights.get("vlm", 1.0) > 0:          # a zero weight asks nothing of the scorer
            stages.append(("pointwise scorer", str(scorer.get("backend", "")), dict(scorer.get("settings") or {})))
        if weights.get("absolute", 0.0) > 0:     # one absolute score from the comparator's model
            stages.append((f"pointwise {c.get('kind', 'scorer')} model", str(c.get("backend", "")),
                           dict(c.get("settings") or {})))
        return stages
    if p.get("reranker") == "pairwise":
        c = p.get("comparator") or {}
        return [(f"pairwise {c.get('kind', 'scorer')} comparator", str(c.get("backend", "")),
                 dict(c.get("settings") or {}))]
    return []


def _video_ids(snapshot: RelationSnapshot) -> list[int]:
    return [int(v) for v in (snapshot.pool_versions or {})]


def proposers(snapshot: RelationSnapshot) -> list[dict]:
    """The description runs whose proposals were approved on the snapshot's videos: ``{"run",
    "backend", "settings", "prompt_version"}`` each, by run id."""
    pools = CandidatePool.objects.filter(video_id__in=_video_ids(snapshot))
    runs = {}
    for d in (Description.objects.filter(pool__in=pools, status=Description.Status.APPROVED)
              .select_related("run").order_by("run_id")):
        if d.run_id not in runs:
            record = dict(d.run.backend or {})
            name = str(record.pop("name", ""))
            runs[d.run_id] = {"run": d.run_id, "backend": name, "settings": record,
                              "prompt_version": d.run.prompt_version}
    return list(runs.values())


def same_model(proposer: dict, name: str, settings: dict) -> bool:
    """Whether a stage's backend is the proposer's: the same name and no setting both record
    with a different value."""
    if proposer["backend"] != name:
        return False
    shared = set(proposer["settings"]) & set(settings)
    return all(proposer["settings"][k] == settings[k] for k in shared)


def reranker_proposer_check(snapshot: RelationSnapshot, pipeline: dict | None) -> None:
    """400 ``reranker_is_proposer`` when a reranking stage of ``pipeline`` is the backend that
    proposed the approved descriptions of the snapshot's videos (see the module docstring)."""
    stages = rerank_stages(pipeline)
    if not stages:
        return
    for proposer in proposers(snapshot):
        for stage, name, settings in stages:
            if same_model(proposer, name, settings):
                version = f", {proposer['prompt_version']}" if proposer["prompt_version"] else ""
                raise ApplicationError(
                    f"the {stage} ({name!r}, settings {settings or 'default'}) is the backend that proposed the "
                    f"approved descriptions of this snapshot's videos (description run {proposer['run']}: "
                    f"{proposer['backend']!r}{version}): a reranker that recomputes the approved answer measures "
                    "nothing; rerank with another backend or other settings",
                    code="reranker_is_proposer",
                    extra={"stage": stage, "reranker": {"backend": name, "settings": settings},
                           "proposer": proposer})


def answer_stamps(snapshot: RelationSnapshot, pipelines: list[dict | None]) -> list[str]:
    """An experiment's refusal or stamps over its cells' pipelines (as requested): 400 when a
    cell's reranker is the proposer, else the smoke-test stamp when one applies."""
    stamps: list[str] = []
    for pipeline in pipelines or [None]:
        record = pipeline_resolve(pipeline)[1] if pipeline else None
        reranker_proposer_check(snapshot, record)
        stamp = smoke_stamp(snapshot, record)
        if stamp is not None and stamp not in stamps:
            stamps.append(stamp)
    return stamps


def smoke_stamp(snapshot: RelationSnapshot, pipeline: dict | None = None) -> str | None:
    """:data:`SMOKE_TEST_STAMP` when the snapshot's videos are all rendered and its approved
    descriptions or the pipeline's reranking come from the embedded heuristics; None otherwise."""
    if not rendered_only(_video_ids(snapshot)):
        return None
    backends = {p["backend"] for p in proposers(snapshot)} | {name for _, name, _ in rerank_stages(pipeline)}
    return SMOKE_TEST_STAMP if backends & EMBEDDED_HEURISTICS else None
