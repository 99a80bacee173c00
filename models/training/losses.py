"""Contrastive losses of the three retrievers (no Django): DESIGN 4.1 and 4.2 are the contract.

- ``mask_guided_loss``: VTrajEmbed's mask-guided contrastive loss with unknown (⊥) relations,
  vectorised with masked log-sum-exp; ``mask_guided_loss_reference`` is the same loss written as
  a plain Python loop over rows and columns (the tests and ``bench_losses`` compare the two).
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


def _mean_over(terms: torch.Tensor, counted: torch.Tensor) -> torch.Tensor:
    """Mean of ``terms`` over the ``counted`` entries; 0 (with a graph) when none counts."""
    n = counted.sum()
    return (terms * counted).sum() / n.clamp(min=1)


def _rate(flags: torch.Tensor, counted: torch.Tensor) -> float:
    n = int(counted.sum())
    return float((flags & counted).sum()) / n if n else math.nan


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
    negative is not a match in M, and a group row with a 0 has a 1.

    With ``world_size > 1``, ``q`` and ``v`` are this rank's rows, gathered across ranks here, and
    ``group`` / ``relation`` must describe the *gathered* batch (``[ΣB_r, ΣP_r]``, rank-major),
    the same on every rank.
    """
    q = gather_with_grad(q, rank, world_size) if world_size > 1 else q       # [B, d]
    v = gather_with_grad(v, rank, world_size) if world_size > 1 else v       # [P, d]
    scale = _check_mask_guided(q, v, group, relation, logit_scale, lambda_g, lambda_bi)
    scores = scale * q @ v.T                                                  # [B, P]

    g_pos, g_neg = group == POSITIVE, group == NEGATIVE                       # [B, P]
    group_rows = g_neg.any(dim=1)                                             # [B]
    group_terms = _masked_term(scores, g_pos, g_neg, dim=1)                   # [B]
    l_group = _mean_over(group_terms, group_rows)

    m_pos = relation == POSITIVE                                              # [B, P]
    in_p_plus = m_pos.any(dim=0, keepdim=True)                                # [1, P]
    b_pos, b_neg = m_pos & in_p_plus, (relation == NEGATIVE) & in_p_plus      # [B, P]
    rows = b_pos.any(dim=1)                                                   # [B]
    cols = in_p_plus.squeeze(0)                                               # [P]
    l_t2v = _mean_over(_masked_term(scores, b_pos, b_neg, dim=1), rows)
    l_v2t = _mean_over(_masked_term(scores, b_pos, b_neg, dim=0), cols)

    loss = lambda_g * l_group + (lambda_bi / 2) * (l_t2v + l_v2t)
    return {
        "loss": loss,
        "group": l_group,
        "t2v": l_t2v,
        "v2t": l_v2t,
        "zero_neg_row_rate": _rate(~b_neg.any(dim=1), rows),
        "zero_neg_col_rate": _rate(~b_neg.any(dim=0), cols),
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
