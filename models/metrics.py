"""Contract path of the ranking metrics (DESIGN §5); they live in :mod:`models.training.metrics`."""
from models.training.metrics import evaluate_rankings

__all__ = ["evaluate_rankings"]
