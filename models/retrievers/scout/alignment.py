"""Training-free alignment between frozen visual features and candidate frozen text spaces
(SCOUT, Sec. 5.2).

SCOUT predicts *into* a fixed text-embedding space, so how well a candidate text encoder's geometry
matches the frozen visual features decides how learnable the map is. Before any training run, the
paired features of a validation set are compared with three lenses:

- **mutual k-NN overlap** (the Platonic-representation measure): for every pair ``i`` the ``k``
  nearest neighbours of ``x_i`` among the other ``x`` and of ``y_i`` among the other ``y``
  (cosine similarity), and the mean fraction ``|N_X(i) ∩ N_Y(i)| / k``. The paper finds it the
  most robust of the three (it stays predictive where the other two fail), so it orders
  :attr:`AlignmentReport.ranking`;
- **linear CKA** (Kornblith et al. 2019) of the column-centred features,
  ``‖Y_cᵀ X_c‖²_F / (‖X_cᵀ X_c‖_F ‖Y_cᵀ Y_c‖_F)``;
- **ridge R²** of a closed-form ridge probe ``X → Y`` with an intercept (a linear stand-in for the
  predictor), scored on held-out folds: ``n_folds``-fold cross-validation, or the caller's own
  held-out test indices. R² is averaged uniformly over the output dimensions and over the folds
  (scikit-learn's ``Ridge(alpha).score`` on each fold).

``X`` is one vector per pair; the paper mean-pools the frozen patch tokens, here
:func:`pool_tokens` mean-pools a track's observation tokens. :func:`alignment_report` puts all
candidates side by side and ranks them; :func:`rank_agreement` checks a ranking against the
retrieval accuracy that the trained models later reach (Spearman ρ, as in the paper's Table 2).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

METRICS = ("mutual_knn", "cka", "ridge_r2")


def _matrix(values, name: str) -> torch.Tensor:
    """``values`` as a float64 2-D tensor on the CPU, or a ValueError naming ``name``."""
    t = torch.as_tensor(np.asarray(values) if not torch.is_tensor(values) else values.detach())
    t = t.to(device="cpu", dtype=torch.float64)
    if t.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array [N, d], got shape {list(t.shape)}")
    if t.shape[0] < 2 or t.shape[1] < 1:
        raise ValueError(f"{name} needs at least 2 rows and 1 column, got shape {list(t.shape)}")
    if not torch.isfinite(t).all():
        raise ValueError(f"{name} contains NaN or infinite values")
    return t


def _paired(X, Y) -> tuple[torch.Tensor, torch.Tensor]:
    x, y = _matrix(X, "X"), _matrix(Y, "Y")
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"X and Y must hold the same pairs: {x.shape[0]} rows against {y.shape[0]}")
    return x, y


def pool_tokens(tokens, mask=None) -> torch.Tensor:
    """Mean of each item's valid tokens: ``tokens [N, n, d]``, ``mask [N, n]`` (True = valid)
    → ``[N, d]`` float64. Every item needs at least one valid token."""
    t = torch.as_tensor(np.asarray(tokens) if not torch.is_tensor(tokens) else tokens.detach())
    t = t.to(dtype=torch.float64)
    if t.ndim != 3:
        raise ValueError(f"tokens must be [N, n, d], got shape {list(t.shape)}")
    if mask is None:
        return t.mean(dim=1)
    m = torch.as_tensor(np.asarray(mask) if not torch.is_tensor(mask) else mask).to(torch.bool)
    if m.shape != t.shape[:2]:
        raise ValueError(f"mask must be [N, n] = {list(t.shape[:2])}, got {list(m.shape)}")
    counts = m.sum(dim=1)                                                  # [N]
    if (counts == 0).any():
        raise ValueError(f"item {int(torch.nonzero(counts == 0)[0])} has no valid token")
    summed = (t * m.unsqueeze(-1)).sum(dim=1)                              # [N, d]
    return summed / counts.unsqueeze(-1)                                   # [N, d]


# -- mutual k-NN ----------------------------------------------------------------------------------
def knn_indices(Z: torch.Tensor, k: int) -> torch.Tensor:
    """The ``k`` nearest other rows of each row by cosine similarity ``[N, k]`` (self excluded)."""
    unit = Z / Z.norm(dim=1, keepdim=True).clamp_min(1e-12)               # [N, d]
    sim = unit @ unit.T                                                    # [N, N]
    sim.fill_diagonal_(-float("inf"))
    return sim.topk(k, dim=1).indices                                      # [N, k]


def mutual_knn(X, Y, k: int = 10) -> float:
    """Mean fraction of shared ``k`` nearest neighbours of each pair in X and in Y (in [0, 1])."""
    x, y = _paired(X, Y)
    n = x.shape[0]
    if not 1 <= k <= n - 1:
        raise ValueError(f"k must be in 1..{n - 1} for {n} pairs, got {k}")
    nx, ny = knn_indices(x, k), knn_indices(y, k)                         # [N, k], [N, k]
    in_x = torch.zeros(n, n, dtype=torch.bool)
    in_x.scatter_(1, nx, True)                                             # [N, N]
    shared = in_x.gather(1, ny).sum(dim=1)                                 # [N]
    return float(shared.double().mean() / k)


# -- linear CKA -----------------------------------------------------------------------------------
def linear_cka(X, Y) -> float:
    """Linear CKA of the column-centred features (in [0, 1]; 0 when either side is constant)."""
    x, y = _paired(X, Y)
    xc = x - x.mean(dim=0, keepdim=True)                                  # [N, dx]
    yc = y - y.mean(dim=0, keepdim=True)                                  # [N, dy]
    cross = (yc.T @ xc).square().sum()                                     # ‖Ycᵀ Xc‖²_F
    norm_x = (xc.T @ xc).norm()                                            # ‖Xcᵀ Xc‖_F
    norm_y = (yc.T @ yc).norm()                                            # ‖Ycᵀ Yc‖_F
    denom = norm_x * norm_y
    return float(cross / denom) if denom > 0 else 0.0


# -- ridge R² -------------------------------------------------------------------------------------
def kfold_test_indices(n: int, n_folds: int, seed: int = 0) -> list[np.ndarray]:
    """Test indices of ``n_folds`` folds over a seeded permutation of ``0..n-1`` (sizes differ
    by at most one)."""
    if not 2 <= n_folds <= n:
        raise ValueError(f"n_folds must be in 2..{n} for {n} pairs, got {n_folds}")
    order = np.random.default_rng(seed).permutation(n)
    return [np.sort(part) for part in np.array_split(order, n_folds)]


def ridge_fit(x: torch.Tensor, y: torch.Tensor, alpha: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Closed-form ridge with an unpenalised intercept: weights ``[dx, dy]`` and bias ``[dy]``.

    Solved in the primal ``(XcᵀXc + αI)⁻¹ XcᵀYc`` when there are more rows than features, else in
    the dual ``Xcᵀ (XcXcᵀ + αI)⁻¹ Yc`` (the same solution, the smaller system)."""
    mx, my = x.mean(dim=0), y.mean(dim=0)                                  # [dx], [dy]
    xc, yc = x - mx, y - my                                                # [n, dx], [n, dy]
    n, dx = xc.shape
    if n >= dx:
        gram = xc.T @ xc + alpha * torch.eye(dx, dtype=x.dtype)            # [dx, dx]
        w = torch.linalg.solve(gram, xc.T @ yc)                            # [dx, dy]
    else:
        gram = xc @ xc.T + alpha * torch.eye(n, dtype=x.dtype)             # [n, n]
        w = xc.T @ torch.linalg.solve(gram, yc)                            # [dx, dy]
    return w, my - mx @ w


