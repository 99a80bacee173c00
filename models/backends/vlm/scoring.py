"""The VLM scorer interface: one (query text, trajectory) pair in, SCOUT's reranking scores out.

A scorer reads only model-side inputs (DESIGN 4.4): the query text and the trajectory's own
video, frames and boxes (:class:`ScoreRequest` has no field for anything else: no approved
description, fact, predicate, vote or relation label can reach it). It returns a
:class:`ScoreResult` with

- the holistic score ``log_p_yes``, the log-probability that the answer to "does the target
  match the query? yes or no" is *yes* (SCOUT 5 and 6.2). ``holistic_source`` says where it
  comes from: ``"logprob"`` (the model's own probabilities of the yes spellings, read from its
  logits or from the endpoint's top log-probabilities), ``"answer"`` (the fallback when an
  endpoint returns no log-probabilities: the answer's first word, *yes* → ``log 0.99``, *no* →
  ``log 0.01``, :data:`ANSWER_P_YES`) or ``"heuristic"`` (the pixel scorer's product of its
  decomposed scores, see ``heuristic_scorer.py``);
- the decomposed ``appearance`` / ``action`` / ``scene`` scores on 0–100 (one question, a JSON
  answer ``{"appearance": n, "action": n, "scene": n}``, :func:`parse_scores`);
- ``invalid``: one reason per value that could not be read (``"holistic: ..."``,
  ``"scores: ..."``, ``"appearance: ..."``); such a value is ``None``. Model misbehaviour never
  raises; bad arguments raise ``ValueError``;
- the prompt version and the SHA-256 of its texts (the heuristic: its rules version and the
  SHA-256 of its settings), the model calls made, the frames used, the backend and the model.

:meth:`ScoreResult.vlm_inputs` gives what ``models.retrievers.rerank.attribute_vlm_score`` takes,
the holistic log P(yes) and the three scores, a value that could not be read replaced by a
neutral one (:data:`NEUTRAL_LOG_P_YES` = log 0.5, :data:`NEUTRAL_SCORE` = 50; it stays counted
invalid). Every scorer keeps :class:`ScoreCounts`: requests (pairs scored), model calls, results
with an invalid mark, invalid marks per value and holistic sources.
:func:`build_scorer` builds a backend of :data:`SCORERS` from plain settings (unknown keys and
bad values raise ``ValueError``), like ``build_describer``.
"""
from __future__ import annotations

import dataclasses
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from models.backends.llm.jsonout import load_json_object
from models.backends.registry import BackendEntry, entry_of
from models.backends.tracking.base import FrameSource
from models.backends.vlm.base import DescribeBudget, DescribeRequest
from models.facts import InvalidOutput

AXES = ("appearance", "action", "scene")
HOLISTIC_SOURCES = ("logprob", "answer", "heuristic")
# The answer fallback: P(yes) of a plain "yes" / "no" answer when no log-probabilities come back.
ANSWER_P_YES = {"yes": 0.99, "no": 0.01}
# What the reranker reads for a value that could not be read.
NEUTRAL_P_YES = 0.5
NEUTRAL_LOG_P_YES = math.log(NEUTRAL_P_YES)
NEUTRAL_SCORE = 50.0


class ScorerConfigError(ValueError):
    """A scorer configuration that cannot run (unknown backend, missing model, bad settings)."""


@dataclass
class ScoreRequest:
    """One (query, trajectory) pair to score: the query text and the trajectory's own pixels and
    boxes. Nothing human-side goes in (DESIGN 4.4)."""

    query: str                                   # the query text, as the searcher wrote it
    video_path: str                              # video file or frame folder (models.media.video.FrameReader)
    frames: np.ndarray                           # [N] int, strictly increasing frame indices of the observations
    boxes: np.ndarray                            # [N, 4] float, xyxy in original pixels
    fps: float | None = None                     # frame rate override (a frame folder has none of its own)
    trajectory_id: int | None = None             # for messages and the result only

    def __post_init__(self) -> None:
        if not isinstance(self.query, str) or not self.query.strip():
            raise ValueError("the query text is empty")
        track = self.track()                     # validates the observations like a describing request
        self.frames, self.boxes = track.frames, track.boxes

    def track(self, *, max_crops: int = 8, max_full_frames: int = 2) -> DescribeRequest:
        """The trajectory as the describers' input selection reads it (``select_inputs``)."""
        return DescribeRequest(self.video_path, self.frames, self.boxes, fps=self.fps,
                               trajectory_id=self.trajectory_id,
                               budget=DescribeBudget(max_crops=max_crops, max_full_frames=max_full_frames))


