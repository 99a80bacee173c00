"""SCOUT's predictor body from a pretrained language model (SCOUT 3.2: "a trainable transformer body
of 24 layers, initialized from a Qwen3.5-0.8B decoder").

:class:`PretrainedBody` loads a local Hugging Face model folder (a causal LM such as Qwen or Llama,
or an encoder such as BERT) with transformers, local files only, and runs its transformer stack on
embeddings: the projected visual tokens followed by the prompt tokens. Every weight stays
trainable, as the paper trains the whole predictor. The model's own attention decides what a
position reads (a decoder: causal, so the prompts, placed last, read every token; an encoder: both
ways). The token-embedding table is never read (the inputs are embeddings), so it is replaced by a
one-row stub: it would otherwise be the largest block of the state dict and of the optimizer.
"""
from __future__ import annotations

import os
from pathlib import Path

import torch
from torch import nn


class PretrainedBody(nn.Module):
    """A pretrained transformer stack over input embeddings ``[B, S, width]``."""

    def __init__(self, path: str):
        super().__init__()
        folder = Path(path).expanduser() if path else None
        if folder is None or not folder.is_dir() or not (folder / "config.json").is_file():
            raise ValueError(f"SCOUT predictor: pretrained body folder not found or without config.json: "
                             f"{path or '(none set)'} (a local Hugging Face model folder is required; "
                             "nothing is downloaded)")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from transformers import AutoModel

        try:
            model = AutoModel.from_pretrained(str(folder), local_files_only=True, dtype=torch.float32)
        except Exception as exc:     # a corrupt config or weights file: transformers raises many kinds
            raise ValueError(f"SCOUT predictor: cannot load the pretrained body from {folder}: "
                             f"{type(exc).__name__}: {exc}") from None
        width = getattr(model.config, "hidden_size", None)
        if not isinstance(width, int) or width < 1:
            raise ValueError(f"SCOUT predictor: {folder} has no hidden_size in its config; not a transformer body")
        model.set_input_embeddings(nn.Embedding(1, width))
        for p in model.parameters():
            p.requires_grad_(True)
        self.model = model
        self.width = width
        self.source = str(folder)

    def forward(self, embeds: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        """``embeds [B, S, width]``, ``keep [B, S]`` (True = a real position) → hidden states
        ``[B, S, width]``. Positions count real tokens only, so padding between the visual tokens
        and the prompts changes nothing."""
        mask = keep.long()                                                         # [B, S]
        positions = (mask.cumsum(dim=1) - 1).clamp(min=0)                          # [B, S]
        out = self.model(inputs_embeds=embeds, attention_mask=mask, position_ids=positions)
        return out.last_hidden_state                                               # [B, S, width]
