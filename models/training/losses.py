"""Contrastive losses of the three retrievers (no Django): DESIGN 4.1 and 4.2 are the contract.

- ``mask_guided_loss``: VTrajEmbed's mask-guided contrastive loss with unknown (⊥) relations,
  vectorised: the labels are read once on the host, and every row and column term comes from one
  exponential of the score matrix (a masked log-sum-exp per line kind where that exponential would
  underflow); ``mask_guided_loss_reference`` is the same loss written as a plain Python loop over
  rows and columns (the tests and ``bench_losses`` compare them).
- ``info_nce``: SCOUT's symmetric InfoNCE at temperature τ (equals open_clip's ``ClipLoss`` with
  ``logit_scale = 1/τ``).
- ``siglip_loss``: ActPair's SigLIP sigmoid loss (equals open_clip's ``SigLipLoss``).

Every loss takes ``rank`` and ``world_size`` (keyword-only, default one process). With
``world_size > 1`` the embeddings of all ranks are gathered with ``models.training.distributed.
gather_with_grad`` and every rank computes the loss over the whole gathered batch (rank-major
order); see that module for how gradients combine under DistributedDataParallel.

Labels are integer tensors in {1, 0, -1}; -1 is ⊥ (unknown).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F

from models.training.distributed import gather_with_grad

POSITIVE, NEGATIVE, UNKNOWN = 1, 0, -1


# -- input checks ---------------------------------------------------------------------------------
def _check_embeddings(a: torch.Tensor, b: torch.Tensor, names: tuple[str, str], same_rows: bool) -> None:
    for t, name in zip((a, b), names):
        if not isinstance(t, torch.Tensor) or t.ndim != 2:
            raise ValueError(f"{name} must be a 2-D tensor [n, d]")
        if not t.is_floating_point():
            raise ValueError(f"{name} must be a floating-point tensor, got {t.dtype}")
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"{names[0]} and {names[1]} have different widths {a.shape[1]} != {b.shape[1]}")
    if same_rows and a.shape[0] != b.shape[0]:
        raise ValueError(f"{names[0]} and {names[1]} must pair row by row, got {a.shape[0]} and {b.shape[0]} rows")
    if a.shape[0] == 0 or b.shape[0] == 0:
        raise ValueError(f"{names[0]} and {names[1]} must not be empty")


def _check_labels(labels: torch.Tensor, name: str, shape: tuple[int, int]) -> None:
    if (not isinstance(labels, torch.Tensor) or labels.is_floating_point() or labels.is_complex()
            or labels.dtype == torch.bool):
        raise ValueError(f"{name} must be an integer tensor in {{1, 0, -1}}")
    if tuple(labels.shape) != shape:
        raise ValueError(f"{name} must have shape {list(shape)} (queries × records), got {list(labels.shape)}")
    bad = (labels != POSITIVE) & (labels != NEGATIVE) & (labels != UNKNOWN)
    if bool(bad.any()):
        raise ValueError(f"{name} holds values outside {{1, 0, -1}}")


def _scalar(value, name: str, like: torch.Tensor, positive: bool) -> torch.Tensor:
    t = value if isinstance(value, torch.Tensor) else torch.tensor(float(value), dtype=like.dtype)
    if t.numel() != 1:
        raise ValueError(f"{name} must be a scalar, got shape {list(t.shape)}")
    if positive and not bool(t.detach() > 0):
        raise ValueError(f"{name} must be positive (it is a scale, not its logarithm), got {float(t)}")
    if not bool(torch.isfinite(t.detach())):
        raise ValueError(f"{name} must be finite, got {float(t)}")
    return t.to(device=like.device, dtype=like.dtype).reshape(())


def _check_mask_guided(q, v, group, relation, logit_scale, lambda_g, lambda_bi) -> torch.Tensor:
    _check_embeddings(q, v, ("q", "v"), same_rows=False)
    shape = (q.shape[0], v.shape[0])
    _check_labels(group, "group", shape)
    _check_labels(relation, "relation", shape)
    for w, name in ((lambda_g, "lambda_g"), (lambda_bi, "lambda_bi")):
        if not (isinstance(w, int | float) and math.isfinite(w) and w >= 0):
            raise ValueError(f"{name} must be a finite non-negative number, got {w!r}")
    if bool(((group == POSITIVE) & (relation != POSITIVE)).any()):
        raise ValueError("a group positive (group == 1) must be a verified match (relation == 1): "
                         "a query's own positives are always matches")
    if bool(((group == NEGATIVE) & (relation == POSITIVE)).any()):
        raise ValueError("a group negative (group == 0) cannot be a verified match (relation == 1)")
    no_positive = (group == NEGATIVE).any(dim=1) & ~(group == POSITIVE).any(dim=1)    # [B]
    if bool(no_positive.any()):
        rows = no_positive.nonzero().flatten().tolist()[:5]
        raise ValueError(f"group rows {rows} have negatives but no positive (the loss would be infinite)")
    return _scalar(logit_scale, "logit_scale", q, positive=True)


# -- mask-guided contrastive loss (DESIGN 4.1) ----------------------------------------------------
# The four score sets, stacked in this order as ``sets`` [4, B, P]: group positives G⁺, batch
# positives M⁺, group negatives G⁻, and batch negatives M⁻ restricted to the positive records P⁺.
# The N = 2B + P lines that score, in this order: group rows (G⁺ | G⁻), t2v rows and v2t columns
# (both M⁺ | M⁻ ∩ P⁺).


def _masked_term(scores: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor, dim: int) -> torch.Tensor:
    """``ℓ(A) = logsumexp(A⁺ ∪ A⁻) − logsumexp(A⁺)`` along ``dim``, 0 where ``A⁻`` is empty.

    Lines that do not score (no negative, or no positive) get a full mask on both sides so that no
    ``-inf − -inf`` appears; ``torch.where`` then sends them exactly zero gradient. Entries outside
    ``A⁺ ∪ A⁻`` are filled with ``-inf`` by ``masked_fill``, which passes them no gradient."""
    active = pos.any(dim=dim, keepdim=True) & neg.any(dim=dim, keepdim=True)   # [B, 1] or [1, P]
    both = torch.where(active, pos | neg, True)                                # [B, P]
    only_pos = torch.where(active, pos, True)                                  # [B, P]
    lse_all = torch.logsumexp(scores.masked_fill(~both, -math.inf), dim=dim)   # [B] or [P]
    lse_pos = torch.logsumexp(scores.masked_fill(~only_pos, -math.inf), dim=dim)
    return torch.where(active.squeeze(dim), lse_all - lse_pos, torch.zeros_like(lse_all))


def _masked_terms(scores: torch.Tensor, sets: torch.Tensor, weights: torch.Tensor) -> tuple:
    """The four outputs (loss, group, t2v, v2t) ``= weights @ ℓ`` with one masked log-sum-exp per
    line kind, differentiable by autograd (any order)."""
    lines = torch.cat([_masked_term(scores, sets[0], sets[2], dim=1),
                       _masked_term(scores, sets[1], sets[3], dim=1),
                       _masked_term(scores, sets[1], sets[3], dim=0)])         # [N]
    return tuple(w @ lines for w in weights)                                  # 4 × []


class _LabelSets(NamedTuple):
    """The score sets and lines of one batch's labels (host arrays)."""

    sets: np.ndarray          # [4, B, P] bool: G⁺, M⁺, G⁻, M⁻ ∩ P⁺
    labelled: np.ndarray      # [B, P] bool: in some set
    scoring: np.ndarray       # [N] bool: lines with a positive and a negative
    weights: np.ndarray       # [4, N] float64: (loss, group, t2v, v2t) = weights @ ℓ
    zero_neg_row_rate: float
    zero_neg_col_rate: float


