"""An experiment grid (DESIGN 4.5): a model kind, a base training config, named variants, a reference
variant and seeds, expanded into one complete training config per (variant, seed) cell.

A variant is a set of overrides merged into the base config key by key (:func:`merge`: nested dicts
are merged, anything else replaced), so ``{"model": {"use_slow": false}}`` changes one setting of
the model's config and keeps the rest. Each cell's config is the merge with ``"seed"`` set to the
cell's seed. A preset (:data:`PRESETS`) names a model kind, its variants and its reference; a
request may run a subset of a preset's variants (an unknown name is refused) and may add its own.

The grid is checked here for its own shape (names, seeds, sizes); each cell's config is checked by
the training-run validation of the service that queues it, so a key that does not exist is refused
before anything is queued.
"""
from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from models.config import PlainConfig

MAX_CELLS = 512                                  # training runs one experiment may queue
MAX_SEEDS = 64
NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,47}$")


@dataclass(frozen=True)
class Preset:
    """A named grid: the model kind, its variants (name → overrides) and the reference variant."""

    name: str
    model_kind: str
    variants: dict
    reference: str
    description: str
    base: dict = field(default_factory=dict)


# The VTrajEmbed paper's Table 3 (seed 002, §4.4): the full model and five ablations.
TABLE3 = Preset(
    name="vtrajembed-table3", model_kind="vtrajembed", reference="full",
    description="VTrajEmbed ablations (paper Table 3): full model, without the Slow branch, without the Fast "
                "branch, 16 Fast observations instead of 32, without L_bi, without L_group",
    variants={
        "full": {},
        "without_slow": {"model": {"use_slow": False}},
        "without_fast": {"model": {"use_fast": False}},
        "obs16": {"model": {"features": {"n_fast_max": 16}}},
        "without_lbi": {"model": {"lambda_bi": 0.0}},
        "without_lgroup": {"model": {"lambda_g": 0.0}},
    })

PRESETS: dict[str, Preset] = {p.name: p for p in (TABLE3,)}


def merge(base: Mapping, overrides: Mapping) -> dict:
    """``base`` with ``overrides`` applied key by key: where both hold a dict the two are merged
    (recursively), otherwise the override replaces the value. Neither input is changed."""
    out = copy.deepcopy(dict(base))
    for key, value in overrides.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


@dataclass
class ExperimentSpec(PlainConfig):
    """A declared grid (module docstring)."""

    model_kind: str = ""                         # a registered retriever kind (a preset gives its own)
    base: dict = field(default_factory=dict)     # TrainConfig keys shared by every cell (model config under "model")
    variants: dict = field(default_factory=dict)  # name -> overrides merged into base
    reference: str = ""                          # the variant the others are compared with
    seeds: tuple[int, ...] = (0, 1, 2)           # one training per variant and seed
    n_resamples: int = 10000                     # paired bootstrap resamples
    confidence: float = 0.95                     # paired bootstrap interval

    def __post_init__(self) -> None:
        self.seeds = tuple(self.seeds)
        problems = []
        if not self.model_kind:
            problems.append("model_kind is required")
        if not isinstance(self.base, dict):
            problems.append("base must be an object of training-config keys")
        if not isinstance(self.variants, dict) or not self.variants:
            problems.append("variants must be a non-empty object: name -> overrides")
        else:
            for name, overrides in self.variants.items():
                if not isinstance(name, str) or not NAME.match(name):
                    problems.append(f"variant name {name!r} must be 1-48 characters of a-z, 0-9, _ . - "
                                    "(starting with a letter or digit)")
                if not isinstance(overrides, dict):
                    problems.append(f"variant {name!r}: overrides must be an object")
                elif "seed" in overrides:
                    problems.append(f"variant {name!r}: the seed is set per cell by seeds, not by a variant")
            if self.reference not in self.variants:
                problems.append(f"reference {self.reference!r} is not one of the variants "
                                f"({', '.join(map(str, self.variants))})")
        if "seed" in (self.base if isinstance(self.base, dict) else {}):
            problems.append("base: the seed is set per cell by seeds")
        if not self.seeds or len(self.seeds) > MAX_SEEDS:
            problems.append(f"seeds must list 1..{MAX_SEEDS} seeds")
        elif any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in self.seeds):
            problems.append("seeds must be integers >= 0")
        elif len(set(self.seeds)) != len(self.seeds):
            problems.append("seeds must not repeat")
        if isinstance(self.variants, dict) and len(self.variants) * len(self.seeds) > MAX_CELLS:
            problems.append(f"{len(self.variants)} variants × {len(self.seeds)} seeds is more than {MAX_CELLS} runs")
        if isinstance(self.n_resamples, bool) or not isinstance(self.n_resamples, int) \
                or not 100 <= self.n_resamples <= 1_000_000:
            problems.append("n_resamples must be an integer in 100..1000000")
        if not 0.5 <= self.confidence < 1.0:
            problems.append("confidence must be in [0.5, 1)")
        if problems:
            raise ValueError("experiment: " + "; ".join(problems))

    def cells(self) -> list[tuple[str, int, dict]]:
        """``(variant, seed, config)`` of every training, variants in declared order, then seeds."""
        return [(name, seed, merge(merge(self.base, overrides), {"seed": seed}))
                for name, overrides in self.variants.items() for seed in self.seeds]


def spec_from_request(data: Mapping) -> ExperimentSpec:
    """The spec of an experiment request: ``{"preset"?, "model_kind"?, "base"?, "variants"?,
    "reference"?, "seeds"?, "n_resamples"?, "confidence"?}``.

    With a ``preset``, ``variants`` may be a list of the preset's variant names (a subset, the
    reference always included) or an object of extra or replacing variants merged over the
    preset's; without one, ``variants`` must be an object and ``model_kind`` and ``reference`` are
    required. Every problem is a ``ValueError`` that names it."""
    if not isinstance(data, Mapping):
        raise ValueError("experiment: the request must be an object")
    data = dict(data)
    preset_name = data.pop("preset", None)
    if preset_name in (None, ""):
        if isinstance(data.get("variants"), list):
            raise ValueError("experiment: a list of variant names needs a preset; without one, variants is an "
                             "object of name -> overrides")
        return ExperimentSpec.from_dict(data)
    preset = PRESETS.get(preset_name)
    if preset is None:
        raise ValueError(f"experiment: unknown preset {preset_name!r}; known: {', '.join(sorted(PRESETS))}")
    if data.get("model_kind", preset.model_kind) != preset.model_kind:
        raise ValueError(f"experiment: preset {preset.name} is for {preset.model_kind}, not {data['model_kind']!r}")
    if not isinstance(data.get("base") or {}, Mapping):
        raise ValueError("experiment: base must be an object of training-config keys")
    variants = data.pop("variants", None)
    if variants is None:
        chosen = dict(preset.variants)
    elif isinstance(variants, list):
        unknown = [v for v in variants if v not in preset.variants]
        if unknown:
            raise ValueError(f"experiment: unknown variant(s) {', '.join(map(repr, unknown))} of preset "
                             f"{preset.name}; known: {', '.join(preset.variants)}")
        names = [preset.reference, *[v for v in variants if v != preset.reference]]
        chosen = {name: preset.variants[name] for name in names}
    elif isinstance(variants, Mapping):
        chosen = {**preset.variants, **variants}
    else:
        raise ValueError("experiment: variants must be a list of preset variant names or an object")
    return ExperimentSpec.from_dict({"model_kind": preset.model_kind, "reference": preset.reference,
                                     **data, "base": merge(preset.base, data.get("base") or {}),
                                     "variants": chosen})
