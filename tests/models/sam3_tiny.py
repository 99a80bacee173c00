"""A small random-weight SAM 3 video model, built and loaded by the ``sam3`` package's own builder.

``build_sam3_video_model`` has no size options: every width and depth is fixed in its factory
functions. Inside ``tiny_sam3_architecture()`` some of them build smaller parts: the ViT trunk
(2 blocks of width 64 instead of 32 of width 1024), the text encoder (2 layers of width 64 instead
of 24 of width 1024), the detector's decoder (2 layers of 6), and one layer each of the image-text
fusion encoder (of 6) and of the tracker's memory attention (of 4). Everything else, the builder's
assembly, the 1008-pixel input, the layers' widths, the segmentation head, the SAM 2-style tracker
and the checkpoint loading (``torch.load`` + strict ``load_state_dict``), is the package's code at
its real size, so a forward pass takes seconds on a CPU instead of minutes. The backend under test is constructed
inside the same context, so its loader builds the same architecture.

``build_tiny_sam3(folder, detects=True)`` writes ``sam3_tiny.pt`` (``{"model": state_dict}``).
Random weights give arbitrary masks and scores near 0.5, under SAM 3's thresholds; the score
heads are therefore set so that the result is known: with ``detects=True`` every query scores
~1 (the text-query similarity is a constant 12, the clamp, and the presence logit +10), so SAM 3
keeps detections after its NMS; with ``detects=False`` the presence logit is -10 and nothing is
ever found (``blind_copy(checkpoint, folder)`` makes that model from a built one without building
again). Masks and boxes stay those of the random weights.

Parameters that the package creates with ``torch.empty`` and never initialises (the text
encoder's positional embedding and projection, the encoder's level embedding: a real checkpoint
always sets them) are drawn from N(0, 0.02²), else memory garbage makes the features NaN.

Other tests import it: ``from tests.models.sam3_tiny import build_tiny_sam3, tiny_sam3_architecture``.
"""
from __future__ import annotations

import contextlib
from pathlib import Path
from unittest import mock

import torch

from models.backends.tracking.sam3_tracker import CudaToCpu, _resolve_bpe

TINY_VIT_WIDTH = 64     # SAM 3: 1024
TINY_VIT_DEPTH = 2      # SAM 3: 32
TINY_TEXT_WIDTH = 64    # SAM 3: 1024
TINY_TEXT_LAYERS = 2    # SAM 3: 24
TINY_DECODER_LAYERS = 2  # SAM 3: 6
PRESENCE_BIAS = "detector.transformer.decoder.presence_token_head.layers.2.bias"
TINY_QUERIES = 8        # SAM 3: 200 (every query of the tiny model scores high; see below)
TINY_FUSION_LAYERS = 1  # SAM 3: 6
TINY_MEMORY_LAYERS = 1  # SAM 3: 4


def _tiny_vit(compile_mode=None):
    from sam3.model.vitdet import ViT

    return ViT(img_size=1008, pretrain_img_size=336, patch_size=14, embed_dim=TINY_VIT_WIDTH, depth=TINY_VIT_DEPTH,
               num_heads=2, mlp_ratio=4.625, norm_layer="LayerNorm", drop_path_rate=0.0, qkv_bias=True,
               use_abs_pos=True, tile_abs_pos=True, global_att_blocks=(TINY_VIT_DEPTH - 1,), rel_pos_blocks=(),
               use_rope=True, use_interp_rope=True, window_size=24, pretrain_use_cls_token=True,
               retain_cls_token=False, ln_pre=True, ln_post=False, return_interm_layers=False,
               bias_patch_embed=False, compile_mode=compile_mode)


def _tiny_decoder():
    from sam3.model.decoder import TransformerDecoder, TransformerDecoderLayer
    from sam3.model.model_misc import MultiheadAttentionWrapper as MultiheadAttention

    layer = TransformerDecoderLayer(activation="relu", d_model=256, dim_feedforward=256, dropout=0.1,
                                    cross_attention=MultiheadAttention(num_heads=8, dropout=0.1, embed_dim=256),
                                    n_heads=8, use_text_cross_attention=True)
    return TransformerDecoder(layer=layer, num_layers=TINY_DECODER_LAYERS, num_queries=TINY_QUERIES,
                              return_intermediate=True, box_refine=True, num_o2m_queries=0, dac=True,
                              boxRPB="log", d_model=256, frozen=False, interaction_layer=None,
                              dac_use_selfatt_ln=True, resolution=1008, stride=14, use_act_checkpoint=True,
                              presence_token=True)


