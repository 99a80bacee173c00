"""ActPair: ``model`` (dual encoder and action loss), ``vocabulary`` (canonical tags), ``rewrite``
(query rewrite), ``pipeline`` (dual-view retrieval and pairwise reranking) and ``retriever`` (the
trainer's interface)."""
