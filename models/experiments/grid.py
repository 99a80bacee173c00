"""An experiment grid (DESIGN 4.5): a model kind, a base training config, named variants, a reference
variant and seeds, expanded into one complete training config per (variant, seed) cell.

A variant is a set of overrides merged into the base config key by key (:func:`merge`: nested dicts
are merged, anything else replaced), so ``{"model": {"use_slow": false}}`` changes one setting of
the model's config and keeps the rest. Each cell's config is the merge with ``"seed"`` set to the
cell's seed. A variant's ``"pipeline"`` key is merged into the grid's retrieval pipeline
(``models.retrievers.pipeline.RetrievalPipeline``) instead: variants that differ only there
compare inference on the same trained weights. A preset (:data:`PRESETS`) names a model kind, its variants and its reference; a
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
from models.experiments.relative import OF_BASE, resolve_relative
from models.retrievers.comparators import POINTWISE_DERIVED

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
    pipeline: dict = field(default_factory=dict)
    fusion_variants: tuple[str, ...] = ()        # variants that fuse with the request's fuse_runs (CombSUM)
    pairwise_comparison: bool = False            # pairwise against pointwise: a comparator of pointwise scores is refused


# The VTrajEmbed paper's Table 3 (seed 002, §4.4): the full model and five ablations.
TABLE3 = Preset(
    name="vtrajembed-table3", model_kind="vtrajembed", reference="full",
    description="VTrajEmbed ablations (paper Table 3): full model, without the Slow branch, without the Fast "
                "branch, half the Fast observations (32 → 16 at the paper's base), without L_bi, without L_group",
    variants={
        "full": {},
        "without_slow": {"model": {"use_slow": False}},
        "without_fast": {"model": {"use_fast": False}},
        "obs16": {"model": {"features": {"n_fast_max": {OF_BASE: 0.5}}}},   # half the base's: 32 → 16
        "without_lbi": {"model": {"lambda_bi": 0.0}},
        "without_lgroup": {"model": {"lambda_g": 0.0}},
    })

# SCOUT's main knob (seed 000, §5): the per-forward batch B, without gathered negatives.
SCOUT_BATCH = Preset(
    name="scout-batch-sweep", model_kind="scout", reference="b128",
    description="SCOUT's per-forward batch size B (in-batch negatives only): 32, 64 and 128 (the default)",
    base={"gather_negatives": False},
    # B through SCOUT's recipe (ScoutConfig.batch_size): TrainConfig.batch_size = 32 is the trainer's
    # default, which the model's recipe (128) replaces (models.training.trainer.resolve_config)
    variants={b: {"model": {"predictor": {"batch_size": int(b[1:])}}} for b in ("b32", "b64", "b128")})

DUAL_VIEW = {"retrievers": ["dense", "rewrite"], "fusion": "dual_view", "top_k": 100, "shortlist": 10}
# ActPair (seed 003, Table 3): the original query, its rewrite, and both views fused (Eq. 7); one
# trained model per seed, three ways of querying it.
ACTPAIR_VIEWS = Preset(
    name="actpair-views", model_kind="actpair", reference="original",
    description="ActPair's query views on the same weights: original query, rewritten query, dual-view fusion "
                "(top-100 per view, union, mean of both scores)",
    variants={"original": {}, "rewritten": {"pipeline": {"retrievers": ["rewrite"]}},
              "dual_view": {"pipeline": DUAL_VIEW}})
# ActPair (seed 003, Table 5): the dual-view top-10 without reranking, reranked pointwise (one absolute
# score per candidate) and pairwise (pivot-promote, Algorithm 1), both from the same model: on a CPU
# the trained Bradley–Terry pairwise head over the frozen embeddings and its pointwise twin, trained
# together after the dual encoder (models.retrievers.actpair.pairwise_head); with a chat VLM
# ({"comparator": {"kind": "vlm", "backend": ...}}) the paper's comparison and a one-call 0-100
# score. The reference is the pointwise arm: the table's pairwise row is the paper's
# "Pairwise - Pointwise" with its interval. Requests per query are reported for each.
ACTPAIR_RERANK = Preset(
    name="actpair-rerank", model_kind="actpair", reference="pointwise",
    description="ActPair's second stage over the dual-view top-10 (paper Table 5): none, pointwise (one absolute "
                "score per candidate) and pairwise comparisons with pivot-promote (Algorithm 1), from the same "
                "model (a trained Bradley-Terry pairwise head over frozen features and its pointwise twin, or a "
                "chat VLM); requests per query reported",
    base={"model": {"pairwise": {"enabled": True}}},
    pipeline={**DUAL_VIEW, "comparator": {"kind": "pairwise-head"}}, pairwise_comparison=True,
    variants={"dual_view": {}, "pointwise": {"pipeline": {"reranker": "pointwise", "weights": {
                  "first_stage": 0.0, "vlm": 0.0, "itm": 0.0, "absolute": 1.0}}},
              "pairwise": {"pipeline": {"reranker": "pairwise"}}})

# SCOUT's second stage (seed 000, §6.2, §7.1-7.2): CombSUM of the SCOUT model with the runs the
# request names in ``fuse_runs`` (the other fusion members), then the top-20 reranked by the VLM
# term, by ScoutITM, and by the blend of both with the fused score (the weights of
# models.retrievers.rerank.BlendConfig, 0.2 / 0.6 / 0.2; a term left out keeps the others' ratio).
# Without fuse_runs there is nothing to fuse: the "combsum" and "rrf" variants are left out and the
# rerankers sit on the SCOUT model alone (the table's "pipelines" says what each variant ran). "rrf"
# is the rank-only control for CombSUM (§7.1, §7.3: reciprocal rank fusion, k = 60).
COMBSUM = {"fusion": "combsum"}
SCOUT_RERANK = Preset(
    name="scout-rerank", model_kind="scout", reference="first_stage",
    description="SCOUT's fusion and reranking on one training: the model alone, CombSUM with the fuse_runs "
                "members (and RRF, k = 60, as the rank-only control), + VLM term, + ScoutITM (trained on "
                "identity-hard and mined negatives), the full blend (0.2 / 0.6 / 0.2) over the top-20",
    base={"model": {"itm": {"enabled": True}}}, pipeline={"shortlist": 20}, fusion_variants=(
        "combsum", "rrf", "vlm", "itm", "full_blend"),
    variants={"first_stage": {},
              "combsum": {"pipeline": COMBSUM},
              "rrf": {"pipeline": {"fusion": "rrf", "rrf_k": 60}},
              "vlm": {"pipeline": {**COMBSUM, "reranker": "pointwise",
                                   "weights": {"first_stage": 0.25, "vlm": 0.75, "itm": 0.0}}},
              "itm": {"pipeline": {**COMBSUM, "reranker": "pointwise",
                                   "weights": {"first_stage": 0.5, "vlm": 0.0, "itm": 0.5}}},
              "full_blend": {"pipeline": {**COMBSUM, "reranker": "pointwise",
                                          "weights": {"first_stage": 0.2, "vlm": 0.6, "itm": 0.2}}}})


# Frozen crop encoders under the same trainable heads: the ImageNet MobileNetV2, the same network at
# random initialisation (the reference: what the heads learn without pretrained features) and the
# handcrafted descriptor (models.backends.encoders). VTrajEmbed reads them in its Fast and Slow
# branches, SCOUT and ActPair in their observation tokens; the text tower is the packaged MiniLM.
ENCODER_KINDS = {"imagenet": "mobilenetv2-imagenet", "random_init": "random-init", "handcrafted": "handcrafted"}


def encoder_overrides(model_kind: str, encoder: str) -> dict:
    """The training-config overrides that give every frozen image encoder of ``model_kind`` the kind
    ``encoder`` (a ``models.backends.encoders.IMAGE_KINDS`` name). VTrajEmbed adds MLP_geo(g_t) to
    a_t before a LayerNorm, so its Fast branch reads MobileNetV2's activations as they are: unit
    rows (entries near 1/36) left the appearance under the geometry (T2Traj R@1 23.7 against 79.8,
    Fast branch alone, 100 steps on the demo benchmark)."""
    roles = ("fast", "slow") if model_kind == "vtrajembed" else ("appearance",)
    out = {role: {"kind": encoder} for role in roles}
    if model_kind == "vtrajembed" and encoder in ("mobilenetv2-imagenet", "random-init"):
        out["fast"]["mobilenetv2"] = {"unit": False}
    return {"model": out}


def _encoders_preset(model_kind: str) -> Preset:
    return Preset(
        name=f"{model_kind}-encoders", model_kind=model_kind, reference="random_init",
        description=f"{model_kind}'s frozen image encoders under the same trained heads: ImageNet MobileNetV2, "
                    "the same network at random initialisation (reference), the handcrafted descriptor",
        variants={name: encoder_overrides(model_kind, kind) for name, kind in ENCODER_KINDS.items()})


ENCODER_PRESETS = tuple(_encoders_preset(kind) for kind in ("vtrajembed", "scout", "actpair"))
PRESETS: dict[str, Preset] = {p.name: p for p in (TABLE3, SCOUT_BATCH, SCOUT_RERANK, ACTPAIR_VIEWS, ACTPAIR_RERANK,
                                                  *ENCODER_PRESETS)}


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
    pipeline: dict = field(default_factory=dict)  # the retrieval pipeline every cell is evaluated with ({}: dense)
    variants: dict = field(default_factory=dict)  # name -> overrides merged into base (stored: [name, overrides] pairs)
    reference: str = ""                          # the variant the others are compared with
    seeds: tuple[int, ...] = (0, 1, 2)           # one training per variant and seed
    n_resamples: int = 10000                     # paired bootstrap resamples
    confidence: float = 0.95                     # paired bootstrap interval

    def __post_init__(self) -> None:
        self.seeds = tuple(self.seeds)
        if isinstance(self.variants, list | tuple) and all(isinstance(v, list | tuple) and len(v) == 2
                                                           for v in self.variants):
            self.variants = {name: overrides for name, overrides in self.variants}    # the stored form
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
                elif not isinstance(overrides.get("pipeline", {}), dict):
                    problems.append(f"variant {name!r}: pipeline must be an object")
            if self.reference not in self.variants:
                problems.append(f"reference {self.reference!r} is not one of the variants "
                                f"({', '.join(map(str, self.variants))})")
        if not isinstance(self.pipeline, dict):
            problems.append("pipeline must be an object (models.retrievers.pipeline.RetrievalPipeline)")
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
        if isinstance(self.confidence, bool) or not isinstance(self.confidence, int | float) \
                or not 0.5 <= self.confidence < 1.0:
            problems.append("confidence must be a number in [0.5, 1)")
        if problems:
            raise ValueError("experiment: " + "; ".join(problems))

    def stored(self) -> dict:
        """:meth:`as_dict` with the variants as ``[name, overrides]`` pairs, so their order survives
        a store that sorts object keys (PostgreSQL's jsonb); :meth:`from_dict` reads both forms."""
        return self.as_dict() | {"variants": [[name, overrides] for name, overrides in self.variants.items()]}

    def cells(self) -> list[tuple[str, int, dict, dict]]:
        """``(variant, seed, training config, pipeline)`` of every cell, variants in declared order,
        then seeds. A variant's ``"pipeline"`` key is merged into the base pipeline; the rest of
        its overrides into the base training config, where values relative to the base
        (``models.experiments.relative``) become numbers."""
        out = []
        for name, overrides in self.variants.items():
            training = {k: v for k, v in overrides.items() if k != "pipeline"}
            pipeline = merge(self.pipeline, overrides.get("pipeline") or {})
            config = resolve_relative(merge(self.base, training), self.base, self.model_kind)
            out += [(name, seed, merge(config, {"seed": seed}), pipeline) for seed in self.seeds]
        return out


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
        spec = ExperimentSpec.from_dict(data)
        refuse_pointwise_comparators(spec, only_against_pointwise=True)
        return spec
    preset = PRESETS.get(preset_name)
    if preset is None:
        raise ValueError(f"experiment: unknown preset {preset_name!r}; known: {', '.join(sorted(PRESETS))}")
    if data.get("model_kind", preset.model_kind) != preset.model_kind:
        raise ValueError(f"experiment: preset {preset.name} is for {preset.model_kind}, not {data['model_kind']!r}")
    if not isinstance(data.get("base") or {}, Mapping):
        raise ValueError("experiment: base must be an object of training-config keys")
    if not isinstance(data.get("pipeline") or {}, Mapping):
        raise ValueError("experiment: pipeline must be an object")
    fuse_runs = data.pop("fuse_runs", None)
    if fuse_runs is not None and (not isinstance(fuse_runs, list) or not preset.fusion_variants):
        raise ValueError("experiment: fuse_runs must be a list of training run ids, for a preset that fuses "
                         f"({', '.join(p.name for p in PRESETS.values() if p.fusion_variants)})")
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
    chosen = _with_fusion(preset, chosen, fuse_runs or [])
    spec = ExperimentSpec.from_dict({"model_kind": preset.model_kind, "reference": preset.reference,
                                     **data, "base": merge(preset.base, data.get("base") or {}),
                                     "pipeline": merge(preset.pipeline, data.get("pipeline") or {}),
                                     "variants": chosen})
    if preset.pairwise_comparison:
        refuse_pointwise_comparators(spec)
    return spec


def refuse_pointwise_comparators(spec: ExperimentSpec, *, only_against_pointwise: bool = False) -> None:
    """A pairwise-against-pointwise grid (ActPair Table 5) refuses a pairwise variant whose
    comparator decides a pair by comparing two per-candidate scores
    (``models.retrievers.comparators.POINTWISE_DERIVED``): pivot-promote over it promotes the
    pointwise argmax to the top, so the comparison would measure nothing at R@1 (DESIGN 4.5).
    ``only_against_pointwise``: refuse only when the grid also has a pointwise variant (a grid
    declared without a preset)."""
    cells = spec.cells()
    if only_against_pointwise and not any(p.get("reranker") == "pointwise" for *_, p in cells):
        return
    for name, _, _, pipeline in cells:
        kind = (pipeline.get("comparator") or {}).get("kind", "scorer")
        if pipeline.get("reranker") == "pairwise" and kind in POINTWISE_DERIVED:
            raise ValueError(f"experiment: variant {name!r} compares pairs with the {kind!r} comparator, which "
                             "decides a pair by comparing two pointwise scores: pivot-promote over it puts the "
                             "pointwise ranking's first candidate first, so pairwise - pointwise R@1 would be 0 by "
                             "construction. Use a comparator "
                             "that sees both candidates at once: 'pairwise-head' (the trained pairwise head) or 'vlm'")


def _with_fusion(preset: Preset, variants: dict, fuse_runs: list) -> dict:
    """A fusing preset's variants for the request's ``fuse_runs``: the fusion variants fuse with
    them; without any, the pure-fusion variant is left out and the others rank the model alone."""
    out = {}
    for name, overrides in variants.items():
        if name not in preset.fusion_variants or name not in preset.variants:
            out[name] = overrides
            continue
        pipeline = dict(overrides.get("pipeline") or {})
        if fuse_runs:
            out[name] = {**overrides, "pipeline": {**pipeline, "fuse_runs": list(fuse_runs)}}
        elif pipeline.get("reranker", "none") != "none":
            out[name] = {**overrides, "pipeline": {k: v for k, v in pipeline.items() if k != "fusion"}}
    return out
