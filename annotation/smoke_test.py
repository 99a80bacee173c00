"""When figures are a smoke test: videos the demo rendered, described or reranked by the embedded
heuristics, which know how that world is drawn. The rule and its words live here, once: the
evaluations and experiments (``workers.answer_guard``) stamp their figures with it and the release
card (``annotation.releases.services.release_io.metadata``) says it."""
from __future__ import annotations

from annotation.models import DescriptionRun
from trajectories.models import Video

# The stamp figures carry (beside "train-split" and "incomplete") and what it says.
SMOKE_TEST_STAMP = "smoke-test"
SMOKE_TEST_NOTE = "world-aware heuristics on rendered scenes: a smoke test, not evidence"
# The demo imports each rendered scene under the source "rendered-<scene name>" (annotation.demo.builders).
RENDERED_SOURCE_PREFIX = "rendered-"
# Backend names of the embedded heuristics (describer, pixel scorer, template writer).
EMBEDDED_HEURISTICS = frozenset({"heuristic", "template"})


def rendered_only(video_ids) -> bool:
    """Whether there are videos and the demo rendered every one of them (their source's name)."""
    ids = {int(v) for v in video_ids}
    names = list(Video.objects.filter(pk__in=ids).values_list("source__name", flat=True))
    return bool(ids) and len(names) == len(ids) and all(n.startswith(RENDERED_SOURCE_PREFIX) for n in names)


def card_note_lines(construction: dict) -> list[str]:
    """The release card's note: :data:`SMOKE_TEST_NOTE` when the release's description runs
    (``construction["describer_runs"]``) used an embedded heuristic on rendered videos only."""
    runs = construction.get("describer_runs") or []
    names = {str((r.get("backend") or {}).get("name", "")) for r in runs}
    if not names & EMBEDDED_HEURISTICS:
        return []
    videos = DescriptionRun.objects.filter(pk__in=[r.get("id") for r in runs]).values_list("pools__video_id", flat=True)
    if not rendered_only(v for v in videos if v is not None):
        return []
    return [f"> **Note:** {SMOKE_TEST_NOTE}. The descriptions were proposed by the embedded heuristics on videos "
            "the demo rendered: figures on this release test the platform's plumbing, not a model.", ""]
