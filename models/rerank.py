"""Contract path of the rerankers (DESIGN §5); they live in :mod:`models.retrievers.rerank`."""
from models.retrievers.rerank import combsum, pivot_promote

__all__ = ["combsum", "pivot_promote"]