_POSITIVE_NEGATIVE = np.array([POSITIVE, NEGATIVE]).reshape(2, 1, 1, 1)


def _signed(labels: np.ndarray) -> np.ndarray:
    """Unsigned labels as torch compares them: its largest value equals -1 (⊥)."""
    if labels.dtype.kind != "u":
        return labels
    return np.where(labels == np.iinfo(labels.dtype).max, UNKNOWN, labels.astype(np.int64))


def _label_sets(group: torch.Tensor, relation: torch.Tensor, lambda_g: float,
                lambda_bi: float) -> _LabelSets | None:
    """Read the labels once on the host: the score sets, the lines that score and the weights of
    their ``ℓ`` in the four outputs; ``None`` when a label check of ``_check_mask_guided`` fails
    (values outside {1, 0, -1}, a group positive that is not a match, a group negative that is, a
    group row with a 0 and no 1). NumPy, because every check needs its answer on the host anyway
    and these small boolean passes cost a fraction of torch's per-operation overhead."""
    labels = np.stack([_signed(t.cpu().numpy()) for t in (group, relation)])   # [2, B, P]
    if labels.min() < UNKNOWN or labels.max() > POSITIVE:
        return None
    n_rows, n_cols = labels.shape[1:]
    sets = (labels == _POSITIVE_NEGATIVE).reshape(4, n_rows, n_cols)           # [4, B, P]
    in_p_plus = sets[1].any(axis=0)                                           # [P]
    sets[3] &= in_p_plus
    row_any, col_any = sets.any(axis=2), sets[1::2].any(axis=1)               # [4, B], [2, P]
    if ((sets[0] > sets[1]) | (sets[2] & sets[1])).any() or (row_any[2] > row_any[0]).any():
        return None
    rows = row_any[1]                                                         # [B]
    scoring = np.concatenate([row_any[2], rows & row_any[3], in_p_plus & col_any[1]])   # [N]
    sizes = [n_rows, n_rows, n_cols]
    n_group, n_rows_scoring, n_cols_scoring = np.add.reduceat(scoring, [0, n_rows, 2 * n_rows]).tolist()
    counted = [n_group, int(np.count_nonzero(rows)), int(np.count_nonzero(in_p_plus))]   # per mean
    mix = np.array([[lambda_g, lambda_bi / 2, lambda_bi / 2], [1, 0, 0], [0, 1, 0], [0, 0, 1]])
    return _LabelSets(
        sets=sets,
        labelled=sets.any(axis=0),
        scoring=scoring,
        weights=np.repeat(mix / np.maximum(counted, 1), sizes, axis=1) * scoring,
        zero_neg_row_rate=(counted[1] - n_rows_scoring) / counted[1] if counted[1] else math.nan,
        zero_neg_col_rate=(counted[2] - n_cols_scoring) / counted[2] if counted[2] else math.nan,
    )


