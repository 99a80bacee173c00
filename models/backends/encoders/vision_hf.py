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

With a ``pixel_budget`` every family reads a full frame (``encode_frames``, ``encode_rois``) at
its own aspect ratio on a patch grid of at most that many pixels (``budget_grid``, never enlarged);
SigLIP and CLIP then interpolate their position embeddings (V-JEPA 2's rotary positions and
SigLIP2's NaFlex embeddings need nothing).

``encode_rois`` (the Fast branch's region tensor, paper C.3): the frame goes through the tower once;
the hidden states of the tapped layers ``roi_layers`` (one-based; by default half-way, three quarters
and the last, which is the paper's 12, 18, 24 of 24) are LayerNorm-ed per token (no weights, so the
taps weigh alike), laid out on the patch grid ``[width, rows, cols]``, and each box, scaled to grid
units, is ROI-aligned (``torchvision.ops.roi_align``, ``roi_size × roi_size`` bins, pixel-centre
aligned) on every tap. The taps are concatenated per bin ``[taps · width, s, s]``; with a
``roi_projector`` file (``[C, taps · width]``, frozen) each bin's channels are mapped to ``C``
(the paper's per-tap merger and projection to 2560 channels, which keep the spatial layout);
without one ``C = taps · width``. The ``C × s × s`` tensor is flattened, channel-major, into one
row of ``roi_dim = C · s²`` (the paper's ``7 × 7 × 2560 → 125,440``): the bins are not pooled, so
where in the box a feature lies stays in the row. The MLP that turns the row into ``a_t`` is
trained with the model (``models.retrievers.vtrajembed.model.RoiProjector``); ``roi_bins`` and
``roi_channels`` tell it the layout. The taps, bins and channel map are part of the encoder's name.

Global frame features are L2-normalised. Nothing is downloaded: a missing folder or an
unsupported ``model_type`` raises ``EncoderConfigError``.
"""
from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence

import cv2
import numpy as np
import torch
import torch.nn.functional as F

from models.backends.encoders.base import (
    EncoderConfigError,
    FrameEncoding,
    budget_grid,
    check_boxes,
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
                 image_size: int | None = None, max_patches: int | None = None, pixel_budget: int | None = None,
                 roi_layers: Sequence[int] | None = None, roi_size: int = 7, roi_projector: str = ""):
        if batch_size < 1 or roi_size < 1:
            raise ValueError(f"batch_size and roi_size must be >= 1, got {batch_size} and {roi_size}")
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
        if pixel_budget is not None and pixel_budget < self.patch * self.patch:
            raise ValueError(f"pixel_budget {pixel_budget} is smaller than one {self.patch}x{self.patch} patch")
        self.pixel_budget = pixel_budget
        if family == "siglip2":
            self.max_patches = int(max_patches or cfg.num_patches)
            size_note = f"p{self.max_patches}"
        else:
            native = cfg.crop_size if family == "vjepa2" else cfg.image_size
            self.image_size = int(image_size or native)
            if self.image_size % self.patch:
                raise ValueError(f"image_size {self.image_size} must be a multiple of the patch size {self.patch}")
            size_note = f"s{self.image_size}"
        if pixel_budget is not None:
            size_note += f"b{pixel_budget}"
        self.token_dim = int(cfg.hidden_size)
        self.dim = int(self._forward([np.zeros((2 * self.patch, 2 * self.patch, 3), np.uint8)])[0].shape[1])
        # the Fast branch: tapped layers and the optional frozen per-bin channel map
        depth = int(cfg.num_hidden_layers)
        layers = list(roi_layers) if roi_layers is not None else sorted({max(1, round(depth * f)) for f in (0.5, 0.75, 1.0)})
        bad = [n for n in layers if not (isinstance(n, int) and 1 <= n <= depth)]
        if bad or not layers or len(set(layers)) != len(layers):
            raise ValueError(f"roi_layers {layers}: layers {bad or layers} are not distinct layers of this tower "
                             f"(one-based, 1..{depth})")
        self.roi_layers, self.roi_bins = layers, int(roi_size)
        in_dim = len(layers) * self.token_dim
        self.roi_projector, proj_note = None, "flat"
        if roi_projector:
            weight, proj_note = _load_projector(roi_projector, in_dim)
            self.roi_projector = weight.to(self.device)                                       # [C, taps·D] frozen
        self.roi_channels = in_dim if self.roi_projector is None else int(self.roi_projector.shape[0])
        self.roi_dim = self.roi_channels * self.roi_bins ** 2                                 # C · s²
        roi_note = f"roi{'-'.join(map(str, layers))}r{self.roi_bins}{proj_note}x{self.roi_channels}"
        self.name = f"hf-vision:{model_type}:{folder.name}:{weights_digest(folder)[:16]}:{size_note}:{roi_note}"

    # -- preprocessing -------------------------------------------------------------------------
    def _normalise(self, image: np.ndarray, width: int, height: int) -> np.ndarray:
        rgb = cv2.cvtColor(cv2.resize(image, (width, height), interpolation=cv2.INTER_AREA), cv2.COLOR_BGR2RGB)
        return ((rgb.astype(np.float32) / 255.0 - self.mean) / self.std).transpose(2, 0, 1)  # [3, H, W]

    def _siglip2_grid(self, h: int, w: int) -> tuple[int, int]:
        """Patch rows and columns keeping the aspect ratio, filling the patch budget."""
        return budget_grid(h, w, self.max_patches * self.patch * self.patch, self.patch, upscale=True)

    def input_grid(self, h: int, w: int, budget: bool = True) -> tuple[int, int]:
        """The patch grid ``(rows, cols)`` an ``h × w`` image is read on: the pixel budget's when
        set and ``budget`` (full frames; crops are read at the model's own size), else SigLIP2's
        patch budget or the model's square input."""
        if budget and self.pixel_budget is not None:
            return budget_grid(h, w, self.pixel_budget, self.patch)
        if self.family == "siglip2":
            return self._siglip2_grid(h, w)
        side = self.image_size // self.patch
        return side, side

    # -- forward -------------------------------------------------------------------------------
    def _passes(self, images: Sequence[np.ndarray], taps: Sequence[int] = (), budget: bool = True):
        """Forward passes over ``images``: yields ``(indices, grids, pooled [n, dim], tokens [n, T, D],
        mask [n, T], tapped)`` per pass, ``tapped`` the hidden states of layers ``taps`` as patch
        grids ``[n, D, rows, cols]`` (one list per image). Images of one pass share their input size
        (SigLIP2 pads instead)."""
        grids = [self.input_grid(*im.shape[:2], budget=budget) for im in images]
        by_size: dict[tuple[int, int], list[int]] = {}
        for i, g in enumerate(grids):
            by_size.setdefault((0, 0) if self.family == "siglip2" else g, []).append(i)
        for members in by_size.values():
            for start in range(0, len(members), self.batch_size):
                idx = members[start:start + self.batch_size]
                yield (idx, [grids[i] for i in idx],
                       *self._run([images[i] for i in idx], [grids[i] for i in idx], taps, budget))

    def _run(self, images: Sequence[np.ndarray], grids: list[tuple[int, int]], taps: Sequence[int], budget: bool):
        p, want = self.patch, bool(taps)
        if self.family == "siglip2":
            patches = []
            for im, (rows, cols) in zip(images, grids):
                x = self._normalise(im, cols * p, rows * p)                                   # [3, H, W]
                patches.append(x.reshape(3, rows, p, cols, p).transpose(1, 3, 2, 4, 0).reshape(rows * cols, p * p * 3))
            longest = max(len(x) for x in patches)
            pixels = np.zeros((len(images), longest, p * p * 3), np.float32)            # [n, N, p²·3]
            mask = np.zeros((len(images), longest), np.int64)                            # [n, N]
            for i, x in enumerate(patches):
                pixels[i, :len(x)], mask[i, :len(x)] = x, 1
            out = self.model(pixel_values=torch.from_numpy(pixels).to(self.device),
                             pixel_attention_mask=torch.from_numpy(mask).to(self.device),
                             spatial_shapes=torch.tensor(grids, dtype=torch.long, device=self.device),
                             output_hidden_states=want)
            pooled, tokens, m = out.pooler_output, out.last_hidden_state, torch.from_numpy(mask.astype(bool))
            first = 0
        else:
            rows, cols = grids[0]
            pixels = torch.from_numpy(np.stack([self._normalise(im, cols * p, rows * p) for im in images]))
            pixels = pixels.to(self.device)                                              # [n, 3, H, W]
            native = self.pixel_budget is None or not budget
            if self.family == "vjepa2":
                video = pixels[:, None].repeat(1, int(self.model.config.tubelet_size), 1, 1, 1)  # [n, T, 3, H, W]
                out = self.model(pixel_values_videos=video, skip_predictor=True, output_hidden_states=want)
                pooled, tokens = out.last_hidden_state.mean(dim=1), out.last_hidden_state  # [n, D], [n, T, D]
            else:
                out = self.model(pixel_values=pixels, interpolate_pos_encoding=not native, output_hidden_states=want)
                hidden = out.last_hidden_state                                          # [n, T(+1), D]
                pooled, tokens = out.pooler_output, hidden[:, 1:] if self.family == "clip" else hidden
            m = torch.ones(tokens.shape[:2], dtype=torch.bool)
            first = 1 if self.family == "clip" else 0                                     # CLIP's class token
        tapped = []
        for i, (rows, cols) in enumerate(grids):
            maps = []
            for layer in taps:
                h = out.hidden_states[layer][i, first:first + rows * cols].float()      # [rows·cols, D]
                h = F.layer_norm(h, h.shape[-1:])                                        # per token, no weights
                maps.append(h.T.reshape(1, -1, rows, cols))                              # [1, D, rows, cols]
            tapped.append(maps)
        return pooled, tokens, m, tapped

    @torch.inference_mode()
    def _forward(self, images: Sequence[np.ndarray], budget: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Pooled ``[N, dim]``, tokens ``[N, T, token_dim]`` and token mask ``[N, T]`` (input order)."""
        pooled: list = [None] * len(images)
        tokens: list = [None] * len(images)
        for idx, _, p, t, m, _ in self._passes(images, budget=budget):
            for j, i in enumerate(idx):
                pooled[i] = p[j].float().cpu().numpy()
                tokens[i] = (t[j] * m[j].to(t.device)[:, None]).float().cpu().numpy()[:int(m[j].sum())]
        longest = max(len(t) for t in tokens)
        tok = np.zeros((len(images), longest, tokens[0].shape[1]), np.float32)          # [N, T, D] padding zeroed
        mask = np.zeros((len(images), longest), bool)                                    # [N, T]
        for i, t in enumerate(tokens):
            tok[i, :len(t)], mask[i, :len(t)] = t, True
        return np.stack(pooled).astype(np.float32), tok, mask

    # -- ImageEncoder --------------------------------------------------------------------------
    def encode_crops(self, crops: Sequence[np.ndarray]) -> np.ndarray:
        check_images(crops, "crop")
        if not crops:
            return np.zeros((0, self.dim), np.float32)
        return self._forward(list(crops), budget=False)[0]

    def encode_frames(self, frames: Sequence[np.ndarray]) -> FrameEncoding:
        check_images(frames, "frame")
        if not frames:
            return FrameEncoding(np.zeros((0, self.dim), np.float32), np.zeros((0, 1, self.token_dim), np.float32),
                                 np.zeros((0, 1), bool))
        pooled, tokens, mask = self._forward(list(frames))
        return FrameEncoding(global_features=l2_normalize(pooled), tokens=tokens, token_mask=mask)

    @torch.inference_mode()
    def encode_rois(self, frames: Sequence[np.ndarray], boxes: Sequence[np.ndarray]) -> np.ndarray:
        """``[Σ n_i, roi_dim]``: each box's ROI-aligned tapped layers, ``[C, s, s]`` flattened
        channel-major (module docstring)."""
        from torchvision.ops import roi_align

        check_images(frames, "frame")
        boxes = check_boxes(frames, boxes)
        offsets = np.concatenate([[0], np.cumsum([len(b) for b in boxes])]).astype(int)
        out = np.zeros((int(offsets[-1]), self.roi_dim), np.float32)                     # [N, C·s²]
        for idx, grids, _, _, _, tapped in self._passes(list(frames), self.roi_layers):
            for j, i in enumerate(idx):
                if not len(boxes[i]):
                    continue
                (rows, cols), (fh, fw) = grids[j], frames[i].shape[:2]
                scale = torch.tensor([cols / fw, rows / fh, cols / fw, rows / fh])           # pixels -> grid units
                rois = (torch.from_numpy(boxes[i]) * scale).to(self.device)                  # [n_i, 4]
                bins = torch.cat([roi_align(fmap, [rois], output_size=self.roi_bins, spatial_scale=1.0,
                                            sampling_ratio=2, aligned=True) for fmap in tapped[j]], dim=1)  # [n_i, taps·D, s, s]
                if self.roi_projector is not None:
                    bins = torch.einsum("cd,ndhw->nchw", self.roi_projector, bins)              # [n_i, C, s, s]
                out[offsets[i]:offsets[i + 1]] = bins.flatten(1).float().cpu().numpy()
        return out


def _load_projector(path: str, in_dim: int) -> tuple[torch.Tensor, str]:
    """A frozen per-bin channel map ``[out, in_dim]`` from a ``.npy`` file or a ``.pt`` file (a tensor,
    or a dict with ``"weight"``), and the note naming it (a digest of the file)."""
    if not os.path.isfile(path):
        raise EncoderConfigError(f"ROI channel projector file not found: {path}")
    if path.endswith(".npy"):
        weight = torch.from_numpy(np.load(path).astype(np.float32))
    else:
        data = torch.load(path, map_location="cpu", weights_only=True)
        weight = data["weight"] if isinstance(data, dict) else data
        weight = torch.as_tensor(weight, dtype=torch.float32)
    if weight.ndim != 2 or weight.shape[1] != in_dim:
        raise ValueError(f"ROI channel projector {path}: expected a [out, {in_dim}] matrix (taps × width inputs), "
                         f"got {list(weight.shape)}")
    with open(path, "rb") as fh:
        digest = hashlib.sha256(fh.read()).hexdigest()[:12]
    return weight, f"file{digest}"
