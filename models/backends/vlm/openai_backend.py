"""An OpenAI-compatible chat-completions endpoint as the describer (vLLM, llama.cpp server, ...).

The chat of :class:`models.backends.vlm.chat.ChatDescriber` is sent as one request per attempt, images as
base64 JPEG data URLs (``image_url`` content parts), greedy by default::

    describer = OpenAIDescriber(OpenAIVLMConfig(base_url="http://gpu-box:8000/v1", model="Qwen2.5-VL-7B-Instruct"))

The API key is read from the environment variable named by ``api_key_env`` at each request and
never recorded. Transport failures raise :class:`models.backends.llm.openai_chat.EndpointError`; what the
model writes, however wrong, is handled by the retry loop.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from models.backends.llm.openai_chat import ChatEndpointConfig, chat_completion, image_part
from models.backends.vlm.chat import ChatDescriber
from models.config import UNKNOWN_SETTINGS, PlainConfig
from models.media.video import encode_jpeg


@dataclass
class OpenAIVLMConfig(PlainConfig):
    """Settings of the endpoint describer (plain data; recorded with every description, no key)."""

    unknown_keys_message = UNKNOWN_SETTINGS

    # server root including the API prefix, e.g. "http://127.0.0.1:8000/v1"
    base_url: str = "http://127.0.0.1:8000/v1"
    # the served vision-language model's name
    model: str = ""
    # environment variable holding the API key (unset or empty: no Authorization header)
    api_key_env: str = "OPENAI_API_KEY"
    # seconds to wait for one answer
    timeout_s: float = 300.0
    # sampling temperature (0: greedy)
    temperature: float = 0.0
    # sampling seed sent with each request (None: not sent)
    seed: int | None = 0
    # ask the server for a JSON object (response_format json_object)
    json_mode: bool = False
    # further request fields passed through unchanged
    extra_body: dict = field(default_factory=dict)
    # longer side of each target crop sent, pixels
    crop_max_side: int = 336
    # longer side of each target-marked full frame sent, pixels
    frame_max_side: int = 768
    # JPEG quality of the images sent (1-100)
    jpeg_quality: int = 90

    def __post_init__(self) -> None:
        if not 1 <= self.jpeg_quality <= 100:
            raise ValueError(f"OpenAIVLMConfig: jpeg_quality must be in 1..100, got {self.jpeg_quality}")
        if self.crop_max_side < 16 or self.frame_max_side < 16:
            raise ValueError("OpenAIVLMConfig: crop_max_side and frame_max_side must be >= 16 pixels")
        self.endpoint()  # validates the endpoint fields

    def endpoint(self) -> ChatEndpointConfig:
        names = {f.name for f in dataclasses.fields(ChatEndpointConfig)}
        return ChatEndpointConfig(**{k: v for k, v in self.to_dict().items() if k in names})


class OpenAIDescriber(ChatDescriber):
    """Describes trajectories through a chat-completions endpoint (see the module docstring)."""

    name = "openai"

    def __init__(self, config: OpenAIVLMConfig):
        self.config = config
        self.endpoint = config.endpoint()
        self.model = config.model
        self.crop_max_side = config.crop_max_side
        self.frame_max_side = config.frame_max_side

    def settings(self) -> dict:
        return self.config.to_dict()

    def to_openai_messages(self, messages: list[dict]) -> list[dict]:
        """The chat with each image part replaced by a JPEG data-URL part."""
        out = []
        for message in messages:
            parts = []
            for part in message["content"]:
                if part["type"] == "image":
                    parts.append(image_part(encode_jpeg(part["image"], quality=self.config.jpeg_quality)))
                else:
                    parts.append({"type": "text", "text": part["text"]})
            if message["role"] in ("system", "assistant"):  # plain strings: what every server accepts there
                out.append({"role": message["role"], "content": "".join(p.get("text", "") for p in parts)})
            else:
                out.append({"role": message["role"], "content": parts})
        return out

    def generate(self, messages: list[dict], *, max_new_tokens: int) -> str:
        return chat_completion(self.endpoint, self.to_openai_messages(messages), max_tokens=max_new_tokens).text