_NUMPY_MAX_SCORES = 1 << 14     # B · P up to 16,384: 64 groups of four


def _array_module(q: torch.Tensor, v: torch.Tensor):
    """The library that computes the shared exponential, written once for both: NumPy for a small
    float32 / float64 batch on the CPU (at most ``_NUMPY_MAX_SCORES`` scores), where every call
    costs about its fixed overhead and NumPy's is a fraction of torch's; torch otherwise (other
    devices and dtypes, and large batches, which torch spreads over its threads)."""
    if (q.device.type == "cpu" and q.dtype in (torch.float32, torch.float64)
            and q.shape[0] * v.shape[0] <= _NUMPY_MAX_SCORES):
        return np
    return torch


def _as_tensor(array) -> torch.Tensor:
    """A result of ``_array_module``'s library as a tensor (NumPy arrays and scalars share memory)."""
    return array if isinstance(array, torch.Tensor) else torch.from_numpy(np.asarray(array))


def _as_array(xp, tensor: torch.Tensor):
    """``tensor``'s values, without a graph, in the library ``xp`` (NumPy shares its memory)."""
    return tensor.detach().numpy() if xp is np else tensor.detach()


def _shared_exp_floor(dtype: torch.dtype) -> float:
    """The smallest positive-set sum ``Z⁺`` that the shared exponential accepts: ``tiny / eps``
    (1e-31 in float32, 1e-292 in float64). Entries of ``e`` below the smallest normal number
    (subnormal or 0) then carry less than ``eps`` of their line's sum."""
    info = torch.finfo(dtype)
    return info.tiny / info.eps


