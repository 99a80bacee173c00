"""Contract path of the ranking metrics and the paired bootstrap (DESIGN §5); they live in
:mod:`models.training.metrics`."""
from models.training.metrics import evaluate_rankings, paired_bootstrap

__all__ = ["evaluate_rankings", "paired_bootstrap"]
