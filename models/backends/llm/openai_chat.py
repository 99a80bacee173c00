"""A client for OpenAI-compatible chat-completions endpoints (vLLM, llama.cpp server, ...).

Plain standard-library HTTP (``urllib``): one POST to ``{base_url}/chat/completions`` per answer,
greedy by default (``temperature=0``, fixed ``seed``). Images go inside the messages as base64
``data:`` URLs (:func:`image_part`), the form these servers accept for vision models.

Transport problems (connection refused, timeout, an HTTP error status, a reply that is not a
chat-completions envelope) raise :class:`EndpointError`: they say the endpoint cannot be used,
not that the model misbehaved. What the model wrote is returned as text, valid or not; judging it
is the caller's business.
"""
from __future__ import annotations

import base64
import json
import math
import os
import urllib.error
import urllib.request
from dataclasses import dataclass, field

from models.config import UNKNOWN_SETTINGS, PlainConfig


class EndpointError(RuntimeError):
    """The chat-completions endpoint could not be reached or did not answer in its protocol."""


@dataclass
class ChatEndpointConfig(PlainConfig):
    """Where and how to call an OpenAI-compatible server (plain data; recorded without the key)."""

    unknown_keys_message = UNKNOWN_SETTINGS

    # server root including the API prefix, e.g. "http://127.0.0.1:8000/v1"
    base_url: str = "http://127.0.0.1:8000/v1"
    # model name as the server knows it (vLLM: the served model name; llama.cpp: anything)
    model: str = ""
    # environment variable holding the API key; unset or empty sends no Authorization header
    api_key_env: str = "OPENAI_API_KEY"
    # seconds to wait for one answer (connect and read) before EndpointError
    timeout_s: float = 120.0
    # sampling temperature; 0 is greedy decoding
    temperature: float = 0.0
    # sampling seed sent with every request (None: not sent)
    seed: int | None = 0
    # ask for response_format {"type": "json_object"} (vLLM and llama.cpp support it)
    json_mode: bool = False
    # further request fields passed through unchanged (e.g. {"top_k": 1})
    extra_body: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        problems = []
        if not self.base_url.startswith(("http://", "https://")):
            problems.append(f"base_url must start with http:// or https://, got {self.base_url!r}")
        if not self.model:
            problems.append("model must name the served model")
        if not (isinstance(self.timeout_s, int | float) and math.isfinite(self.timeout_s) and self.timeout_s > 0):
            problems.append(f"timeout_s must be a positive number, got {self.timeout_s!r}")
        if not (math.isfinite(self.temperature) and self.temperature >= 0):
            problems.append(f"temperature must be >= 0, got {self.temperature!r}")
        if not isinstance(self.extra_body, dict):
            problems.append("extra_body must be a dict")
        if problems:
            raise ValueError("ChatEndpointConfig: " + "; ".join(problems))


@dataclass
class ChatAnswer:
    """One answer of the endpoint."""

    text: str                                    # the assistant message content ("" when null)
    finish_reason: str                           # "stop", "length", ... ("" when not given)
    usage: dict                                  # token counts as the server reported them
    # per answer token {"token", "logprob", "top_logprobs": [{"token", "logprob"}, ...]} when the
    # request asked for logprobs and the server returned them (choices[0].logprobs.content); else []
    logprobs: list = field(default_factory=list)


def image_part(jpeg: bytes) -> dict:
    """A message content part carrying a JPEG image as a base64 data URL."""
    if not jpeg:
        raise ValueError("image_part needs JPEG bytes")
    url = "data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii")
    return {"type": "image_url", "image_url": {"url": url}}


def chat_completion(config: ChatEndpointConfig, messages: list[dict], *, max_tokens: int,
                    extra: dict | None = None) -> ChatAnswer:
    """POST one chat-completions request and return the first choice's message. ``extra``: request
    fields of this call only, after ``config.extra_body`` (e.g. ``{"logprobs": True, "top_logprobs": 5}``).

    Raises :class:`EndpointError` when the server cannot be reached, times out, answers with an
    HTTP error or with something that is not a chat-completions response.
    """
    if not messages:
        raise ValueError("chat_completion needs at least one message")
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
    body = {"model": config.model, "messages": messages, "max_tokens": int(max_tokens),
            "temperature": config.temperature, **config.extra_body, **(extra or {})}
    if config.seed is not None:
        body["seed"] = config.seed
    if config.json_mode:
        body["response_format"] = {"type": "json_object"}
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    key = os.environ.get(config.api_key_env, "") if config.api_key_env else ""
    if key:
        headers["Authorization"] = f"Bearer {key}"
    url = config.base_url.rstrip("/") + "/chat/completions"
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=config.timeout_s) as response:
            payload = response.read()
    except urllib.error.HTTPError as exc:
        detail = exc.read()[:300].decode("utf-8", "replace")
        raise EndpointError(f"{url}: HTTP {exc.code} {exc.reason}: {detail}") from None
    except TimeoutError:
        raise EndpointError(f"{url}: no answer within {config.timeout_s:g} s") from None
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, TimeoutError):
            raise EndpointError(f"{url}: no answer within {config.timeout_s:g} s") from None
        raise EndpointError(f"{url}: cannot connect ({exc.reason})") from None
    except OSError as exc:
        raise EndpointError(f"{url}: {exc}") from None
    try:
        data = json.loads(payload)
        choice = data["choices"][0]
        content = choice["message"].get("content")
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        raise EndpointError(f"{url}: the reply is not a chat-completions response: {payload[:200]!r}") from None
    if isinstance(content, list):  # some servers return content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    logprobs = choice.get("logprobs")
    tokens = logprobs.get("content") if isinstance(logprobs, dict) else None
    return ChatAnswer(text=content if isinstance(content, str) else "",
                      finish_reason=str(choice.get("finish_reason") or ""), usage=dict(data.get("usage") or {}),
                      logprobs=[t for t in tokens if isinstance(t, dict)] if isinstance(tokens, list) else [])
