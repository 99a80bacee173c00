"""SCOUT: ``model`` (the predictor into a frozen text space), ``itm`` (the ScoutITM cross-encoder),
``sampler`` (class-balanced batches), ``data`` (observation tokens of a snapshot), ``retriever`` (the
trainer's interface) and ``alignment`` (training-free encoder selection, Sec. 5.2)."""