class _SharedExp(NamedTuple):
    """One exponential of the score matrix shared by every line, with what its backward reads."""

    q: object                 # [B, d] q without a graph, in the library of e
    scale: object             # [] the scale without a graph, in the library of e
    v: torch.Tensor           # [P, d] v without a graph (the products run in torch)
    scaled_q: torch.Tensor    # [B, d] scale · q: S = scaled_q vᵀ
    e: object                 # [B, P] exp(S − top) where labelled (top: largest labelled score), else 1
    sets: object              # [4, B, P] the score sets
    z: object                 # [2, N] each line's Z⁺ = Σ_{A⁺} e and Z⁻ = Σ_{A⁻} e
    weights: object           # [4, N] as in _LabelSets, in the scores' dtype


def _shared_exp(xp, q: torch.Tensor, v: torch.Tensor, scale: torch.Tensor,
                labels: _LabelSets) -> _SharedExp | None:
    """The shared exponential of ``S = scale · q vᵀ`` in the library ``xp``, or ``None`` when on a
    line of nonzero weight ``Z⁺`` falls below ``_shared_exp_floor`` (its positives sit too far below
    the top score: about 71 in float32, 672 in float64). Only labelled scores are read, so the
    unlabelled ones change no bit of the loss."""
    q_x, scale_x, v_t = _as_array(xp, q), _as_array(xp, scale), v.detach()
    scaled_q = _as_tensor(q_x * scale_x)                                      # [B, d]
    s = _as_array(xp, torch.mm(scaled_q, v_t.T))                              # [B, P]
    if xp is np:
        sets, labelled, weights = labels.sets, labels.labelled, labels.weights.astype(s.dtype)
    else:
        sets, labelled = (torch.from_numpy(a).to(s.device) for a in (labels.sets, labels.labelled))
        weights = torch.from_numpy(labels.weights).to(s.device, s.dtype)
    with np.errstate(all="ignore"):                               # as torch: inf and nan pass silently
        top = xp.where(labelled, s, -math.inf).max()                          # []
        e = xp.exp(xp.where(labelled, s - top, 0))                            # [B, P]
        parts = sets * e                                                      # [4, B, P]
        z = xp.concatenate([parts.sum(axis=2).reshape(2, -1),                 # [2 (A⁺, A⁻), 2B]
                            parts[1::2].sum(axis=1)], axis=1)                 # [2 (A⁺, A⁻), N]
        z_pos = z[0] if xp is np else z[0].cpu().double().numpy()             # [N]
        if (labels.scoring & (z_pos < _shared_exp_floor(q.dtype))).any():
            return None
    return _SharedExp(q=q_x, scale=scale_x, v=v_t, scaled_q=scaled_q, e=e, sets=sets, z=z,
                      weights=weights)


def _masked_gradients(q, v, scale, stats: _SharedExp, grads) -> tuple:
    """The gradients of ``_SharedExpLoss`` for ``create_graph=True``: those of the masked
    log-sum-exp path (``_masked_terms``), recomputed with autograd so that they differentiate again."""
    sets, weights = (_as_tensor(a).to(q.device) for a in (stats.sets, stats.weights))
    inputs = [t for t in (q, v, scale) if t.requires_grad]
    terms = _masked_terms(scale * q @ v.T, sets, weights)                    # 4 × []
    outputs = [(t, g) for t, g in zip(terms, grads) if g is not None]
    found = iter(torch.autograd.grad([t for t, _ in outputs], inputs, [g for _, g in outputs],
                                     create_graph=True, allow_unused=True))
    return tuple(next(found) if t.requires_grad else None for t in (q, v, scale))


