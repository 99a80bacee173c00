"""Experiments as data (DESIGN 4.5): a declared grid of training runs and the table of its results.

- :mod:`models.experiments.grid`: :class:`ExperimentSpec` (model kind, base config, variants,
  reference, seeds), the named presets (the VTrajEmbed paper's Table 3 ablations) and the cells
  (one complete training config per variant and seed).
- :mod:`models.experiments.table`: per task, metric and pool-size stratum, each variant's mean and
  spread over seeds, its difference from the reference and a paired bootstrap interval over
  queries; written as JSON and CSV.
"""