def r2_uniform(y_true: torch.Tensor, y_pred: torch.Tensor) -> float:
    """R² per output dimension, averaged uniformly (a constant true column scores 1 when it is
    predicted exactly, else 0), as scikit-learn's ``r2_score``."""
    ss_res = (y_true - y_pred).square().sum(dim=0)                         # [dy]
    ss_tot = (y_true - y_true.mean(dim=0)).square().sum(dim=0)             # [dy]
    r2 = torch.where(ss_tot > 0, 1 - ss_res / ss_tot.clamp_min(1e-300),
                     (ss_res == 0).to(y_true.dtype))                       # [dy]
    return float(r2.mean())


def ridge_r2(X, Y, alpha: float = 1.0, n_folds: int = 5, seed: int = 0,
             folds: Sequence[Sequence[int]] | None = None) -> float:
    """Held-out R² of a ridge probe ``X → Y``, averaged over folds.

    ``folds`` are test-index lists (each fold trains on all the other rows); without them,
    :func:`kfold_test_indices` makes ``n_folds`` seeded folds. One test list is a single held-out
    split.
    """
    x, y = _paired(X, Y)
    n = x.shape[0]
    if alpha < 0:
        raise ValueError(f"alpha must be >= 0, got {alpha}")
    tests = kfold_test_indices(n, n_folds, seed) if folds is None else [np.asarray(f) for f in folds]
    if not tests:
        raise ValueError("folds is empty")
    scores = []
    for i, test in enumerate(tests):
        test = test.astype(np.int64)
        if test.ndim != 1 or len(test) < 2 or test.min() < 0 or test.max() >= n:
            raise ValueError(f"fold {i} must be at least 2 distinct row indices in 0..{n - 1}")
        train_mask = np.ones(n, dtype=bool)
        train_mask[test] = False
        if train_mask.sum() < 2:
            raise ValueError(f"fold {i} leaves fewer than 2 rows to fit on")
        tr, te = torch.from_numpy(np.flatnonzero(train_mask)), torch.from_numpy(test)
        w, b = ridge_fit(x[tr], y[tr], alpha)
        scores.append(r2_uniform(y[te], x[te] @ w + b))
    return float(np.mean(scores))


