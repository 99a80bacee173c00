"""Versioned scoring prompts for the model-backed VLM scorers (SCOUT 6.2: one holistic yes/no
question and one decomposed appearance / action / scene question per candidate).

A version's texts never change once used: a new wording is a new version. Every
:class:`models.backends.vlm.scoring.ScoreResult` records the version and
:meth:`ScorePrompt.sha256`, the SHA-256 of all of the version's texts, so a stored score names
exactly the words its model saw. The images come first in the user turn (the target's crops, then
full frames with the target marked); the question follows them and quotes the query text.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

from models.facts import canonical_json


@dataclass(frozen=True)
class ScorePrompt:
    """One scoring prompt version: a system text per question and the two questions."""

    version: str                                 # e.g. "score-v1"
    holistic_system: str                         # system message of the yes/no question
    holistic: str                                # str.format template: {images} {query}
    decomposed_system: str                       # system message of the 0-100 scores question
    decomposed: str                              # str.format template: {images} {query}

    def sha256(self) -> str:
        body = {"version": self.version, "holistic_system": self.holistic_system, "holistic": self.holistic,
                "decomposed_system": self.decomposed_system, "decomposed": self.decomposed}
        return hashlib.sha256(canonical_json(body).encode()).hexdigest()

    @staticmethod
    def images_sentence(crop_frames: list[int], full_frames: list[int]) -> str:
        """What the images before the question are, in order."""
        crops = ", ".join(map(str, crop_frames)) or "none"
        full = ", ".join(map(str, full_frames)) or "none"
        return (f"The images show one tracked target: {len(crop_frames)} crops of it from frames {crops}, then "
                f"{len(full_frames)} full frames with the target marked by a yellow box (frames {full}).")

    def render_holistic(self, query: str, crop_frames: list[int], full_frames: list[int]) -> str:
        return self.holistic.format(images=self.images_sentence(crop_frames, full_frames), query=query.strip())

    def render_decomposed(self, query: str, crop_frames: list[int], full_frames: list[int]) -> str:
        return self.decomposed.format(images=self.images_sentence(crop_frames, full_frames), query=query.strip())


_V1_HOLISTIC_SYSTEM = ("You check whether a tracked target in a video matches a search query. "
                       "Answer with one word: yes or no.")
_V1_HOLISTIC = """\
{images}
Query: "{query}"
Does the target match the query? Answer yes or no."""
_V1_DECOMPOSED_SYSTEM = ("You rate how well a tracked target in a video matches a search query. "
                         "Answer with one JSON object and nothing else.")
_V1_DECOMPOSED = """\
{images}
Query: "{query}"
Rate the target against the query on three aspects, each an integer from 0 (the images contradict \
the query) to 100 (the images clearly show what the query says):
- "appearance": clothing colours and other visible properties of the target;
- "action": what the target does and how it moves (walking direction, pace, standing still, \
entering or leaving);
- "scene": the place around the target (ground, weather, light, nearby objects).
An aspect the query does not mention scores 100. Return exactly \
{{"appearance": <0-100>, "action": <0-100>, "scene": <0-100>}}."""

SCORE_PROMPTS: dict[str, ScorePrompt] = {
    "score-v1": ScorePrompt("score-v1", _V1_HOLISTIC_SYSTEM, _V1_HOLISTIC, _V1_DECOMPOSED_SYSTEM, _V1_DECOMPOSED),
}
SCORE_PROMPT_VERSION = "score-v1"


def score_prompt(version: str | None) -> ScorePrompt:
    """The prompt of ``version`` (None: the current one); ValueError names the known versions."""
    key = version or SCORE_PROMPT_VERSION
    if key not in SCORE_PROMPTS:
        raise ValueError(f"unknown scoring prompt version {key!r}; known: {', '.join(SCORE_PROMPTS)}")
    return SCORE_PROMPTS[key]
