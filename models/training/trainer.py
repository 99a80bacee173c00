"""Training and evaluating retrievers on relation snapshots, whatever the model (DESIGN 2.10, 4).

The retriever interface
=======================

A trainable retriever is a ``torch.nn.Module`` built from plain data by a builder registered in
:data:`MODEL_KINDS` (``builder(config: dict) -> module``) that also has:

``prepare(snapshot, records=None, *, cache_dir=None) -> data``
    Everything frozen the model needs for ``snapshot``: features of every stored trajectory
    (record ``(track_id, 0)``), of the extra ``records`` (``{(track_id, k): (frames [n] int32,
    boxes [n, 4] float32 xyxy pixels)}``, the noisy-GT variants of ``models.training.batching``, ``k >= 1``)
    and of every query. Called once per snapshot; cache on disk under ``cache_dir``.
``encode_queries(data, query_ids) -> Tensor [Q, d]`` and ``encode_tracks(data, records) -> Tensor [P, d]``
    Unit embeddings, rows in the order asked, on the model's device, differentiable.
``score(q, v) -> Tensor [Q, P]``
    Similarities; rankings use them as they are.
``training_loss(data, batch, ctx) -> dict``
    The loss of one :class:`models.training.batching.TrainBatch` (``batch.local_slices(ctx.rank,
    ctx.world_size)`` says which groups this process encodes; with ``ctx.gather`` the losses of
    ``models.training.losses`` gather the other ranks' embeddings). Must hold ``"loss"`` (a scalar tensor);
    any other tensor or float (loss parts, ``zero_neg_row_rate``, ...) is reported per step.
``config_dict() -> dict``
    The plain-data config the builder takes (stored in checkpoints).


Optional:

``optimizer_defaults(steps) -> dict``
    The model's own training recipe for a run of ``steps`` steps: values for any of
    :data:`MODEL_DEFAULTABLE` (e.g. SCOUT's AdamW learning rate, betas and warm-up). The rule: a
    :class:`TrainConfig` field left at its default value takes the model's value; a field set to
    any other value is the caller's choice and wins. (So asking for exactly a field's default
    value cannot override a model's recipe: change the recipe in the model's own config instead.)
    ``batching`` is merged key by key: keys the caller's ``batching`` dict holds win. The values
    taken from the model are reported in the result's ``model_defaults``.
``no_weight_decay() -> set[str]``
    Names of further parameters to keep out of weight decay (1-D and scalar parameters always are).
``after_training(data, snapshot, ctx) -> dict``
    A stage of the model's own over the trained model, run once the steps are done and before the
    final checkpoint and evaluation (SCOUT: ScoutITM trained on negatives mined by the trained first
    stage). It must be idempotent: a resumed run calls it again, so a model keeps in its state whether
    the stage ran. Its figures go in the result's ``after_training``.
``summarize(data) -> dict``
    Figures about prepared data (VTrajEmbed: the retained Slow frame counts), put in the result's
    ``data_summary`` for the training data and, after the evaluation, for the evaluated snapshot.

Frozen submodules (pretrained weights loaded from a path) must have ``requires_grad = False``:
checkpoints keep only trained parameters and buffers, and the builder reloads the rest.

The trainer
===========

:func:`train` builds the model, its groups and batches (``models.training.batching``), trains with AdamW
(matrices decayed; biases, norms, scalars such as ``ℓ``, ``α``, ``t'`` and ``b`` and other 1-D
parameters not) under a warm-up + cosine schedule, reports per-step loss parts and the realized
label counts through ``on_step`` (and ``steps.jsonl``), saves a checkpoint (trained weights,
optimizer, scheduler, every RNG, step, process count) atomically every ``checkpoint_every`` steps
and at the end, and **resumes** from the checkpoint in ``out_dir``: the batch of step ``s`` is a
pure function of the seed, so a resumed run does the same steps as an uninterrupted one (on CPU
with a fixed seed it ends with the same weights). A resume must use the same number of processes
(each has its own random stream). With ``epochs`` set, ``steps`` is :func:`epoch_steps` over the
plan's training queries, resolved once the plan is built (the result reports both). At the end it
evaluates on ``eval_snapshot`` (T2Traj, Traj2T, OCVR through ``models.training.metrics``, in
float32). ``precision="bf16"`` runs each step's forward pass and loss under
``torch.autocast(device.type, dtype=torch.bfloat16)`` (CUDA or CPU); parameters, gradients and
AdamW state stay float32 (bf16 has float32's range: no loss scaling).

The realized counts (positives, negatives, pseudo-labels apart, across videos; the rows
``L_group`` scores, the L_bi-only rows and the extra cross-video columns of
``models.training.batching``) and the zero-negative row and column rates are those of the labels
the mask-guided loss scored (``TrainBatch.loss_block``): the whole batch when negatives are
gathered, else each rank's own block, summed over ranks (the rates are pooled from the ranks'
rows and columns, not taken from rank 0). The rates replace the loss's own per-rank ones in the
record, and are reported only for models whose loss reports them. The summary also counts how the
snapshot's queries entered the plan (``n_groups`` with a within-video negative,
``n_bi_only_queries``, ``n_cross_video_queries``, ``excluded_queries``: ``TrainingPlan.counts``).
A checkpoint records the batching rules (``PLAN_VERSION``); a resume under other rules is refused.

Several processes: under ``torchrun`` (``WORLD_SIZE > 1``) each rank encodes its share of the
global batch of ``batch_size`` groups; parameter gradients are averaged over ranks after each
backward pass, and with ``gather_negatives`` the loss scores all ranks' embeddings together
(``models.training.distributed``: the result is the gradient of the single-process loss of the whole batch).
"""
from __future__ import annotations

