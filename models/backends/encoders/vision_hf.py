"""Frozen Hugging Face vision towers from a local folder: SigLIP, SigLIP2, CLIP and V-JEPA 2.

The architecture is read from the folder's ``config.json`` (``model_type``); a full dual-encoder
checkpoint (``clip``, ``siglip``) loads only its vision tower. Images are converted BGR → RGB,
resized and normalised with the folder's ``preprocessor_config.json`` mean and std when there is
one (else the family's published values):

- SigLIP / CLIP: the image is resized to the model's square input (an object crop is squashed
  rather than centre-cropped, so no part of the person is cut off). The crop vector and the
  global frame feature are the model's pooled output (SigLIP's attention-pooling head, CLIP's
  post-LayerNorm class token); the context tokens are the last hidden states of the patches.
- SigLIP2 (NaFlex): the image keeps its aspect ratio on a patch grid of at most ``max_patches``
  patches (the model's ``num_patches`` by default); batches are padded with an attention mask.
- V-JEPA 2 (a video model): an image is a clip of ``tubelet_size`` identical frames; the crop
  vector and global feature are the mean of the encoder's output tokens.

Global frame features are L2-normalised. Nothing is downloaded: a missing folder or an
unsupported ``model_type`` raises ``EncoderConfigError``.
"""
from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence

import cv2
import numpy as np
import torch

from models.backends.encoders.base import (
    EncoderConfigError,
    FrameEncoding,
    check_images,
    l2_normalize,
    model_folder,
    weights_digest,
)
from models.backends.encoders.text import resolve_device

# model_type in config.json -> family
VISION_FAMILIES = {
    "siglip": "siglip", "siglip_vision_model": "siglip",
    "siglip2": "siglip2", "siglip2_vision_model": "siglip2",
    "clip": "clip", "clip_vision_model": "clip",
    "vjepa2": "vjepa2",
}
# (mean, std) published with each family's image processor, used when the folder has none
FAMILY_NORMALISATION = {
    "siglip": ((0.5, 0.5, 0.5), (0.5, 0.5, 0.5)),
    "siglip2": ((0.5, 0.5, 0.5), (0.5, 0.5, 0.5)),
    "clip": ((0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711)),
    "vjepa2": ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
}