class _SharedExpLoss(torch.autograd.Function):
    """The four outputs (loss, group, t2v, v2t) ``= weights @ ℓ`` from ``q``, ``v`` and ``scale``,
    given their shared exponential ``stats`` in the library ``xp``: ``ℓ = log1p(Z⁻ / Z⁺)`` on every
    line (lines of weight 0 without a positive divide by 1).

    Backward: an entry of ``A⁻`` gets ``e / (Z⁺ + Z⁻)`` and an entry of ``A⁺`` ``e / (Z⁺ + Z⁻) −
    e / Z⁺``, times the line's weight, summed over the lines through it (entries in no set get
    exactly 0); then through ``S = (scale · q) vᵀ`` with the products autograd would take. Under
    ``create_graph=True`` the gradients come from ``_masked_gradients`` instead, so that they
    differentiate again."""

    @staticmethod
    def forward(ctx, q: torch.Tensor, v: torch.Tensor, scale: torch.Tensor, xp,
                stats: _SharedExp) -> tuple[torch.Tensor, ...]:
        z_pos = stats.z[0] + (stats.z[0] == 0)                                # [N]
        z_all = z_pos + stats.z[1]                                            # [N]
        ell = xp.log1p(stats.z[1] / z_pos)                                    # [N]
        ctx.save_for_backward(q, v, scale)                      # for autograd's in-place checks
        ctx.set_materialize_grads(False)
        ctx.xp, ctx.stats, ctx.z = xp, stats, (z_pos, z_all)
        if xp is np:                                                          # 4 NumPy scalars
            return tuple([_as_tensor(x) for x in np.einsum("kn,n->k", stats.weights, ell)])
        return tuple([w @ ell for w in stats.weights])                        # 4 × [], none a view

    @staticmethod
    def backward(ctx, *grads: torch.Tensor):
        q, v, scale = ctx.saved_tensors                  # raises if one changed in place since forward
        xp, stats, (z_pos, z_all) = ctx.xp, ctx.stats, ctx.z
        if torch.is_grad_enabled():
            return (*_masked_gradients(q, v, scale, stats, grads), None, None)
        n_rows = stats.scaled_q.shape[0]
        if xp is np:                                                          # [4]; None: unused output
            grad = np.array([0.0 if g is None else g.item() for g in grads], stats.weights.dtype)
        else:
            grad = torch.stack([stats.scaled_q.new_zeros(()) if g is None else g for g in grads])
        per_line = xp.einsum("k,kn->n", grad, stats.weights)                  # [N]
        on_neg = per_line / z_all                                             # [N]
        on_pos = on_neg - per_line / z_pos                                    # [N]
        by_line = xp.stack([on_pos, on_neg])                                  # [2, N]
        by_row = by_line[:, : 2 * n_rows].reshape(4, n_rows, 1)                # [4, B, 1] in set order
        by_col = by_line[:, None, 2 * n_rows:]                                # [2, 1, P] for M⁺, M⁻
        d_scores = _as_tensor(stats.e * ((stats.sets * by_row).sum(axis=0)
                                         + (stats.sets[1::2] * by_col).sum(axis=0)))   # [B, P]
        d_q = d_v = d_scale = None
        if ctx.needs_input_grad[0] or ctx.needs_input_grad[2]:
            d_scaled_q = _as_array(xp, torch.mm(d_scores, stats.v))           # [B, d]
            if ctx.needs_input_grad[0]:
                d_q = _as_tensor(d_scaled_q * stats.scale)
            if ctx.needs_input_grad[2]:
                d_scale = _as_tensor((d_scaled_q * stats.q).sum())
        if ctx.needs_input_grad[1]:
            d_v = torch.mm(d_scores.T, stats.scaled_q)                        # [P, d]
        return d_q, d_v, d_scale, None, None


