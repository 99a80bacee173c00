"""Benchmark construction: describer runs and verified descriptions, query-writer runs and queries,
within-video relation rows, cross-video mining and pair routing, pseudo-label rules, and sealed
relation snapshots; ``backends`` adapts the model backends (describer, writer) to these runs."""