@dataclass
class ScoreResult:
    """What a scorer made of one (query, trajectory) pair (see the module docstring)."""

    log_p_yes: float | None                      # holistic log P(yes), <= 0; None when it could not be read
    holistic_source: str | None                  # "logprob" | "answer" | "heuristic"; None with log_p_yes
    appearance: float | None                     # 0..100; None when it could not be read
    action: float | None                         # 0..100
    scene: float | None                          # 0..100
    invalid: list[str]                           # why each missing value is missing ("holistic: ...")
    raw_texts: list[str]                         # the model's answers in order (holistic, scores); [] without a model
    calls: int                                   # model calls made for this pair
    crop_frames: list[int]                       # frames whose crops were used, chronological
    full_frames: list[int]                       # frames used whole (target marked for a model), chronological
    prompt_version: str                          # the prompt (or rule set) version
    prompt_sha256: str                           # SHA-256 of that prompt's texts (or of the rules' settings)
    backend: str                                 # "heuristic" | "transformers" | "openai"
    model: str                                   # model id or path ("" for the heuristic)
    trajectory_id: int | None = None
    details: dict = field(default_factory=dict)  # backend readings (log P(no), top log-probs, per-cue scores)
    seconds: float = 0.0                         # wall time of the whole call

    def __post_init__(self) -> None:
        if (self.log_p_yes is None) != (self.holistic_source is None):
            raise ValueError("log_p_yes and holistic_source are given together or not at all")
        if self.holistic_source is not None and self.holistic_source not in HOLISTIC_SOURCES:
            raise ValueError(f"holistic_source must be one of {HOLISTIC_SOURCES}, got {self.holistic_source!r}")
        if self.log_p_yes is not None and not (math.isfinite(self.log_p_yes) and self.log_p_yes <= 0):
            raise ValueError(f"log_p_yes must be a finite log-probability <= 0, got {self.log_p_yes}")
        for axis in AXES:
            v = getattr(self, axis)
            if v is not None and not (math.isfinite(v) and 0 <= v <= 100):
                raise ValueError(f"{axis} must lie in [0, 100], got {v}")

    @property
    def p_yes(self) -> float | None:
        return None if self.log_p_yes is None else math.exp(self.log_p_yes)

    def vlm_inputs(self) -> tuple[float, float, float, float]:
        """``(log_p_yes, appearance, action, scene)`` for ``attribute_vlm_score``, a missing value
        replaced by :data:`NEUTRAL_LOG_P_YES` / :data:`NEUTRAL_SCORE`."""
        return (NEUTRAL_LOG_P_YES if self.log_p_yes is None else float(self.log_p_yes),
                *(NEUTRAL_SCORE if getattr(self, a) is None else float(getattr(self, a)) for a in AXES))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass
class ScoreCounts:
    """What a scorer has done so far (reported with a reranking)."""

    requests: int = 0                            # (query, trajectory) pairs scored
    calls: int = 0                               # model calls made
    invalid_results: int = 0                     # results with at least one invalid mark
    invalid: dict = field(default_factory=dict)  # invalid marks per value: {"holistic": n, "scores": n, ...}
    holistic_sources: dict = field(default_factory=dict)  # {"logprob": n, "answer": n, "heuristic": n}

    def add(self, result: ScoreResult) -> None:
        self.requests += 1
        self.calls += result.calls
        self.invalid_results += bool(result.invalid)
        marks = Counter(self.invalid)
        marks.update(reason.split(":", 1)[0] for reason in result.invalid)
        self.invalid = dict(marks)
        if result.holistic_source is not None:
            self.holistic_sources[result.holistic_source] = self.holistic_sources.get(result.holistic_source, 0) + 1

    def merged(self, other: ScoreCounts) -> ScoreCounts:
        """The sum of two counts."""
        return ScoreCounts(self.requests + other.requests, self.calls + other.calls,
                           self.invalid_results + other.invalid_results,
                           dict(Counter(self.invalid) + Counter(other.invalid)),
                           dict(Counter(self.holistic_sources) + Counter(other.holistic_sources)))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@runtime_checkable
class Scorer(Protocol):
    """What every scoring backend implements."""

    name: str                                    # backend name
    model: str                                   # model id or path
    counts: ScoreCounts                          # updated by every score() call

    def score(self, request: ScoreRequest, *, reader: FrameSource | None = None) -> ScoreResult: ...


# -- reading answers -----------------------------------------------------------------------------
_FIRST_WORD = re.compile(r"[a-z]+")


def answer_word(text: str) -> str | None:
    """``"yes"`` / ``"no"`` when the answer's first word is one (any case, punctuation around it
    ignored: ``"Yes."``, ``"**No**, it ..."``), else None."""
    match = _FIRST_WORD.search(str(text).lower())
    word = match.group(0) if match else None
    return word if word in ANSWER_P_YES else None