def _plain_checks_pass(q, v, group, relation, logit_scale, lambda_g, lambda_bi) -> bool:
    """Whether every check of ``_check_mask_guided`` that reads no label passes, with
    ``logit_scale`` a floating-point tensor (the common case; other forms take the full checks)."""
    for t in (q, v):
        if not (isinstance(t, torch.Tensor) and t.ndim == 2 and t.is_floating_point()):
            return False
    if q.shape[1] != v.shape[1] or q.shape[0] == 0 or v.shape[0] == 0:
        return False
    for labels in (group, relation):
        if not (isinstance(labels, torch.Tensor) and not labels.is_floating_point()
                and not labels.is_complex() and labels.dtype != torch.bool
                and labels.shape == (q.shape[0], v.shape[0])):
            return False
    for w in (lambda_g, lambda_bi):
        if not (isinstance(w, int | float) and math.isfinite(w) and w >= 0):
            return False
    if not (isinstance(logit_scale, torch.Tensor) and logit_scale.is_floating_point()
            and logit_scale.numel() == 1):
        return False
    scale = logit_scale.detach().item()
    return scale > 0 and math.isfinite(scale)


def mask_guided_loss(
    q: torch.Tensor,
    v: torch.Tensor,
    group: torch.Tensor,
    relation: torch.Tensor,
    logit_scale: torch.Tensor,
    lambda_g: float = 0.1,
    lambda_bi: float = 1.0,
    *,
    rank: int = 0,
    world_size: int = 1,
) -> dict:
    """The mask-guided contrastive loss of DESIGN 4.1, fully vectorised.

    ``q`` ``[B, d]`` query embeddings and ``v`` ``[P, d]`` record embeddings (unit rows; the loss
    does not normalise them). ``group`` and ``relation`` ``[B, P]`` integer tensors in {1, 0, -1}:
    the group labels G and the batch relations M. ``logit_scale`` is ``exp(ℓ)`` (a positive
    scalar tensor, the scale itself, not its logarithm). Scores are ``S = logit_scale · q vᵀ``.

    - ``group``: mean of ``ℓ(G_b=1, G_b=0)`` over rows with at least one 0 (0 if none).
    - ``t2v``: mean over rows with a 1 in M of ``ℓ`` over the positive-record columns ``P⁺`` (the
      columns with a 1 in some row); a confirmed mismatch with a record outside ``P⁺`` acts only
      through the group term.
    - ``v2t``: mean over columns in ``P⁺`` of ``ℓ`` down the column.
    - ``loss = lambda_g · group + (lambda_bi / 2) · (t2v + v2t)``.

    A row or column without a 0 contributes 0 and still counts in its mean; ⊥ entries are in
    neither set and get exactly zero gradient; a record appearing in several columns counts once
    per column. ``zero_neg_row_rate`` / ``zero_neg_col_rate`` are the fractions of those same
    counted rows / columns that have no 0 (``nan`` when nothing is counted).

    Consistency rules checked up front (``ValueError``): a group positive is a match in M, a group
    negative is not a match in M, and a group row with a 0 has a 1. The labels are read once on the
    host (``_label_sets``); only a batch that fails a check runs ``_check_mask_guided``, whose
    message names the first problem, as the reference's does.

    Every line's ``ℓ`` comes from one exponential of the score matrix shared by all lines
    (``_shared_exp``, ``_SharedExpLoss``), shifted by the largest labelled score; for a small CPU
    batch it is computed with NumPy (``_array_module``). A line whose positives all sit so far below
    that score that their sum leaves the normal range (about 71 below in float32, 672 in float64)
    sends the batch to one masked log-sum-exp per line kind instead. Both give the values and
    gradients of ``mask_guided_loss_reference`` (second derivatives too); unlabelled scores change
    neither bit.

    With ``world_size > 1``, ``q`` and ``v`` are this rank's rows, gathered across ranks here, and
    ``group`` / ``relation`` must describe the *gathered* batch (``[ΣB_r, ΣP_r]``, rank-major),
    the same on every rank.
    """
    q = gather_with_grad(q, rank, world_size) if world_size > 1 else q       # [B, d]
    v = gather_with_grad(v, rank, world_size) if world_size > 1 else v       # [P, d]
    if _plain_checks_pass(q, v, group, relation, logit_scale, lambda_g, lambda_bi):
        scale = logit_scale.to(device=q.device, dtype=q.dtype)
        scale = scale.reshape(()) if scale.ndim else scale
    else:
        scale = _check_mask_guided(q, v, group, relation, logit_scale, lambda_g, lambda_bi)
    labels = _label_sets(group, relation, lambda_g, lambda_bi)
    if labels is None:
        _check_mask_guided(q, v, group, relation, logit_scale, lambda_g, lambda_bi)
        raise AssertionError("_label_sets refused labels that _check_mask_guided accepts")
    xp = _array_module(q, v)
    stats = _shared_exp(xp, q, v, scale, labels)
    if stats is not None:
        loss, l_group, l_t2v, l_v2t = _SharedExpLoss.apply(q, v, scale, xp, stats)
    else:
        scores = scale * q @ v.T                                              # [B, P]
        sets = torch.from_numpy(labels.sets).to(scores.device)               # [4, B, P]
        weights = torch.from_numpy(labels.weights).to(scores.device, scores.dtype)   # [4, N]
        loss, l_group, l_t2v, l_v2t = _masked_terms(scores, sets, weights)
    return {
        "loss": loss,
        "group": l_group,
        "t2v": l_t2v,
        "v2t": l_v2t,
        "zero_neg_row_rate": labels.zero_neg_row_rate,
        "zero_neg_col_rate": labels.zero_neg_col_rate,
    }


