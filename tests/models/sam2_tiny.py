"""A tiny random-weight SAM 2 model, built from the packaged SAM 2.1 Hiera-T config.

``build_tiny_sam2(folder)`` writes ``sam2_tiny.yaml`` (the Hiera-T config with every width, depth
and the input size shrunk) and ``sam2_tiny.pt`` (``{"model": state_dict}``, the format
``sam2.build_sam._load_checkpoint`` reads) and returns their paths. The architecture is the real
one (Hiera trunk, FPN neck, memory attention with RoPE, memory encoder, SAM heads), so loading
the checkpoint and tracking with it run SAM 2's own code; only the sizes are small enough for a
forward pass to take milliseconds on a CPU. The weights are random: masks are arbitrary.

Other tests import it: ``from tests.models.sam2_tiny import build_tiny_sam2``.
"""
from __future__ import annotations

from pathlib import Path

import torch

TINY_IMAGE_SIZE = 128   # model input side; SAM 2 uses 1024
TINY_D_MODEL = 32       # neck / memory-attention width (hidden_dim); SAM 2 uses 256
TINY_MEM_DIM = 16       # memory encoder output width; SAM 2 uses 64
TINY_NUM_MASKMEM = 3    # memory frames (1 conditioning + 2 recent); SAM 2 uses 7
TINY_MAX_OBJ_PTRS = 4   # object pointers attended to; SAM 2 uses 16


def packaged_config_path(name: str = "configs/sam2.1/sam2.1_hiera_t.yaml") -> Path:
    """The path of a config file shipped inside the installed ``sam2`` package."""
    import sam2

    return Path(sam2.__path__[0]) / name


def tiny_sam2_config():
    """The packaged Hiera-T config with its sizes shrunk (an OmegaConf ``DictConfig``)."""
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(packaged_config_path())
    m = cfg.model
    feat = TINY_IMAGE_SIZE // 16  # stride-16 feature map side

    trunk = m.image_encoder.trunk
    trunk.embed_dim = 8                      # channels 8, 16, 32, 64 over the four stages
    trunk.num_heads = 1
    trunk.stages = [1, 1, 2, 1]
    trunk.global_att_blocks = [3]            # not a stage's first block (those pool queries)
    trunk.window_pos_embed_bkg_spatial_size = [4, 4]
    trunk.window_spec = [8, 4, 4, 2]

    neck = m.image_encoder.neck
    neck.d_model = TINY_D_MODEL
    neck.backbone_channel_list = [64, 32, 16, 8]
    neck.position_encoding.num_pos_feats = TINY_D_MODEL

    att = m.memory_attention
    att.d_model = TINY_D_MODEL
    att.num_layers = 1
    att.layer.d_model = TINY_D_MODEL
    att.layer.dim_feedforward = 64
    att.layer.self_attention.embedding_dim = TINY_D_MODEL
    att.layer.self_attention.feat_sizes = [feat, feat]
    att.layer.cross_attention.embedding_dim = TINY_D_MODEL
    att.layer.cross_attention.feat_sizes = [feat, feat]
    att.layer.cross_attention.kv_in_dim = TINY_MEM_DIM

    enc = m.memory_encoder
    enc.out_dim = TINY_MEM_DIM
    enc.in_dim = TINY_D_MODEL
    enc.position_encoding.num_pos_feats = TINY_MEM_DIM
    enc.mask_downsampler.embed_dim = TINY_D_MODEL
    enc.fuser.layer.dim = TINY_D_MODEL
    enc.fuser.num_layers = 1

    m.image_size = TINY_IMAGE_SIZE
    m.num_maskmem = TINY_NUM_MASKMEM
    m.max_obj_ptrs_in_encoder = TINY_MAX_OBJ_PTRS
    return cfg


def build_tiny_sam2(folder, *, seed: int = 0, object_score_bias: float = 2.0) -> tuple[Path, Path]:
    """Write a tiny SAM 2 config and a random-weight checkpoint into ``folder``.

    Returns ``(config_path, checkpoint_path)``. The same ``seed`` gives the same weights.
    ``object_score_bias`` is added to the bias of the object-presence head's last layer: SAM 2
    blanks the mask of every frame whose presence logit is <= 0, and with random weights that
    logit sits just below 0, so without the shift every mask would be empty. With 0.0 the model
    reports the object absent everywhere (useful to test the empty path).
    """
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    cfg = tiny_sam2_config()
    config_path = folder / "sam2_tiny.yaml"
    OmegaConf.save(cfg, config_path)

    resolved = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    generator_state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        model = instantiate(resolved.model, _recursive_=True)
        with torch.no_grad():
            model.sam_mask_decoder.pred_obj_score_head.layers[-1].bias += object_score_bias
    finally:
        torch.random.set_rng_state(generator_state)
    checkpoint_path = folder / "sam2_tiny.pt"
    torch.save({"model": model.state_dict()}, checkpoint_path)
    return config_path, checkpoint_path