import json
import math
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from models.config import PlainConfig
from models.retrievers.registry import RETRIEVERS, ModelKind
from models.training.batching import PLAN_VERSION, BatchingConfig, TrainingPlan
from models.training.evaluation import evaluate_rows
from models.training.snapshot import RelationSnapshotData

CHECKPOINT = "checkpoint.pt"
CHECKPOINT_FORMAT = "trajlab-train/v1"
# The model kinds the trainer builds: the one registry (models.retrievers.registry), under the name
# callers and tests use. An entry is a ModelKind, or a bare builder (a test's toy retriever).
MODEL_KINDS: dict[str, ModelKind | Callable[[dict], torch.nn.Module]] = RETRIEVERS
# TrainConfig fields that shape the sequence of updates: a resumed run must agree on them (and on
# the number of processes, checked apart).
RUN_IDENTITY = ("batch_size", "lr", "betas", "weight_decay", "warmup_steps", "min_lr_ratio", "grad_clip", "seed",
                "batching", "model", "gather_negatives", "precision")
# TrainConfig fields a model's optimizer_defaults() may supply (see the module docstring).
MODEL_DEFAULTABLE = ("lr", "betas", "weight_decay", "warmup_steps", "min_lr_ratio", "batching", "batch_size",
                     "gather_negatives")
MAX_STEPS = 10_000_000       # steps, warmup_steps and checkpoint_every: at most this many
MAX_BATCH_SIZE = 65_536      # groups per step
MAX_SEED = 2**32 - 1         # seeds are 32-bit (numpy's and every backend's RNG take them)
PRECISIONS = ("fp32", "bf16")  # TrainConfig.precision: float32, or bfloat16 autocast (no fp16: it needs loss scaling)


