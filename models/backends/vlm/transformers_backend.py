"""A local Hugging Face vision-language model as the describer (Qwen2-VL, Qwen2.5-VL, ...).

The real-model describing backend. The folder is loaded with ``AutoProcessor`` and
``AutoModelForImageTextToText`` (local files only); the chat of :class:`models.backends.vlm.chat.ChatDescriber`
goes through the processor's chat template with the images in place, and the answer is decoded
greedily within ``budget.max_new_tokens``::

    describer = TransformersDescriber(TransformersVLMConfig(model_path="weights/Qwen2.5-VL-7B-Instruct"))
    result = describer.describe(request)


Crops and full frames are downscaled to ``crop_max_side`` / ``frame_max_side`` before the
processor sees them, which bounds the number of image tokens per request.
"""
from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
import torch

from models.backends.llm.hf_local import check_model_folder, resolve_device, resolve_dtype
from models.backends.vlm.chat import ChatDescriber
from models.config import UNKNOWN_SETTINGS, PlainConfig


@dataclass
class TransformersVLMConfig(PlainConfig):
    """Settings of the local Hugging Face describer (plain data; recorded with every description)."""

    unknown_keys_message = UNKNOWN_SETTINGS

    # local Hugging Face folder of an image-text-to-text model with a chat template
    model_path: str = ""
    # "auto" (CUDA when available), "cpu", "cuda" or "cuda:N"
    device: str = "auto"
    # "auto" (bfloat16 on CUDA, float32 on CPU), "float32", "bfloat16" or "float16"
    dtype: str = "auto"
    # longer side of each target crop given to the model, pixels
    crop_max_side: int = 336
    # longer side of each target-marked full frame, pixels
    frame_max_side: int = 768
    # attention kernel passed to from_pretrained ("sdpa", "eager", "flash_attention_2"; None: default)
    attn_implementation: str | None = None

    def __post_init__(self) -> None:
        problems = []
        if self.crop_max_side < 28 or self.frame_max_side < 28:
            problems.append("crop_max_side and frame_max_side must be >= 28 pixels")
        if self.dtype not in ("auto", "float32", "bfloat16", "float16"):
            problems.append(f"dtype must be auto, float32, bfloat16 or float16, got {self.dtype!r}")
        if problems:
            raise ValueError("TransformersVLMConfig: " + "; ".join(problems))


class TransformersDescriber(ChatDescriber):
    """Describes trajectories with a local image-text-to-text model (see the module docstring)."""

    name = "transformers"

    def __init__(self, config: TransformersVLMConfig):
        from transformers import AutoModelForImageTextToText, AutoProcessor

        self.config = config
        self.fingerprint = check_model_folder(config.model_path)
        self.model = self.fingerprint["model_path"]
        self.crop_max_side = config.crop_max_side
        self.frame_max_side = config.frame_max_side
        self.device = resolve_device(config.device)
        self.processor = AutoProcessor.from_pretrained(self.model, local_files_only=True)
        if getattr(self.processor, "chat_template", None) is None:
            raise ValueError(f"{self.model}: the processor has no chat template; a chat (instruct) model is needed")
        kwargs = {"dtype": resolve_dtype(config.dtype, self.device), "local_files_only": True}
        if config.attn_implementation:
            kwargs["attn_implementation"] = config.attn_implementation
        self.net = AutoModelForImageTextToText.from_pretrained(self.model, **kwargs).to(self.device).eval()

    def settings(self) -> dict:
        return {**self.config.to_dict(), **self.fingerprint}

    def prepare(self, messages: list[dict]) -> dict:
        """Processor inputs (tensors on the model's device) for a chat whose image parts hold BGR arrays."""
        from PIL import Image

        images, chat = [], []
        for message in messages:
            parts = []
            for part in message["content"]:
                if part["type"] == "image":
                    images.append(Image.fromarray(cv2.cvtColor(np.asarray(part["image"]), cv2.COLOR_BGR2RGB)))
                    parts.append({"type": "image"})
                else:
                    parts.append({"type": "text", "text": part["text"]})
            chat.append({"role": message["role"], "content": parts})
        text = self.processor.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
        inputs = self.processor(text=[text], images=images or None, return_tensors="pt")
        return {k: v.to(self.device) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}

    @torch.inference_mode()
    def generate(self, messages: list[dict], *, max_new_tokens: int) -> str:
        inputs = self.prepare(messages)
        tokenizer = getattr(self.processor, "tokenizer", self.processor)
        out = self.net.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False,
                                pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None
                                else tokenizer.eos_token_id)
        new = out[0, inputs["input_ids"].shape[1]:]                        # [T]
        return tokenizer.decode(new, skip_special_tokens=True)
