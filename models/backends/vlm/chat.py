"""What the model-backed describers share: images in, a chat with retries, a validated answer out.

A :class:`ChatDescriber` turns a request into one chat: the system prompt, then a user turn with
the chronologically ordered crops of the target (``models.media.video.crop_box``), the target-marked
full frames (``models.media.video.draw_target``) and the versioned instructions. Each answer is checked
(:func:`models.backends.vlm.base.check_description`); an invalid one is followed by the answer itself and a
correction turn that quotes the problem, until a valid answer arrives or the attempt budget is
spent. Subclasses implement only :meth:`ChatDescriber.generate`, which receives the messages with
images as BGR arrays (``{"type": "image", "image": ndarray}`` content parts) and returns text.
"""
from __future__ import annotations

import numpy as np

from models.backends.tracking.base import FrameSource
from models.backends.vlm.base import (
    DescribeRequest,
    DescribeResult,
    Stopwatch,
    check_against_video,
    check_description,
    select_inputs,
    uniform_positions,
)
from models.backends.vlm.prompts import describe_prompt
from models.facts import InvalidOutput
from models.media.video import FrameReader, crop_box, draw_target, resize_max
from models.vocabulary import COLOUR_WORDS

# Boxes listed in the instructions (spread over the trajectory) so the model sees the geometry.
MAX_LISTED_OBSERVATIONS = 16


class ChatDescriber:
    """Base class of the describers that ask a chat model (see the module docstring)."""

    name = ""
    model = ""
    crop_max_side = 336                          # longer side of a crop sent to the model, pixels
    frame_max_side = 768                         # longer side of a full frame sent to the model, pixels

    def generate(self, messages: list[dict], *, max_new_tokens: int) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def settings(self) -> dict:
        """The backend's settings for the result (no secrets)."""
        return {}

    def describe(self, request: DescribeRequest, *, reader: FrameSource | None = None) -> DescribeResult:
        prompt = describe_prompt(request.prompt_version)
        clock = Stopwatch()
        own = reader is None
        source = FrameReader(request.video_path, fps=request.fps) if own else reader
        try:
            n_frames = int(source.frame_count)
            check_against_video(request, n_frames, source.width, source.height)
            fps = float(request.fps or source.fps)
            crops, full = select_inputs(request, source.width, source.height)
            content: list[dict] = []
            for pos in crops:
                frame = source.read(int(request.frames[pos]))
                image = resize_max(np.ascontiguousarray(crop_box(frame, request.boxes[pos], pad=0.1)),
                                   self.crop_max_side)
                content += [{"type": "text", "text": f"Crop of frame {int(request.frames[pos])}:"},
                            {"type": "image", "image": image}]
            for pos in full:
                frame = source.read(int(request.frames[pos]))
                image = resize_max(draw_target(frame, request.boxes[pos]), self.frame_max_side)
                content += [{"type": "text", "text": f"Frame {int(request.frames[pos])}, target marked:"},
                            {"type": "image", "image": image}]
            listed = uniform_positions(len(request.frames), MAX_LISTED_OBSERVATIONS)
            content.append({"type": "text", "text": prompt.render(
                n_frames=n_frames, fps=fps, width=source.width, height=source.height, span=request.span,
                crop_frames=[int(request.frames[p]) for p in crops], full_frames=[int(request.frames[p]) for p in full],
                observations=[(int(request.frames[p]), request.boxes[p].tolist()) for p in listed],
                colour_names=list(COLOUR_WORDS))})
        finally:
            if own:
                source.close()
        messages = [{"role": "system", "content": [{"type": "text", "text": prompt.system}]},
                    {"role": "user", "content": content}]
        raw_texts: list[str] = []
        errors: list[str] = []
        description = None
        for attempt in range(1, request.budget.max_attempts + 1):
            raw = self.generate(messages, max_new_tokens=request.budget.max_new_tokens)
            raw_texts.append(raw)
            try:
                description = check_description(raw, n_frames=n_frames, span=request.span)
                break
            except InvalidOutput as exc:
                errors.append(f"attempt {attempt}: {exc}")
                messages = [*messages, {"role": "assistant", "content": [{"type": "text", "text": raw}]},
                            {"role": "user", "content": [{"type": "text", "text": prompt.retry.format(error=exc)}]}]
        return DescribeResult(
            description=description, failed=description is None, raw_texts=raw_texts, errors=errors,
            attempts=len(raw_texts), crop_frames=[int(request.frames[p]) for p in crops],
            full_frames=[int(request.frames[p]) for p in full], context_frames=[],
            prompt_version=prompt.version, prompt_sha256=prompt.sha256(), backend=self.name, model=self.model,
            budget=request.budget.to_dict(), settings=self.settings(), seconds=clock.seconds())
