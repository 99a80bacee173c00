"""Trajlab's model library: pure Python/PyTorch, importable without Django or a database.

Sections: ``retrievers`` (VTrajEmbed, SCOUT, ActPair and their registry), ``backends`` (tracking,
vlm, llm, encoders), ``training`` (trainer, batching, losses, metrics, distributed, index, snapshot
format), ``curation`` (majority rule, agreement, calibration, consolidation, mining), ``media``
(video, trajectory ops) and ``demo`` (renderer, demo benchmark). ``facts`` and ``vocabulary`` are
the contracts the sections share; ``losses``, ``metrics``, ``rerank`` and ``actpair`` keep the
DESIGN §5 contract paths.
"""
