"""Trainable retrievers, one package per paper (``vtrajembed``, ``scout``, ``actpair``), each split
into its model, data helpers and inference pipeline; ``registry.RETRIEVERS`` names every kind with
its config class and builder. ``features`` (frozen track/text features) and ``rerank`` (pivot-promote,
CombSUM, blends) sit here because more than one retriever and the search pipeline use them.
"""