def _tiny_text_encoder(bpe_path: str):
    from sam3.model.text_encoder_ve import VETextEncoder
    from sam3.model.tokenizer_ve import SimpleTokenizer

    return VETextEncoder(tokenizer=SimpleTokenizer(bpe_path=bpe_path), d_model=256, width=TINY_TEXT_WIDTH,
                         heads=2, layers=TINY_TEXT_LAYERS)


def _with_layers(create, layers: int):
    """``create`` (a builder factory of an encoder, or of a wrapper holding one as ``.encoder``) with
    only the first ``layers`` of its stack: the layers are the package's, only fewer of them."""
    def build(*args, **kwargs):
        made = create(*args, **kwargs)
        stack = getattr(made, "encoder", None) or made
        stack.layers = stack.layers[:layers]
        stack.num_layers = layers
        if isinstance(getattr(stack, "remove_cross_attention_layers", None), list):
            stack.remove_cross_attention_layers = stack.remove_cross_attention_layers[:layers]
        return made

    return build


@contextlib.contextmanager
def tiny_sam3_architecture():
    """While active, ``sam3.model_builder`` builds the small ViT trunk and text encoder, and one layer
    of the image-text fusion encoder (6) and of the tracker's memory attention (4), each attending
    over all 72 x 72 image tokens."""
    import sam3.model_builder as builder

    with mock.patch.object(builder, "_create_vit_backbone", _tiny_vit), \
            mock.patch.object(builder, "_create_text_encoder", _tiny_text_encoder), \
            mock.patch.object(builder, "_create_transformer_decoder", _tiny_decoder), \
            mock.patch.object(builder, "_create_transformer_encoder",
                              _with_layers(builder._create_transformer_encoder, TINY_FUSION_LAYERS)), \
            mock.patch.object(builder, "_create_tracker_transformer",
                              _with_layers(builder._create_tracker_transformer, TINY_MEMORY_LAYERS)):
        yield


def build_tiny_sam3(folder, *, seed: int = 0, detects: bool = True) -> Path:
    """Write a small random-weight SAM 3 checkpoint into ``folder``; returns its path."""
    from sam3.model_builder import build_sam3_video_model

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    generator_state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        with tiny_sam3_architecture(), CudaToCpu():
            model = build_sam3_video_model(checkpoint_path=None, load_from_HF=False,
                                           bpe_path=str(_resolve_bpe("")), device="cpu")
    finally:
        torch.random.set_rng_state(generator_state)
    with torch.no_grad():
        # Parameters the package leaves uninitialised (torch.empty: a checkpoint always fills
        # them); memory garbage there turns the text features into NaN.
        for name, param in model.named_parameters():
            if name.endswith(("language_backbone.encoder.positional_embedding", "text_projection",
                              "level_embed")):
                param.normal_(std=0.02)
        scoring = model.detector.dot_prod_scoring
        for proj in (scoring.hs_proj, scoring.prompt_proj):
            proj.weight.zero_()
            proj.bias.fill_(1.0)
        presence = model.detector.transformer.decoder.presence_token_head.layers[-1]
        presence.weight.zero_()
        presence.bias.fill_(10.0 if detects else -10.0)
        # the tracker sees its object on every frame (object-score logit +10), so a tracked
        # masklet keeps a mask and SAM 3 can match it to the next frame's detection
        object_score = model.tracker.sam_mask_decoder.pred_obj_score_head.layers[-1]
        object_score.weight.zero_()
        object_score.bias.fill_(10.0)
    path = folder / ("sam3_tiny.pt" if detects else "sam3_tiny_blind.pt")
    torch.save({"model": model.state_dict()}, path)
    return path


def blind_copy(checkpoint, folder) -> Path:
    """A copy of a tiny checkpoint whose presence logit is -10: a model that never finds anything."""
    state = torch.load(checkpoint, map_location="cpu", weights_only=True)
    state["model"][PRESENCE_BIAS] = torch.full_like(state["model"][PRESENCE_BIAS], -10.0)
    path = Path(folder) / "sam3_tiny_blind.pt"
    torch.save(state, path)
    return path