class HFVisionEncoder:
    """A frozen HF vision tower (the module docstring)."""

    def __init__(self, path: str | os.PathLike, *, device: str = "cpu", batch_size: int = 32,
                 image_size: int | None = None, max_patches: int | None = None):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        folder = model_folder(path, "vision encoder")
        model_type = json.loads((folder / "config.json").read_text()).get("model_type")
        family = VISION_FAMILIES.get(model_type)
        if family is None:
            raise EncoderConfigError(f"{folder}: model_type {model_type!r} is not a supported vision tower; "
                                     f"supported: {', '.join(sorted(VISION_FAMILIES))}")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import transformers

        model_class = {"siglip": transformers.SiglipVisionModel, "siglip2": transformers.Siglip2VisionModel,
                       "clip": transformers.CLIPVisionModel, "vjepa2": transformers.VJEPA2Model}[family]
        self.family = family
        self.device = resolve_device(device)
        self.batch_size = batch_size
        self.model = model_class.from_pretrained(str(folder), local_files_only=True).to(self.device).eval()
        for p in self.model.parameters():
            p.requires_grad_(False)
        cfg = self.model.config
        mean, std = FAMILY_NORMALISATION[family]
        processor = folder / "preprocessor_config.json"
        if processor.is_file():
            data = json.loads(processor.read_text())
            mean, std = data.get("image_mean", mean), data.get("image_std", std)
        self.mean = np.asarray(mean, dtype=np.float32).reshape(1, 1, 3)
        self.std = np.asarray(std, dtype=np.float32).reshape(1, 1, 3)
        self.patch = int(cfg.patch_size)
        if family == "siglip2":
            self.max_patches = int(max_patches or cfg.num_patches)
            size_note = f"p{self.max_patches}"
        else:
            native = cfg.crop_size if family == "vjepa2" else cfg.image_size
            self.image_size = int(image_size or native)
            if self.image_size % self.patch:
                raise ValueError(f"image_size {self.image_size} must be a multiple of the patch size {self.patch}")
            size_note = f"s{self.image_size}"
        self.name = f"hf-vision:{model_type}:{folder.name}:{weights_digest(folder)[:16]}:{size_note}"
        self.token_dim = int(cfg.hidden_size)
        self.dim = int(self._forward([np.zeros((2 * self.patch, 2 * self.patch, 3), np.uint8)])[0].shape[1])

    # -- preprocessing -------------------------------------------------------------------------
    def _normalise(self, image: np.ndarray, width: int, height: int) -> np.ndarray:
        rgb = cv2.cvtColor(cv2.resize(image, (width, height), interpolation=cv2.INTER_AREA), cv2.COLOR_BGR2RGB)
        return ((rgb.astype(np.float32) / 255.0 - self.mean) / self.std).transpose(2, 0, 1)  # [3, H, W]

    def _siglip2_grid(self, h: int, w: int) -> tuple[int, int]:
        """Patch rows and columns keeping the aspect ratio within the patch budget."""
        scale = math.sqrt(self.max_patches / max(1.0, (h / self.patch) * (w / self.patch)))
        rows = max(1, int(h / self.patch * scale))
        cols = max(1, int(w / self.patch * scale))
        while rows * cols > self.max_patches:
            if rows >= cols:
                rows -= 1
            else:
                cols -= 1
        return rows, cols

    # -- forward -------------------------------------------------------------------------------
    @torch.inference_mode()
    def _forward(self, images: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Pooled ``[N, dim]``, tokens ``[N, T, token_dim]`` and token mask ``[N, T]``."""
        pooled, tokens, masks = [], [], []
        for start in range(0, len(images), self.batch_size):
            chunk = images[start:start + self.batch_size]
            if self.family == "siglip2":
                p, t, m = self._forward_siglip2(chunk)
            else:
                s = self.image_size
                pixels = torch.from_numpy(np.stack([self._normalise(im, s, s) for im in chunk])).to(self.device)
                if self.family == "vjepa2":
                    video = pixels[:, None].repeat(1, int(self.model.config.tubelet_size), 1, 1, 1)  # [n, T, 3, H, W]
                    hidden = self.model(pixel_values_videos=video, skip_predictor=True).last_hidden_state
                    p, t = hidden.mean(dim=1), hidden                                    # [n, D], [n, T, D]
                else:
                    out = self.model(pixel_values=pixels)
                    hidden = out.last_hidden_state                                      # [n, T(+1), D]
                    p, t = out.pooler_output, hidden[:, 1:] if self.family == "clip" else hidden
                m = torch.ones(t.shape[:2], dtype=torch.bool)
            pooled.append(p.float().cpu().numpy())
            tokens.append(t.float().cpu().numpy())
            masks.append(m.cpu().numpy())
        longest = max(t.shape[1] for t in tokens)
        tok = np.zeros((len(images), longest, tokens[0].shape[2]), np.float32)          # [N, T, D]
        mask = np.zeros((len(images), longest), bool)                                    # [N, T]
        row = 0
        for t, m in zip(tokens, masks):
            tok[row:row + len(t), :t.shape[1]] = t * m[..., None]                    # padding states are zeroed
            mask[row:row + len(t), :t.shape[1]] = m
            row += len(t)
        return np.concatenate(pooled).astype(np.float32), tok, mask

    def _forward_siglip2(self, images: Sequence[np.ndarray]):
        p = self.patch
        patches, shapes = [], []
        for im in images:
            rows, cols = self._siglip2_grid(*im.shape[:2])
            x = self._normalise(im, cols * p, rows * p)                                   # [3, H, W]
            x = x.reshape(3, rows, p, cols, p).transpose(1, 3, 2, 4, 0).reshape(rows * cols, p * p * 3)
            patches.append(x)
            shapes.append((rows, cols))
        longest = max(len(x) for x in patches)
        pixels = np.zeros((len(images), longest, p * p * 3), np.float32)                # [n, N, p²·3]
        mask = np.zeros((len(images), longest), np.int64)                                # [n, N]
        for i, x in enumerate(patches):
            pixels[i, :len(x)] = x
            mask[i, :len(x)] = 1
        out = self.model(pixel_values=torch.from_numpy(pixels).to(self.device),
                         pixel_attention_mask=torch.from_numpy(mask).to(self.device),
                         spatial_shapes=torch.tensor(shapes, dtype=torch.long, device=self.device))
        return out.pooler_output, out.last_hidden_state, torch.from_numpy(mask.astype(bool))

    # -- ImageEncoder --------------------------------------------------------------------------
    def encode_crops(self, crops: Sequence[np.ndarray]) -> np.ndarray:
        check_images(crops, "crop")
        if not crops:
            return np.zeros((0, self.dim), np.float32)
        return self._forward(list(crops))[0]

    def encode_frames(self, frames: Sequence[np.ndarray]) -> FrameEncoding:
        check_images(frames, "frame")
        if not frames:
            return FrameEncoding(np.zeros((0, self.dim), np.float32), np.zeros((0, 1, self.token_dim), np.float32),
                                 np.zeros((0, 1), bool))
        pooled, tokens, mask = self._forward(list(frames))
        return FrameEncoding(global_features=l2_normalize(pooled), tokens=tokens, token_mask=mask)