@dataclass
class TrainConfig(PlainConfig):
    """How to train (defaults: the paper's 4.1 where it gives them)."""

    DEFAULTS_VERSION = 1                         # bump when a default here changes (runs record it, models.training.defaults)

    steps: int = 1000                            # optimizer steps in all (a resumed run counts from its checkpoint)
    epochs: int | None = None                    # passes over the training queries instead of steps (epoch_steps); None: steps
    batch_size: int = 32                         # groups per step across all ranks (paper: effective batch 32)
    lr: float = 5e-5                             # peak learning rate (paper 4.1)
    betas: tuple[float, float] = (0.9, 0.999)    # AdamW betas
    weight_decay: float = 0.01                   # AdamW weight decay (matrices only)
    warmup_steps: int = 0                        # linear warm-up steps before the cosine decay
    min_lr_ratio: float = 0.0                    # the cosine ends at lr · min_lr_ratio
    grad_clip: float = 1.0                       # max global gradient norm (0: no clipping)
    seed: int = 0                                # seeds initialisation, batches, augmentation, dropout
    checkpoint_every: int = 100                  # steps between checkpoints (one is always saved at the end)
    eval_at_end: bool = True                     # evaluate on eval_snapshot when training ends
    device: str = "auto"                         # "auto" | "cpu" | "cuda[:N]"
    distributed: str = "auto"                    # "auto": torchrun's env vars when WORLD_SIZE > 1; "off"
    gather_negatives: bool = True                # with several ranks, score all ranks' embeddings together
    precision: str = "fp32"                      # "fp32" | "bf16": forward and loss under bfloat16 autocast
    cache_dir: str | None = None                 # frozen-feature cache; None: <out_dir>/feature_cache
    batching: dict = field(default_factory=dict, metadata={"config": BatchingConfig})  # BatchingConfig settings
    model: dict = field(default_factory=dict)    # the model kind's config

    def __post_init__(self) -> None:
        problems = []
        try:
            self.betas = tuple(float(b) for b in self.betas)
        except (TypeError, ValueError):
            self.betas = ()
        if len(self.betas) != 2 or not all(0.0 <= b < 1.0 for b in self.betas):
            problems.append("betas must be two numbers in [0, 1)")
        if min(self.steps, self.batch_size, self.checkpoint_every, 1 if self.epochs is None else self.epochs) < 1:
            problems.append("steps, epochs, batch_size and checkpoint_every must be >= 1")
        if max(self.steps, self.checkpoint_every, self.warmup_steps) > MAX_STEPS or self.batch_size > MAX_BATCH_SIZE:
            problems.append(f"steps, warmup_steps and checkpoint_every must be <= {MAX_STEPS} and batch_size <= "
                            f"{MAX_BATCH_SIZE}")
        if not 0 <= self.seed <= MAX_SEED:
            problems.append(f"seed must be in 0..{MAX_SEED}")
        if not (self.lr > 0 and math.isfinite(self.lr)) or self.weight_decay < 0:
            problems.append("lr must be a positive number and weight_decay >= 0")
        if self.warmup_steps < 0 or not 0.0 <= self.min_lr_ratio <= 1.0 or self.grad_clip < 0:
            problems.append("warmup_steps >= 0, min_lr_ratio in [0, 1] and grad_clip >= 0 are required")
        if not (self.device in ("auto", "cpu") or self.device.startswith("cuda")):
            problems.append(f"device must be 'auto', 'cpu' or 'cuda[:N]', got {self.device!r}")
        if self.distributed not in ("auto", "off"):
            problems.append(f"distributed must be 'auto' or 'off', got {self.distributed!r}")
        if self.precision not in PRECISIONS:
            problems.append(f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        if problems:
            raise ValueError("TrainConfig: " + "; ".join(problems))


@dataclass
class StepContext:
    """What a model's ``training_loss`` knows about the step and the processes."""

    step: int                                    # 0-based optimizer step
    rank: int = 0                                # this process
    world_size: int = 1                          # processes in all
    gather: bool = False                         # score all ranks' embeddings together
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))


# -- models ---------------------------------------------------------------------------------------------
def build_model(model_kind: str, model_config: dict | None = None) -> torch.nn.Module:
    """The model of a registered kind (see :data:`MODEL_KINDS`)."""
    entry = MODEL_KINDS.get(model_kind)
    if entry is None:
        raise ValueError(f"unknown model kind {model_kind!r}; known: {', '.join(sorted(MODEL_KINDS))}")
    builder = entry.build if isinstance(entry, ModelKind) else entry
    model = builder(dict(model_config or {}))
    for name in ("prepare", "encode_queries", "encode_tracks", "score", "training_loss", "config_dict"):
        if not callable(getattr(model, name, None)):
            raise TypeError(f"model kind {model_kind!r} has no {name}() (see the interface in models.training.trainer)")
    return model


