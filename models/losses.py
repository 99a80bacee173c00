"""Contract path of the training losses (DESIGN §5); they live in :mod:`models.training.losses`."""
from models.training.losses import info_nce, mask_guided_loss, siglip_loss

__all__ = ["info_nce", "mask_guided_loss", "siglip_loss"]
