"""The rendered world: ``scene`` (specs and ground truth), ``figures`` and ``renderer`` (synthetic
videos of walking people) and ``palette`` (the numbers they draw with: clothing colours, paces,
foreshortening). The body layout and the backgrounds are ``figures``'.

The world keeps its parameters to itself: no model module imports it (the import-linter contracts
of ``pyproject.toml``); models see only its pixels, boxes and timestamps. The harnesses that score a
model against the world's truth are ``models.demo``.
"""
