"""Contract path of ActPair's dual-view retrieval (DESIGN §5); ActPair lives in
:mod:`models.retrievers.actpair`."""
from models.retrievers.actpair.pipeline import dual_view_retrieve

__all__ = ["dual_view_retrieve"]