def trained_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Trained parameters and persistent buffers (frozen pretrained weights are left out)."""
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    params = {n for n, _ in model.named_parameters()}
    return {k: v.detach().cpu().clone() for k, v in model.state_dict().items() if k in trainable or k not in params}


def load_trained_state(model: torch.nn.Module, state: dict[str, torch.Tensor]) -> None:
    missing, unexpected = model.load_state_dict(state, strict=False)
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    missing_trained = sorted(set(missing) & trainable)
    if missing_trained or unexpected:
        raise ValueError(f"checkpoint does not fit the model: missing {missing_trained[:5]}, unexpected {unexpected[:5]}")


class CheckpointIncompatible(ValueError):
    """A checkpoint whose model config this version cannot build (written by an older one)."""


def load_model(out_dir: str | os.PathLike, *, device: str = "cpu") -> tuple[torch.nn.Module, dict]:
    """The trained model in ``out_dir`` (from its checkpoint; ``out_dir`` may also be the checkpoint
    file itself) and the checkpoint's metadata."""
    path = Path(out_dir) if Path(out_dir).is_file() else Path(out_dir) / CHECKPOINT
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    ckpt = torch.load(path, map_location="cpu", weights_only=False)
    try:
        model = build_model(ckpt["model_kind"], ckpt["model_config"])
    except (TypeError, ValueError) as exc:
        raise CheckpointIncompatible(f"the checkpoint at {path} holds a {ckpt['model_kind']} config this version "
                                     f"cannot build ({exc}); train the run again") from None
    load_trained_state(model, ckpt["model"])
    model.to(_device(device)).eval()
    meta = {k: ckpt[k] for k in ("model_kind", "model_config", "train_config", "snapshot_sha256", "step")}
    return model, meta


def resolve_config(config: TrainConfig, model: torch.nn.Module) -> tuple[TrainConfig, dict]:
    """``config`` completed with the model's ``optimizer_defaults(steps)`` (rule in the module
    docstring) and the values taken from the model."""
    supply = getattr(model, "optimizer_defaults", None)
    if not callable(supply):
        return config, {}
    offered = dict(supply(config.steps))
    unknown = sorted(set(offered) - set(MODEL_DEFAULTABLE))
    if unknown:
        raise ValueError(f"{type(model).__name__}.optimizer_defaults() gives {unknown}; a model may supply "
                         f"{', '.join(MODEL_DEFAULTABLE)}")
    defaults = TrainConfig()
    taken = {}
    for name, value in offered.items():
        if name == "batching":
            merged = {**value, **config.batching}
            if merged != config.batching:
                taken[name] = {k: v for k, v in value.items() if k not in config.batching}
        elif getattr(config, name) == getattr(defaults, name):
            taken[name] = value
    if not taken:
        return config, {}
    changes = {k: ({**v, **config.batching} if k == "batching" else v) for k, v in taken.items()}
    return TrainConfig.from_dict(config.as_dict() | changes), taken


def parameter_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """AdamW parameter groups of the trained parameters: weight decay on matrices (and larger
    tensors) only. Biases, norm weights, scalars (``ℓ``, ``α``, SigLIP's ``t'`` and ``b``), readout
    tokens and other 1-D parameters are not decayed, nor parameters the model names in an optional
    ``no_weight_decay()``: decay would pull them towards 0 (a logit scale of 1, a closed gate)."""
    exempt = set(model.no_weight_decay()) if callable(getattr(model, "no_weight_decay", None)) else set()
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if p.requires_grad:
            (no_decay if p.ndim < 2 or name in exempt else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def _device(name: str, local_rank: int = 0) -> torch.device:
    if name == "auto":
        return torch.device(f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {name!r} asked for, but CUDA is not available")
    return torch.device(name)


# -- training ------------------------------------------------------------------------------------------
def epoch_steps(epochs: int, n_queries: int, batch_size: int) -> int:
    """Steps of ``epochs`` passes over ``n_queries`` training queries (every group of the plan,
    full and L_bi-only, is visited once per epoch): ``⌈epochs · n_queries / batch_size⌉``."""
    if epochs < 1 or n_queries < 1 or batch_size < 1:
        raise ValueError(f"need epochs, n_queries and batch_size >= 1, got {epochs}, {n_queries}, {batch_size}")
    return min(MAX_STEPS, math.ceil(epochs * n_queries / batch_size))


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _rng_state() -> dict:
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []}


def _set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if state.get("cuda") and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _schedule(config: TrainConfig) -> Callable[[int], float]:
    def factor(step: int) -> float:
        if step < config.warmup_steps:
            return (step + 1) / config.warmup_steps
        span = max(1, config.steps - config.warmup_steps)
        progress = min(1.0, (step - config.warmup_steps) / span)
        return config.min_lr_ratio + (1 - config.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))
    return factor


