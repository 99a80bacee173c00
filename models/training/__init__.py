"""Training and evaluating retrievers: ``trainer`` (the loop, checkpoints, evaluation), ``batching``
(groups and noisy variants), ``losses``, ``metrics``, ``distributed`` (gathering across ranks),
``index`` (the FAISS search index) and ``snapshot`` (the relation snapshot format they read)."""