def _ell(positives: list[torch.Tensor], negatives: list[torch.Tensor]) -> torch.Tensor | float:
    """``ℓ(A) = log(1 + Z⁻/Z⁺)`` written literally (overflows where exp(score) does)."""
    if not negatives:
        return 0.0
    z_pos = sum(torch.exp(s) for s in positives)
    z_neg = sum(torch.exp(s) for s in negatives)
    return torch.log(1 + z_neg / z_pos)


def mask_guided_loss_reference(
    q: torch.Tensor,
    v: torch.Tensor,
    group: torch.Tensor,
    relation: torch.Tensor,
    logit_scale: torch.Tensor,
    lambda_g: float = 0.1,
    lambda_bi: float = 1.0,
) -> dict:
    """``mask_guided_loss`` for one process as a plain loop over rows and columns, one score at a
    time, with the textbook ``log(1 + Z⁻/Z⁺)``. Slow and obviously correct; differentiable (it
    indexes the score matrix element by element). Use float64 or modest scales: it does not
    stabilise the exponentials."""
    scale = _check_mask_guided(q, v, group, relation, logit_scale, lambda_g, lambda_bi)
    n_rows, n_cols = group.shape
    g, m = group.tolist(), relation.tolist()

    def score(b: int, p: int) -> torch.Tensor:
        return scale * torch.dot(q[b], v[p])

    group_terms = []
    for b in range(n_rows):
        negatives = [score(b, p) for p in range(n_cols) if g[b][p] == NEGATIVE]
        if negatives:
            positives = [score(b, p) for p in range(n_cols) if g[b][p] == POSITIVE]
            group_terms.append(_ell(positives, negatives))
    l_group = sum(group_terms) / len(group_terms) if group_terms else 0.0

    p_plus = [p for p in range(n_cols) if any(m[b][p] == POSITIVE for b in range(n_rows))]
    row_terms, rows_without_negative = [], 0
    for b in range(n_rows):
        positives = [score(b, p) for p in p_plus if m[b][p] == POSITIVE]
        if not positives:
            continue
        negatives = [score(b, p) for p in p_plus if m[b][p] == NEGATIVE]
        rows_without_negative += not negatives
        row_terms.append(_ell(positives, negatives))
    l_t2v = sum(row_terms) / len(row_terms) if row_terms else 0.0

    col_terms, cols_without_negative = [], 0
    for p in p_plus:
        positives = [score(b, p) for b in range(n_rows) if m[b][p] == POSITIVE]
        negatives = [score(b, p) for b in range(n_rows) if m[b][p] == NEGATIVE]
        cols_without_negative += not negatives
        col_terms.append(_ell(positives, negatives))
    l_v2t = sum(col_terms) / len(col_terms) if col_terms else 0.0

    as_tensor = lambda x: x if isinstance(x, torch.Tensor) else q.new_tensor(x)  # noqa: E731
    l_group, l_t2v, l_v2t = as_tensor(l_group), as_tensor(l_t2v), as_tensor(l_v2t)
    return {
        "loss": lambda_g * l_group + (lambda_bi / 2) * (l_t2v + l_v2t),
        "group": l_group,
        "t2v": l_t2v,
        "v2t": l_v2t,
        "zero_neg_row_rate": rows_without_negative / len(row_terms) if row_terms else math.nan,
        "zero_neg_col_rate": cols_without_negative / len(col_terms) if col_terms else math.nan,
    }


