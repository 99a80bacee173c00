"""Versioned describing prompts for the model backends (DESIGN 2.6: prompts are recorded).

A version's text never changes once used: a new wording is a new version. The result of every
description records the version and :meth:`DescribePrompt.sha256`, the SHA-256 of the version's
system and instruction texts, so a stored proposal names exactly the words its model saw.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

from models.facts import canonical_json

# The fact names describe-v1 lists (the names models.facts knew when it was written): a version's
# words never change, so later names are taught by later versions.
_V1_ATTRIBUTES = ("upper_colour", "lower_colour", "speed", "size", "position", "category")
_V1_EVENTS = ("walks", "stands", "enters", "leaves", "crosses", "occluded_by", "passes_in_front_of")


@dataclass(frozen=True)
class DescribePrompt:
    """One prompt version: a system text and the instructions that follow the images."""

    version: str                                 # e.g. "describe-v1"
    system: str                                  # the system message
    instructions: str                            # str.format template, see render()
    retry: str                                   # str.format template with {error}: the correction turn

    def sha256(self) -> str:
        body = {"version": self.version, "system": self.system, "instructions": self.instructions,
                "retry": self.retry}
        return hashlib.sha256(canonical_json(body).encode()).hexdigest()

    def render(self, *, n_frames: int, fps: float, width: int, height: int, span: tuple[int, int],
               crop_frames: list[int], full_frames: list[int], observations: list[tuple[int, list[float]]],
               colour_names: list[str]) -> str:
        """The instructions for one trajectory."""
        table = "\n".join(f"  frame {f}: {', '.join(f'{v:.0f}' for v in box)}" for f, box in observations)
        return self.instructions.format(
            n_crops=len(crop_frames), crop_list=", ".join(map(str, crop_frames)) or "none",
            n_full=len(full_frames), full_list=", ".join(map(str, full_frames)) or "none",
            n_frames=n_frames, fps=fps, first=span[0], last=span[1] - 1, end=span[1], width=width,
            height=height, observations=table, colours=", ".join(colour_names),
            attributes=", ".join(_V1_ATTRIBUTES), events=", ".join(_V1_EVENTS))


_V1_SYSTEM = (
    "You describe one tracked target in a video for a retrieval benchmark that people verify. "
    "State only what the images show. Answer with one JSON object and nothing else."
)
_V1_INSTRUCTIONS = """\
The images are, in order: {n_crops} crops of the target from frames {crop_list}, then {n_full} full \
frames with the target marked by a yellow box (frames {full_list}). The video has {n_frames} frames \
at {fps:g} frames per second; the target is observed from frame {first} to frame {last}. Its boxes \
(x1, y1, x2, y2 in pixels of the {width}x{height} frame) at some of those frames:
{observations}

Return one JSON object with exactly the keys "appearance", "motion" and "facts":
- "appearance": one sentence on what the target looks like (clothing colours and other visible \
properties; no guesses about age, gender or ethnicity);
- "motion": one sentence on what it does over the observed frames;
- "facts": a list of objects {{"id": "f1", "kind": "attribute" or "event", "name": ..., "value": ..., \
"start_frame": ..., "end_frame": ..., "evidence_frames": [...], "scope": "whole" or "interval", \
"known": true or false}}, ids unique.
Attribute names: {attributes}. Event names: {events}.
Values: upper_colour and lower_colour one of {colours}; walks "left", "right", "towards" or "away" \
(image directions: left is the frame's left, towards is towards the camera); stands "still"; speed \
"slow", "normal" or "fast"; enters "from the left", "from the right", "from the top" or "from the \
bottom"; leaves "to the left", "to the right", "to the top" or "to the bottom"; size "small", \
"medium" or "large"; category a noun such as "person".
Intervals are half-open: start_frame is the first frame, end_frame the frame after the last one, \
both within {first}..{end}. evidence_frames are frames listed above that show the fact. Attributes \
of the whole observed interval have scope "whole"; what holds for part of it has scope "interval". \
When you cannot tell a value, give the fact with "known": false and "value": "". Claim nothing the \
images do not show."""
_V1_RETRY = ("That answer cannot be used: {error}. Reply again with only the corrected JSON object.")
# describe-v2: v1 plus the scene facts (models.facts.SCENE_FACTS), named in the text itself.
_V2_INSTRUCTIONS = _V1_INSTRUCTIONS.replace(
    "Attribute names: {attributes}. Event names: {events}.",
    "Attribute names: upper_colour, lower_colour, speed, size, position, category, ground, near, weather, "
    "light. Event names: walks, stands, enters, leaves, crosses, occluded_by, passes_in_front_of.",
).replace(
    'category a noun such as "person".',
    'category a noun such as "person"; ground "grass" or "pavement" (what the target walks or stands on, '
    'over the frames it does); near the scene object the target is next to, in a few words ("bench", "red '
    'door", "tree", "lamp post"), over the frames it is; weather "rain" or "clear" and light "day" or '
    '"night" (scope "whole"): the full frames show the scene.',
)

DESCRIBE_PROMPTS: dict[str, DescribePrompt] = {
    "describe-v1": DescribePrompt("describe-v1", _V1_SYSTEM, _V1_INSTRUCTIONS, _V1_RETRY),
    "describe-v2": DescribePrompt("describe-v2", _V1_SYSTEM, _V2_INSTRUCTIONS, _V1_RETRY),
}
CURRENT_DESCRIBE_PROMPT = "describe-v2"


def describe_prompt(version: str | None) -> DescribePrompt:
    """The prompt of ``version`` (None: the current one); ValueError names the known versions."""
    key = version or CURRENT_DESCRIBE_PROMPT
    if key not in DESCRIBE_PROMPTS:
        raise ValueError(f"unknown describing prompt version {key!r}; known: {', '.join(DESCRIBE_PROMPTS)}")
    return DESCRIBE_PROMPTS[key]
