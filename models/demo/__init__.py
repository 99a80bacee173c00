"""Harnesses that score models against the rendered world's truth (``models.world``): ``coverage``
(tracker coverage of the truth), ``benchmark`` (the demo benchmark built from rendered scenes) and
``describe_eval`` (describer facts scored against the truth). They may import both the world and
the models; no model imports them."""