def _save_atomic(obj: dict, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def _plain(value):
    if isinstance(value, torch.Tensor):
        value = value.detach().float().item() if value.numel() == 1 else None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _setup_processes(config: TrainConfig) -> tuple[int, int, int]:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if config.distributed == "off" or world <= 1:
        return 0, 1, 0
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if not dist.is_initialized():
        use_cuda = config.device != "cpu" and torch.cuda.is_available()
        if use_cuda:
            torch.cuda.set_device(local_rank)
        dist.init_process_group(backend="nccl" if use_cuda else "gloo")
    return dist.get_rank(), dist.get_world_size(), local_rank


def train(snapshot: RelationSnapshotData, model_kind: str, config: TrainConfig | dict, out_dir: str | os.PathLike, *,
          eval_snapshot: RelationSnapshotData | None = None, on_step: Callable[[dict], None] | None = None,
          should_stop: Callable[[], bool] | None = None,
          on_checkpoint: Callable[[Path, int], None] | None = None) -> dict:
    """Train ``model_kind`` on ``snapshot`` into ``out_dir`` (the module docstring), resuming from a
    checkpoint there. Returns (and writes to ``result.json``) the run's summary: status
    (``"finished"`` or ``"stopped"`` when ``should_stop()`` said so), steps done, the last step's
    record, label totals, the settings taken from the model's recipe (``model_defaults``) and the
    evaluation on ``eval_snapshot``. ``on_checkpoint(path, step)`` is called on rank 0 once each
    checkpoint is complete at ``path`` (the caller copies it elsewhere before training goes on)."""
    cfg = config if isinstance(config, TrainConfig) else TrainConfig.from_dict(config)
    snapshot.validate()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rank, world, local_rank = _setup_processes(cfg)
    device = _device(cfg.device, local_rank)
    snapshot_sha = snapshot.content_sha256()
    cache_dir = cfg.cache_dir or str(out / "feature_cache")

    ckpt_path = out / CHECKPOINT
    ckpt = torch.load(ckpt_path, map_location="cpu", weights_only=False) if ckpt_path.is_file() else None
    if ckpt is not None:
        _check_resume(ckpt, model_kind, cfg, snapshot_sha, world)    # before any expensive work

    _seed_everything(cfg.seed)                                      # same initial weights on every rank
    model = build_model(model_kind, cfg.model)
    model.to(device)
    torch.manual_seed(cfg.seed * 1009 + rank)                       # per-rank dropout stream
    run_cfg, model_defaults = resolve_config(cfg, model)            # the model's recipe where cfg left defaults
    if run_cfg.batch_size % world:
        raise ValueError(f"batch_size {run_cfg.batch_size} must be a multiple of the {world} processes")
    plan = TrainingPlan(snapshot, BatchingConfig.from_dict(run_cfg.batching), seed=cfg.seed)
    if cfg.epochs is not None:                                      # the groups do not depend on the batching
        cfg = TrainConfig.from_dict(cfg.as_dict() | {"steps": epoch_steps(cfg.epochs, len(plan.groups), run_cfg.batch_size)})
        run_cfg, model_defaults = resolve_config(cfg, model)        # a recipe may scale with the steps
    data = model.prepare(snapshot, plan.variant_observations(), cache_dir=cache_dir)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(parameter_groups(model, run_cfg.weight_decay), lr=run_cfg.lr, betas=run_cfg.betas)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _schedule(run_cfg))

    start = 0
    if ckpt is not None:
        load_trained_state(model, ckpt["model"])
        try:
            optimizer.load_state_dict(ckpt["optimizer"])
        except ValueError as exc:
            raise ValueError(f"the checkpoint's optimizer state does not fit this trainer's parameter groups "
                             f"({exc}); it was written by an older trainer: use a new folder") from None
        scheduler.load_state_dict(ckpt["scheduler"])
        _set_rng_state(ckpt["rng"][rank])
        start = int(ckpt["step"])
        del ckpt
    log_path = out / "steps.jsonl"
    if rank == 0:                                                   # drop records past the checkpoint
        kept = [line for line in (log_path.read_text().splitlines() if log_path.is_file() else [])
                if line.strip() and json.loads(line)["step"] <= start]
        log_path.write_text("".join(line + "\n" for line in kept))

    def save(step: int) -> None:
        states = [None] * world
        if world > 1:
            dist.all_gather_object(states, _rng_state())
        else:
            states = [_rng_state()]
        if rank == 0:
            _save_atomic({"format": CHECKPOINT_FORMAT, "step": step, "model_kind": model_kind, "world_size": world,
                          "model_config": model.config_dict(), "train_config": cfg.as_dict(),
                          "snapshot_sha256": snapshot_sha, "plan_version": PLAN_VERSION, "model": trained_state(model),
                          "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), "rng": states},
                         ckpt_path)
            if on_checkpoint is not None:
                on_checkpoint(ckpt_path, step)
        if world > 1:
            dist.barrier()

    totals = {"positives": 0, "negatives": 0, "pseudo_positives": 0, "pseudo_negatives": 0, "cross_video_positives": 0,
              "cross_video_negatives": 0, "group_rows": 0, "bi_only_rows": 0, "cross_video_columns": 0}
    rates = {"zero_neg_row_rate": [], "zero_neg_col_rate": []}
    record: dict = {}
    status, began = "finished", time.perf_counter()
    model.train()
    step = start
    while step < cfg.steps:
        tick = time.perf_counter()
        batch = plan.batch(step, run_cfg.batch_size)
        ctx = StepContext(step=step, rank=rank, world_size=world, gather=run_cfg.gather_negatives, device=device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=cfg.precision == "bf16"):
            parts = model.training_loss(data, batch, ctx)
        loss = parts["loss"]
        if not torch.isfinite(loss):
            raise FloatingPointError(f"step {step}: the loss is {float(loss)}")
        optimizer.zero_grad(set_to_none=False)
        loss.backward()
        if world > 1:
            for p in params:
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
                dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
                p.grad /= world
        if cfg.grad_clip:
            torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
        lr = optimizer.param_groups[0]["lr"]
        optimizer.step()
        scheduler.step()
        step += 1
        counts = _realized_counts(batch, rank, world, run_cfg.gather_negatives, device)
        pooled = {"zero_neg_row_rate": _ratio(counts["t2v_rows_without_negative"], counts["t2v_rows"]),
                  "zero_neg_col_rate": _ratio(counts["v2t_cols_without_negative"], counts["v2t_cols"])}
        record = {"step": step, "steps": cfg.steps, "lr": lr, **{k: _plain(v) for k, v in parts.items()}, **counts,
                  **{k: v for k, v in pooled.items() if k in parts},
                  "seconds": round(time.perf_counter() - tick, 4)}
        for k in totals:
            totals[k] += counts[k]
        for k in rates:
            if record.get(k) is not None:
                rates[k].append(record[k])
        if rank == 0:
            with open(log_path, "a") as fh:
                fh.write(json.dumps(record) + "\n")
            if on_step is not None:
                on_step(record)
        stop = bool(should_stop()) if should_stop is not None else False
        if world > 1:
            flag = torch.tensor([int(stop)], device=device if dist.get_backend() == "nccl" else "cpu")
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
            stop = bool(flag.item())
        if stop and step < cfg.steps:
            status = "stopped"
            save(step)
            break
        if step % cfg.checkpoint_every == 0 or step == cfg.steps:
            save(step)

    after = getattr(model, "after_training", None)
    after_report = None
    if status == "finished" and callable(after):
        after_report = after(data, snapshot, StepContext(step=step, rank=rank, world_size=world, device=device))
        save(step)
    metrics = rows = None
    summarize = getattr(model, "summarize", None)
    data_summary = {"train": summarize(data)} if callable(summarize) else {}
    if status == "finished" and cfg.eval_at_end and eval_snapshot is not None:
        metrics, rows = evaluate_rows(model, eval_snapshot, cache_dir=cache_dir)
        if callable(summarize):                                     # the features are in the cache by now
            data_summary["eval"] = summarize(model.prepare(eval_snapshot.model_inputs(), None, cache_dir=cache_dir))
    plan_counts = plan.counts()
    result = {"status": status, "model_kind": model_kind, "step": step, "steps": cfg.steps, "epochs": cfg.epochs,
              "epochs_done": step * run_cfg.batch_size / len(plan.groups), "resumed_from": start,
              "snapshot_sha256": snapshot_sha, "plan_version": PLAN_VERSION, "n_groups": plan_counts["groups"],
              "n_bi_only_queries": plan_counts["bi_only"], "n_cross_video_queries": plan_counts["cross_video"],
              "excluded_queries": plan_counts["excluded"],
              "last": record, "totals": totals,
              "mean_zero_neg_row_rate": float(np.mean(rates["zero_neg_row_rate"])) if rates["zero_neg_row_rate"] else None,
              "mean_zero_neg_col_rate": float(np.mean(rates["zero_neg_col_rate"])) if rates["zero_neg_col_rate"] else None,
              "model_defaults": model_defaults, "after_training": after_report, "precision": cfg.precision,
              "seconds": round(time.perf_counter() - began, 2), "world_size": world, "device": str(device),
              "data_summary": data_summary, "metrics": metrics, "per_query": rows, "checkpoint": str(ckpt_path)}
    if rank == 0:
        (out / "result.json").write_text(json.dumps(result, indent=2, default=_plain) + "\n")
    return result


def _ratio(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _realized_counts(batch, rank: int, world: int, gather: bool, device: torch.device) -> dict:
    """Label counts of the block of the batch mask this rank's loss scored, summed over ranks when
    the blocks differ (no gathering); with gathering every rank scored the whole batch."""
    counts = batch.stats(*batch.loss_block(rank, world, gather))
    if world > 1 and not gather:
        keys = sorted(counts)
        on = device if dist.get_backend() == "nccl" else torch.device("cpu")
        summed = torch.tensor([counts[k] for k in keys], dtype=torch.int64, device=on)     # [n_counts]
        dist.all_reduce(summed, op=dist.ReduceOp.SUM)
        counts = dict(zip(keys, summed.tolist()))
    return counts


def _check_resume(ckpt: dict, model_kind: str, cfg: TrainConfig, snapshot_sha: str, world: int) -> None:
    if ckpt.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"the checkpoint's format {ckpt.get('format')!r} is not {CHECKPOINT_FORMAT!r}")
    problems = []
    if ckpt["model_kind"] != model_kind:
        problems.append(f"model kind {ckpt['model_kind']!r} != {model_kind!r}")
    if ckpt["snapshot_sha256"] != snapshot_sha:
        problems.append("it was trained on another snapshot")
    if ckpt.get("plan_version", 1) != PLAN_VERSION:          # checkpoints before version 2 do not record it
        problems.append(f"its batches follow batching rules v{ckpt.get('plan_version', 1)}, this trainer's "
                        f"v{PLAN_VERSION}")
    before_world = int(ckpt.get("world_size", len(ckpt.get("rng") or [None])))
    if before_world != world:
        problems.append(f"processes: {before_world} != {world} (each process has its own random stream)")
    defaults = TrainConfig().as_dict()
    before = {k: ckpt["train_config"].get(k, defaults[k]) for k in RUN_IDENTITY}   # fields added later: defaults
    before["betas"] = list(before["betas"])                   # as_dict's JSON form (older checkpoints hold a tuple)
    now = cfg.as_dict()
    problems += [f"{k}: {before[k]!r} != {now[k]!r}" for k in RUN_IDENTITY if before[k] != now[k]]
    if problems:
        raise ValueError("out_dir holds a checkpoint of a different run; use a new folder ("
                         + "; ".join(problems) + ")")