# -- report ---------------------------------------------------------------------------------------
@dataclass
class AlignmentReport:
    """The three alignment lenses for each candidate text space, and the rankings they give."""

    scores: dict[str, dict[str, float]]          # candidate name -> {metric: value}
    rankings: dict[str, list[str]]               # metric -> candidate names, most aligned first
    ranking: list[str]                           # by mutual k-NN, ties by CKA then ridge R²
    params: dict = field(default_factory=dict)   # k, alpha, folds, seed, normalisation, N

    def to_dict(self) -> dict:
        return asdict(self)


def _unit_rows(t: torch.Tensor) -> torch.Tensor:
    return t / t.norm(dim=1, keepdim=True).clamp_min(1e-12)


def alignment_report(X, candidates: Mapping[str, object], *, k: int = 10, alpha: float = 1.0,
                     n_folds: int = 5, seed: int = 0, normalize: bool = True) -> AlignmentReport:
    """Score every candidate text embedding ``Y [N, dy]`` against the frozen features ``X [N, dx]``
    and rank the candidates (most aligned first).

    With ``normalize`` (default) the rows of X and of each Y are scaled to unit length first, as
    the embeddings are used for retrieval, so one ridge ``alpha`` means the same for every
    candidate. Every candidate uses the same folds.
    """
    if not candidates:
        raise ValueError("candidates is empty: pass {name: Y} for at least one text encoder")
    x = _matrix(X, "X")
    x = _unit_rows(x) if normalize else x
    folds = kfold_test_indices(x.shape[0], n_folds, seed)
    scores: dict[str, dict[str, float]] = {}
    for name, Y in candidates.items():
        y = _matrix(Y, f"candidate {name!r}")
        if y.shape[0] != x.shape[0]:
            raise ValueError(f"candidate {name!r} has {y.shape[0]} rows, X has {x.shape[0]}")
        y = _unit_rows(y) if normalize else y
        scores[str(name)] = {
            "mutual_knn": mutual_knn(x, y, k=k),
            "cka": linear_cka(x, y),
            "ridge_r2": ridge_r2(x, y, alpha=alpha, folds=folds),
        }
    names = list(scores)
    rankings = {m: sorted(names, key=lambda c, m=m: -scores[c][m]) for m in METRICS}
    ranking = sorted(names, key=lambda c: tuple(-scores[c][m] for m in METRICS))
    params = {"k": k, "alpha": alpha, "n_folds": n_folds, "seed": seed, "normalize": normalize,
              "n_pairs": int(x.shape[0])}
    return AlignmentReport(scores=scores, rankings=rankings, ranking=ranking, params=params)


def rank_agreement(report: AlignmentReport, accuracy: Mapping[str, float]) -> dict[str, float]:
    """Spearman ρ between each metric's scores and the retrieval accuracy the candidates reached
    (e.g. val mAP@10 of a model trained against each), over the candidates in both."""
    from scipy.stats import spearmanr

    names = [c for c in report.scores if c in accuracy]
    if len(names) < 2:
        raise ValueError("rank_agreement needs at least two candidates with an accuracy")
    acc = [float(accuracy[c]) for c in names]
    out = {}
    for m in METRICS:
        rho = spearmanr([report.scores[c][m] for c in names], acc).statistic
        out[m] = float(rho)
    return out