# -- other losses (DESIGN 4.2) --------------------------------------------------------------------
def info_nce(
    pred: torch.Tensor,
    target: torch.Tensor,
    tau: float = 0.07,
    *,
    rank: int = 0,
    world_size: int = 1,
) -> torch.Tensor:
    """SCOUT's symmetric InfoNCE:
    ``-(1/2B) Σ_i [log softmax_j(ŷ_i·y_j/τ)_i + log softmax_j(ŷ_j·y_i/τ)_i]``.

    ``pred`` ``[B, d]`` are the predicted embeddings ŷ and ``target`` ``[B, d]`` the frozen text
    embeddings y, paired row by row; both are used as given (pass unit vectors). ``tau`` is the
    temperature (a float, or a positive scalar tensor when it is learned). Equal to open_clip's
    ``ClipLoss()(pred, target, 1/tau)``.
    """
    if world_size > 1:
        pred = gather_with_grad(pred, rank, world_size)                       # [B, d]
        target = gather_with_grad(target, rank, world_size)                   # [B, d]
    _check_embeddings(pred, target, ("pred", "target"), same_rows=True)
    tau = _scalar(tau, "tau", pred, positive=True)
    logits = pred @ target.T / tau                                            # [B, B]
    labels = torch.arange(logits.shape[0], device=logits.device)              # [B]
    return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels)) / 2


def siglip_loss(
    x: torch.Tensor,
    y: torch.Tensor,
    t: torch.Tensor,
    b: torch.Tensor,
    *,
    rank: int = 0,
    world_size: int = 1,
) -> torch.Tensor:
    """ActPair's SigLIP loss ``-(1/B) Σ_i Σ_j log σ(z_ij (t x_i·y_j + b))``, ``z_ii = 1`` and
    ``z_ij = -1`` otherwise.

    ``x`` ``[B, d]`` image (trajectory) and ``y`` ``[B, d]`` text embeddings paired row by row.
    ``t`` is the **scale** ``exp(t')`` (positive), not the learned logarithm ``t'``: a model keeps
    ``t'`` (initialised to ``log 10``) and passes ``t'.exp()``. ``b`` is the bias (initialised to
    ``-10``). Equal to open_clip's ``SigLipLoss()(x, y, t, b)``. Across ranks the pairs of the
    gathered batch are all scored and the sum is divided by the gathered batch size.
    """
    if world_size > 1:
        x = gather_with_grad(x, rank, world_size)                             # [B, d]
        y = gather_with_grad(y, rank, world_size)                             # [B, d]
    _check_embeddings(x, y, ("x", "y"), same_rows=True)
    t = _scalar(t, "t", x, positive=True)
    b = _scalar(b, "b", x, positive=False)
    logits = t * x @ y.T + b                                                  # [B, B]
    signs = 2 * torch.eye(x.shape[0], device=x.device, dtype=x.dtype) - 1    # [B, B]
    return -F.logsigmoid(signs * logits).sum() / x.shape[0]
