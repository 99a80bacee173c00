"""Contract path of the ranking metrics and the paired bootstrap (DESIGN §5), with the hierarchical
bootstrap over seeds, then queries (DESIGN §4.5); they live in :mod:`models.training.metrics`."""
from models.training.metrics import evaluate_rankings, hierarchical_bootstrap, paired_bootstrap

__all__ = ["evaluate_rankings", "hierarchical_bootstrap", "paired_bootstrap"]
