"""An OpenAI-compatible chat-completions endpoint as the scorer (vLLM, llama.cpp server, ...).

The two questions of ``chat_scoring.py`` go out as one request each, images as base64 JPEG data
URLs (the describing backend's message conversion, ``OpenAIDescriber.to_openai_messages``):

- yes/no: ``max_tokens = holistic_max_tokens``, ``logprobs: true``, ``top_logprobs:
  top_logprobs``, never JSON mode. ``log P(yes)`` / ``log P(no)`` are read from the first answer
  token's top log-probabilities (and the chosen token's own) with
  ``scoring.yes_no_from_top_logprobs`` (case and spaces ignored; a word missing from the top k
  gets the bound that function documents): ``holistic_source: "logprob"``. When the server
  returns no log-probabilities, or none of a yes or a no token, the answer text is read instead
  (``holistic_source: "answer"``, yes → log 0.99, no → log 0.01); an answer that is neither is
  an invalid mark;
- scores: ``max_tokens = max_new_tokens``, JSON mode when ``json_mode`` is set, the answer read by
  ``scoring.parse_scores``.

The API key is read from the environment variable named by ``api_key_env`` at each request and
never recorded. Transport failures raise :class:`models.backends.llm.openai_chat.EndpointError`;
what the model writes, however wrong, is counted, never raised.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from models.backends.llm.openai_chat import chat_completion
from models.backends.vlm.chat_scoring import (
    ChatScorer,
    YesNo,
    answer_word_problems,
    describer_settings,
)
from models.backends.vlm.openai_backend import OpenAIDescriber, OpenAIVLMConfig
from models.backends.vlm.score_prompts import SCORE_PROMPT_VERSION, score_prompt
from models.backends.vlm.scoring import yes_no_from_top_logprobs


@dataclass
class OpenAIScorerConfig(OpenAIVLMConfig):
    """Settings of the endpoint scorer: the describer's endpoint settings, then these (no key)."""

    # crops of the target and target-marked full frames sent with each question
    max_crops: int = 4
    max_full_frames: int = 1
    # tokens the yes/no answer and the decomposed (JSON) answer may use
    holistic_max_tokens: int = 1
    max_new_tokens: int = 64
    # alternatives per answer token the server is asked to return (OpenAI allows 0..20)
    top_logprobs: int = 10
    # the scoring prompt version (models.backends.vlm.score_prompts)
    prompt_version: str = SCORE_PROMPT_VERSION
    # token spellings (spaces and case ignored) of the two answers
    yes_words: tuple[str, ...] = ("yes",)
    no_words: tuple[str, ...] = ("no",)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.yes_words, self.no_words = tuple(self.yes_words), tuple(self.no_words)
        problems = []
        if self.max_crops < 1 or self.max_full_frames < 0:
            problems.append("need max_crops >= 1 and max_full_frames >= 0")
        if self.holistic_max_tokens < 1 or self.max_new_tokens < 1:
            problems.append("holistic_max_tokens and max_new_tokens must be >= 1")
        if not 1 <= self.top_logprobs <= 20:
            problems.append(f"top_logprobs must be in 1..20, got {self.top_logprobs}")
        problems += answer_word_problems(tuple(self.yes_words), tuple(self.no_words))
        if problems:
            raise ValueError("OpenAIScorerConfig: " + "; ".join(problems))
        score_prompt(self.prompt_version)        # ValueError names the known versions

    def vlm(self) -> OpenAIVLMConfig:
        """The endpoint settings (the describer's config)."""
        return describer_settings(self, OpenAIVLMConfig)


def first_token_alternatives(logprobs: list[dict]) -> list[tuple[str, float]]:
    """``(token, log-probability)`` of the first answer token and of its listed alternatives, each
    token once (malformed entries skipped); [] without log-probabilities."""
    if not logprobs:
        return []
    first = logprobs[0]
    entries = [first, *(first.get("top_logprobs") or [])]
    out: dict[str, float] = {}
    for e in entries:
        token, lp = (e.get("token"), e.get("logprob")) if isinstance(e, dict) else (None, None)
        if (isinstance(token, str) and token not in out and isinstance(lp, int | float) and not isinstance(lp, bool)
                and math.isfinite(lp)):
            out[token] = float(lp)
    return list(out.items())


class OpenAIScorer(ChatScorer):
    """Scores (query, trajectory) pairs through a chat-completions endpoint (see the module docstring)."""

    name = "openai"

    def __init__(self, config: OpenAIScorerConfig):
        super().__init__()
        self.config = config
        self.vlm = OpenAIDescriber(config.vlm())         # the message conversion (no request is made)
        self.model = config.model
        self.crop_max_side, self.frame_max_side = config.crop_max_side, config.frame_max_side
        self.max_crops, self.max_full_frames = config.max_crops, config.max_full_frames
        self.max_new_tokens = config.max_new_tokens
        self.prompt = score_prompt(config.prompt_version)
        self.endpoint = self.vlm.endpoint
        self.holistic_endpoint = dataclasses.replace(self.endpoint, json_mode=False)

    def settings(self) -> dict:
        return self.config.to_dict()

    def yes_no(self, messages: list[dict]) -> YesNo:
        answer = chat_completion(self.holistic_endpoint, self.vlm.to_openai_messages(messages),
                                 max_tokens=self.config.holistic_max_tokens,
                                 extra={"logprobs": True, "top_logprobs": self.config.top_logprobs})
        top = first_token_alternatives(answer.logprobs)
        pair = yes_no_from_top_logprobs(top, yes_words=self.config.yes_words, no_words=self.config.no_words)
        details = {"top_logprobs": [[t, round(lp, 6)] for t, lp in top]}
        if pair is None:
            return YesNo(text=answer.text, details=details)
        return YesNo(text=answer.text, log_p_yes=pair[0], log_p_no=pair[1], details=details)

    def generate(self, messages: list[dict], *, max_new_tokens: int) -> str:
        return chat_completion(self.endpoint, self.vlm.to_openai_messages(messages), max_tokens=max_new_tokens).text