def holistic_from_answer(text: str) -> tuple[float | None, str | None]:
    """The answer fallback: ``(log P(yes), None)`` of a yes/no answer (:data:`ANSWER_P_YES`), or
    ``(None, reason)`` when the answer is neither."""
    word = answer_word(text)
    if word is None:
        return None, f"holistic: the answer {str(text)[:80]!r} is neither yes nor no"
    return math.log(ANSWER_P_YES[word]), None


def yes_no_from_top_logprobs(top: list[tuple[str, float]], *, yes_words=("yes",), no_words=("no",)
                             ) -> tuple[float, float] | None:
    """``(log P(yes), log P(no))`` from the top-k ``(token, log-probability)`` list of the answer's
    first token; None when neither a yes nor a no token is in it.

    A token counts as a spelling of *yes* (*no*) when, stripped of spaces and lower-cased, it is
    one of ``yes_words`` (``no_words``); the log-probabilities of its spellings are summed in
    probability (log-sum-exp). A word that is not among the top k has at most the probability
    left over, and at most that of the least likely listed token: the smaller of the two bounds
    stands in for it (the mass left over floored at ``1e-12``)."""
    yes_set = {w.lower() for w in yes_words}
    no_set = {w.lower() for w in no_words}
    seen: dict[str, float] = {}
    for token, logprob in top:
        if isinstance(token, str) and isinstance(logprob, int | float) and math.isfinite(logprob):
            seen[token] = min(0.0, float(logprob))          # one entry per distinct token
    yes = [lp for t, lp in seen.items() if t.strip().lower() in yes_set]
    no = [lp for t, lp in seen.items() if t.strip().lower() in no_set]
    if not yes and not no:
        return None
    listed = np.array(list(seen.values()), np.float64)                             # [k]
    bound = min(float(listed.min()), math.log(max(1.0 - float(np.exp(listed).sum()), 1e-12)))

    def total(lps: list[float]) -> float:
        return min(0.0, float(np.logaddexp.reduce(np.array(lps, np.float64)))) if lps else bound

    return total(yes), total(no)


def parse_scores(text: str) -> tuple[dict[str, float | None], list[str]]:
    """The three 0–100 scores of a decomposed answer and the reasons for those that are missing.

    The answer must hold a JSON object (``models.backends.llm.jsonout``: the first balanced
    ``{...}``); each of :data:`AXES` must be a number (not a string, not a boolean) within
    0..100. A text with no JSON object gives one ``"scores: ..."`` reason and three Nones; a bad
    or missing key gives an ``"<axis>: ..."`` reason and None for that axis only."""
    try:
        data = load_json_object(text)
    except InvalidOutput as exc:
        return {a: None for a in AXES}, [f"scores: {exc}"]
    out: dict[str, float | None] = {}
    reasons = []
    for axis in AXES:
        v = data.get(axis)
        if v is None:
            reasons.append(f"{axis}: missing from the answer")
        elif isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            reasons.append(f"{axis}: {v!r} is not a number")
        elif not 0 <= v <= 100:
            reasons.append(f"{axis}: {v} is outside 0..100")
        else:
            out[axis] = float(v)
            continue
        out[axis] = None
    return out, reasons


# -- the registry --------------------------------------------------------------------------------
# The scoring backends: name -> its settings' config class and the scorer built from that config.
SCORERS: dict[str, BackendEntry] = {
    "heuristic": BackendEntry(config="models.backends.vlm.heuristic_scorer:HeuristicScorerConfig",
                              build="models.backends.vlm.heuristic_scorer:HeuristicPixelScorer"),
    "transformers": BackendEntry(config="models.backends.vlm.transformers_scorer:TransformersScorerConfig",
                                 build="models.backends.vlm.transformers_scorer:TransformersScorer"),
    "openai": BackendEntry(config="models.backends.vlm.openai_scorer:OpenAIScorerConfig",
                           build="models.backends.vlm.openai_scorer:OpenAIScorer"),
}
SCORER_BACKENDS = tuple(SCORERS)


def _entry(backend: str) -> BackendEntry:
    return entry_of(SCORERS, backend, "scoring backend", ScorerConfigError)


def resolve_scorer_settings(backend: str, settings: dict | None) -> dict:
    """The backend's complete settings with every default filled in (unknown keys and bad values
    raise ``ValueError``)."""
    return _entry(backend).resolved(settings)


def build_scorer(backend: str, settings: dict | None = None) -> Scorer:
    """The scorer of ``backend`` built from plain settings. The ``transformers`` backend loads
    its model here and fails with a clear ``ValueError`` when the folder is missing."""
    return _entry(backend).built(settings)
