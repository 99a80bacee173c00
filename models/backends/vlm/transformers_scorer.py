"""A local Hugging Face vision-language model as the scorer (Qwen2-VL, Qwen2.5-VL, ...).

The model is loaded by the describing backend's loader (:class:`TransformersDescriber` of
``transformers_backend.py``: the same folder checks, device and dtype choices, chat template and
image preparation), so a folder that describes also scores. The two questions of
``chat_scoring.py``:

- yes/no: one forward pass over the chat with the generation prompt; the log-softmax of the
  last position's logits over the whole vocabulary gives the first answer token's
  log-probabilities. ``log P(yes)`` is the log-sum-exp over the spellings in ``yes_words``
  (``log P(no)`` over ``no_words``) of each spelling's log-probability as the answer's start: a
  spelling of one token is read from those logits, a spelling of several tokens is
  teacher-forced (one more forward pass over the chat with its tokens appended, the sum of their
  log-probabilities). ``holistic_source`` is always ``"logprob"``; the answer text recorded is
  the most likely first token;
- scores: greedy generation of ``max_new_tokens`` at most, the JSON answer read by
  ``scoring.parse_scores``::

    scorer = build_scorer("transformers", {"model_path": "weights/Qwen2.5-VL-7B-Instruct"})
    result = scorer.score(ScoreRequest("a person in a red top walking right", video, frames, boxes))
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from models.backends.vlm.chat_scoring import (
    ChatScorer,
    YesNo,
    answer_word_problems,
    describer_settings,
)
from models.backends.vlm.score_prompts import SCORE_PROMPT_VERSION, score_prompt
from models.backends.vlm.transformers_backend import TransformersDescriber, TransformersVLMConfig


@dataclass
class TransformersScorerConfig(TransformersVLMConfig):
    """Settings of the local Hugging Face scorer: the describer's model settings, then these."""

    # crops of the target and target-marked full frames shown with each question
    max_crops: int = 4
    max_full_frames: int = 1
    # tokens the decomposed (JSON) answer may use
    max_new_tokens: int = 64
    # the scoring prompt version (models.backends.vlm.score_prompts)
    prompt_version: str = SCORE_PROMPT_VERSION
    # spellings of the two answers whose probabilities are summed
    yes_words: tuple[str, ...] = ("yes", "Yes")
    no_words: tuple[str, ...] = ("no", "No")

    def __post_init__(self) -> None:
        super().__post_init__()
        self.yes_words, self.no_words = tuple(self.yes_words), tuple(self.no_words)
        problems = []
        if self.max_crops < 1 or self.max_full_frames < 0 or self.max_new_tokens < 1:
            problems.append("need max_crops >= 1, max_full_frames >= 0 and max_new_tokens >= 1")
        problems += answer_word_problems(tuple(self.yes_words), tuple(self.no_words))
        if problems:
            raise ValueError("TransformersScorerConfig: " + "; ".join(problems))
        score_prompt(self.prompt_version)        # ValueError names the known versions

    def vlm(self) -> TransformersVLMConfig:
        """The model-loading settings (the describer's config)."""
        return describer_settings(self, TransformersVLMConfig)


class TransformersScorer(ChatScorer):
    """Scores (query, trajectory) pairs with a local image-text-to-text model (see the module docstring)."""

    name = "transformers"

    def __init__(self, config: TransformersScorerConfig):
        super().__init__()
        self.config = config
        self.vlm = TransformersDescriber(config.vlm())   # loads the processor and the model
        self.model = self.vlm.model
        self.crop_max_side, self.frame_max_side = config.crop_max_side, config.frame_max_side
        self.max_crops, self.max_full_frames = config.max_crops, config.max_full_frames
        self.max_new_tokens = config.max_new_tokens
        self.prompt = score_prompt(config.prompt_version)
        tokenizer = getattr(self.vlm.processor, "tokenizer", self.vlm.processor)
        self.tokenizer = tokenizer
        # token ids of each spelling, duplicates (two spellings, one tokenisation) dropped
        self.spellings = {answer: list(dict.fromkeys(tuple(tokenizer.encode(w, add_special_tokens=False))
                                                     for w in words))
                          for answer, words in (("yes", config.yes_words), ("no", config.no_words))}
        for answer, spellings in self.spellings.items():
            if not all(spellings):
                raise ValueError(f"{self.model}: a spelling of {answer!r} encodes to no tokens")

    def settings(self) -> dict:
        return {**self.config.to_dict(), **self.vlm.fingerprint}

    @torch.inference_mode()
    def yes_no(self, messages: list[dict]) -> YesNo:
        inputs = self.vlm.prepare(messages)
        net = self.vlm.net
        logp = torch.log_softmax(net(**inputs, use_cache=False).logits[0, -1].float(), dim=-1)   # [V]
        n = inputs["input_ids"].shape[1]

        def sequence_logprob(ids: tuple[int, ...]) -> float:
            if len(ids) == 1:
                return float(logp[ids[0]])
            extra = torch.tensor([ids], dtype=inputs["input_ids"].dtype, device=inputs["input_ids"].device)  # [1, k]
            forced = dict(inputs)
            for key, value in inputs.items():    # every per-token input grows by k: ids, mask 1, types 0 (text)
                if isinstance(value, torch.Tensor) and value.ndim == 2 and value.shape == (1, n):
                    tail = extra if key == "input_ids" else (torch.ones_like(extra) if key == "attention_mask"
                                                             else torch.zeros_like(extra))
                    forced[key] = torch.cat([value, tail.to(value.dtype)], dim=1)                  # [1, n + k]
            logits = net(**forced, use_cache=False).logits[0, n - 1:n - 1 + len(ids)].float()             # [k, V]
            return float(torch.log_softmax(logits, dim=-1).gather(1, extra.T).sum())

        totals = {}
        per_spelling = {}
        for answer, spellings in self.spellings.items():
            lps = torch.tensor([sequence_logprob(ids) for ids in spellings], dtype=torch.float64)       # [S]
            per_spelling[answer] = [round(float(v), 6) for v in lps]
            total = float(torch.logsumexp(lps, dim=0))
            # NaN or infinite logits give no log-probability (the scorer counts it invalid), never a 0
            totals[answer] = min(0.0, total) if math.isfinite(total) else float("nan")
        top = int(logp.argmax())
        return YesNo(text=self.tokenizer.decode([top], skip_special_tokens=True), log_p_yes=totals["yes"],
                     log_p_no=totals["no"], details={"spelling_logprobs": per_spelling})

    def generate(self, messages: list[dict], *, max_new_tokens: int) -> str:
        return self.vlm.generate(messages, max_new_tokens=max_new_tokens)
