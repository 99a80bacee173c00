"""What the model-backed scorers share: the target's images, two questions, the answers read.

A :class:`ChatScorer` turns a :class:`models.backends.vlm.scoring.ScoreRequest` into two chats
with the same images: ``max_crops`` crops of the target (``select_inputs``, chronological,
``crop_box`` with 10 % padding, longer side ``crop_max_side``) and ``max_full_frames`` full
frames with the target marked (``draw_target``, longer side ``frame_max_side``), then the
question of the scoring prompt (``score_prompts.py``, the version in the settings):

1. the holistic yes/no question → :meth:`ChatScorer.yes_no`, which returns the answer text and,
   where the backend has them, ``log P(yes)`` / ``log P(no)`` of the answer's first word. With
   them the result's ``holistic_source`` is ``"logprob"``; without them the answer's first word
   is read (``scoring.holistic_from_answer``: ``"answer"``), and an answer that is neither yes
   nor no is an invalid mark;
2. the decomposed question → :meth:`ChatScorer.generate` (greedy, ``max_new_tokens``), the JSON
   answer read by ``scoring.parse_scores`` (invalid marks per axis).

Two model calls per pair, no retries: a value that cannot be read stays None and is counted.
Subclasses implement ``yes_no`` and ``generate``; images reach them as BGR arrays
(``{"type": "image", "image": ndarray}`` content parts), as in ``chat.py``.
"""
from __future__ import annotations

import abc
import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from models.backends.tracking.base import FrameSource
from models.backends.vlm.base import Stopwatch, check_against_video, select_inputs
from models.backends.vlm.score_prompts import ScorePrompt, score_prompt
from models.backends.vlm.scoring import (
    ScoreCounts,
    ScoreRequest,
    ScoreResult,
    holistic_from_answer,
    parse_scores,
)
from models.media.video import FrameReader, crop_box, draw_target, resize_max


@dataclass
class YesNo:
    """A backend's answer to the yes/no question."""

    text: str                                    # what the model answered (or its most likely first token)
    log_p_yes: float | None = None               # log P(yes) of the first answer word; None: not available
    log_p_no: float | None = None                # log P(no) likewise
    details: dict = field(default_factory=dict)  # what the log-probabilities were read from


def answer_word_problems(yes_words: tuple[str, ...], no_words: tuple[str, ...]) -> list[str]:
    """What is wrong with a scorer's yes/no spellings (both settings of the model backends)."""
    problems = []
    if not yes_words or not no_words or not all(isinstance(w, str) and w.strip() for w in yes_words + no_words):
        problems.append("yes_words and no_words must be non-empty lists of words")
    elif set(yes_words) & set(no_words):
        problems.append("a word cannot spell both yes and no")
    return problems


def describer_settings(config, describer_config: type):
    """The describer's config of the same backend, from the scorer's settings of the same names
    (the model or endpoint to load: a scorer reuses the describer's loading code)."""
    return describer_config(**{f.name: getattr(config, f.name) for f in dataclasses.fields(describer_config)})


class ChatScorer(abc.ABC):
    """Base class of the scorers that ask a vision-language model (see the module docstring); a
    backend supplies :meth:`yes_no` and :meth:`generate`."""

    name = ""
    model = ""
    crop_max_side = 336                          # longer side of a crop sent to the model, pixels
    frame_max_side = 768                         # longer side of a full frame sent to the model, pixels
    max_crops = 4                                # crops of the target per question
    max_full_frames = 1                          # target-marked full frames per question
    max_new_tokens = 64                          # tokens the decomposed answer may use
    prompt: ScorePrompt = score_prompt(None)

    def __init__(self) -> None:
        self.counts = ScoreCounts()

    @abc.abstractmethod
    def yes_no(self, messages: list[dict]) -> YesNo:
        """The model's answer to the yes/no question, with log-probabilities where it gives them."""

    @abc.abstractmethod
    def generate(self, messages: list[dict], *, max_new_tokens: int) -> str:
        """The model's free answer (the decomposed scores as JSON)."""

    def settings(self) -> dict:
        """The backend's settings for the result (no secrets)."""
        return {}

    def images(self, request: ScoreRequest, *, reader: FrameSource | None = None
               ) -> tuple[list[dict], list[int], list[int]]:
        """The image content parts (each after a text part naming its frame), the crop frames and
        the full frames."""
        track = request.track(max_crops=self.max_crops, max_full_frames=self.max_full_frames)
        own = reader is None
        source = FrameReader(request.video_path, fps=request.fps) if own else reader
        try:
            check_against_video(track, int(source.frame_count), source.width, source.height)
            crops, full = select_inputs(track, source.width, source.height)
            content: list[dict] = []
            for pos in crops:
                frame = source.read(int(track.frames[pos]))
                image = resize_max(np.ascontiguousarray(crop_box(frame, track.boxes[pos], pad=0.1)), self.crop_max_side)
                content += [{"type": "text", "text": f"Crop of frame {int(track.frames[pos])}:"},
                            {"type": "image", "image": image}]
            for pos in full:
                frame = source.read(int(track.frames[pos]))
                image = resize_max(draw_target(frame, track.boxes[pos]), self.frame_max_side)
                content += [{"type": "text", "text": f"Frame {int(track.frames[pos])}, target marked:"},
                            {"type": "image", "image": image}]
        finally:
            if own:
                source.close()
        return content, [int(track.frames[p]) for p in crops], [int(track.frames[p]) for p in full]

    def score(self, request: ScoreRequest, *, reader: FrameSource | None = None) -> ScoreResult:
        clock = Stopwatch()
        prompt = self.prompt
        images, crop_frames, full_frames = self.images(request, reader=reader)

        def chat(system: str, question: str) -> list[dict]:
            return [{"role": "system", "content": [{"type": "text", "text": system}]},
                    {"role": "user", "content": [*images, {"type": "text", "text": question}]}]

        invalid: list[str] = []
        answer = self.yes_no(chat(prompt.holistic_system, prompt.render_holistic(request.query, crop_frames,
                                                                                 full_frames)))
        if answer.log_p_yes is not None and math.isfinite(float(answer.log_p_yes)):
            log_p_yes, source = min(0.0, float(answer.log_p_yes)), "logprob"
        elif answer.log_p_yes is not None:  # NaN or infinite log-probabilities: no reading, counted
            log_p_yes, source = None, None
            invalid.append(f"holistic: non-finite log-probability {float(answer.log_p_yes)}")
        else:
            log_p_yes, reason = holistic_from_answer(answer.text)
            source = "answer" if log_p_yes is not None else None
            if reason:
                invalid.append(reason)
        raw = self.generate(chat(prompt.decomposed_system, prompt.render_decomposed(request.query, crop_frames,
                                                                                    full_frames)),
                            max_new_tokens=self.max_new_tokens)
        scores, reasons = parse_scores(raw)
        invalid += reasons
        result = ScoreResult(
            log_p_yes=log_p_yes, holistic_source=source, invalid=invalid, raw_texts=[answer.text, raw], calls=2,
            crop_frames=crop_frames, full_frames=full_frames, prompt_version=prompt.version,
            prompt_sha256=prompt.sha256(), backend=self.name, model=self.model, trajectory_id=request.trajectory_id,
            details={"log_p_no": answer.log_p_no, **answer.details, "settings": self.settings()},
            seconds=clock.seconds(), **scores)
        self.counts.add(result)
        return result
