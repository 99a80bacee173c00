"""Alignment lenses against independent implementations (brute-force k-NN, the HSIC form of CKA,
scikit-learn's Ridge) and a ranking that is known by construction."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.linear_model import Ridge
from sklearn.model_selection import KFold, cross_val_score

from models.retrievers.scout.alignment import (
    alignment_report,
    kfold_test_indices,
    linear_cka,
    mutual_knn,
    pool_tokens,
    rank_agreement,
    ridge_r2,
)


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


def brute_force_mutual_knn(X: np.ndarray, Y: np.ndarray, k: int) -> float:
    def neighbours(Z, i):
        unit = Z / np.linalg.norm(Z, axis=1, keepdims=True)
        sims = [(float(unit[i] @ unit[j]), j) for j in range(len(Z)) if j != i]
        sims.sort(key=lambda s: -s[0])
        return {j for _, j in sims[:k]}

    return float(np.mean([len(neighbours(X, i) & neighbours(Y, i)) / k for i in range(len(X))]))


def hsic_cka(X: np.ndarray, Y: np.ndarray) -> float:
    """CKA written literally: HSIC(K, L) / sqrt(HSIC(K, K) HSIC(L, L)), K = XXᵀ, L = YYᵀ."""
    n = len(X)
    H = np.eye(n) - np.ones((n, n)) / n
    K, L = X @ X.T, Y @ Y.T

    def hsic(A, B):
        return np.trace(A @ H @ B @ H) / (n - 1) ** 2

    return float(hsic(K, L) / np.sqrt(hsic(K, K) * hsic(L, L)))


def test_mutual_knn_matches_brute_force():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 6))
    Y = X @ rng.normal(size=(6, 5)) + 0.8 * rng.normal(size=(40, 5))
    for k in (1, 3, 7):
        assert mutual_knn(X, Y, k=k) == pytest.approx(brute_force_mutual_knn(X, Y, k), abs=1e-12)
    assert mutual_knn(X, X, k=5) == 1.0


def test_linear_cka_matches_hsic_formula_and_invariances():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(30, 8))
    Y = np.tanh(X[:, :5] @ rng.normal(size=(5, 12))) + 0.3 * rng.normal(size=(30, 12))
    value = linear_cka(X, Y)
    assert value == pytest.approx(hsic_cka(X, Y), rel=1e-10)
    assert 0.0 < value < 1.0
    Q, _ = np.linalg.qr(rng.normal(size=(12, 12)))                 # orthogonal map, isotropic scale
    assert linear_cka(X, 3.0 * Y @ Q + 5.0) == pytest.approx(value, rel=1e-10)
    assert linear_cka(X, X) == pytest.approx(1.0)


def test_ridge_r2_matches_sklearn_cross_validation():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(60, 7))
    Y = X @ rng.normal(size=(7, 4)) + rng.normal(size=(60, 4)) + 2.0
    splitter = KFold(n_splits=5, shuffle=True, random_state=3)
    folds = [test for _, test in splitter.split(X)]
    expected = cross_val_score(Ridge(alpha=2.5), X, Y, cv=splitter).mean()
    assert ridge_r2(X, Y, alpha=2.5, folds=folds) == pytest.approx(expected, rel=1e-9)
    # more features than training rows: the dual form, still the same solution
    Xw = rng.normal(size=(20, 50))
    Yw = Xw[:, :3] @ rng.normal(size=(3, 2)) + 0.1 * rng.normal(size=(20, 2))
    test = np.arange(15, 20)
    fit = Ridge(alpha=0.7).fit(Xw[:15], Yw[:15])
    assert ridge_r2(Xw, Yw, alpha=0.7, folds=[test]) == pytest.approx(fit.score(Xw[15:], Yw[15:]), rel=1e-8)


def test_kfold_indices_partition_the_rows():
    folds = kfold_test_indices(23, 4, seed=5)
    assert sorted(np.concatenate(folds).tolist()) == list(range(23))
    assert sorted(len(f) for f in folds) == [5, 6, 6, 6]
    assert [f.tolist() for f in folds] == [f.tolist() for f in kfold_test_indices(23, 4, seed=5)]


def test_report_ranks_candidates_in_the_known_order():
    # given frozen features X and three text spaces: a noisy linear image of X, a noisier one, and
    # one unrelated to X
    rng = np.random.default_rng(4)
    n, dx, dy = 200, 16, 12
    X = rng.normal(size=(n, dx))
    A = rng.normal(size=(dx, dy))
    candidates = {
        "unrelated": rng.normal(size=(n, dy)),
        "close": X @ A + 0.5 * rng.normal(size=(n, dy)),
        "far": X @ A + 3.0 * rng.normal(size=(n, dy)),
    }
    # when they are scored
    report = alignment_report(X, candidates, k=10, alpha=1.0)
    # then every lens orders them close > far > unrelated
    for metric in ("mutual_knn", "cka", "ridge_r2"):
        assert report.rankings[metric] == ["close", "far", "unrelated"], (metric, report.scores)
    assert report.ranking == ["close", "far", "unrelated"]
    assert report.scores["unrelated"]["ridge_r2"] < 0.05
    rho = rank_agreement(report, {"close": 80.0, "far": 60.0, "unrelated": 10.0})
    assert rho == {"mutual_knn": 1.0, "cka": 1.0, "ridge_r2": 1.0}
    assert rank_agreement(report, {"close": 10.0, "far": 60.0, "unrelated": 80.0})["cka"] == -1.0
    assert report.to_dict()["params"]["n_pairs"] == n


def test_pool_tokens_uses_valid_tokens_only():
    tokens = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]])
    mask = torch.tensor([[True, True, False]])
    assert pool_tokens(tokens, mask).tolist() == [[2.0, 3.0]]
    with pytest.raises(ValueError, match="no valid token"):
        pool_tokens(tokens, torch.zeros(1, 3, dtype=torch.bool))


def test_bad_arguments_are_rejected():
    X = np.zeros((5, 3))
    with pytest.raises(ValueError, match="same pairs"):
        linear_cka(X, np.zeros((4, 3)))
    with pytest.raises(ValueError, match="k must be"):
        mutual_knn(np.eye(5), np.eye(5), k=5)
    with pytest.raises(ValueError, match="NaN"):
        linear_cka(np.full((5, 3), np.nan), X)
    with pytest.raises(ValueError, match="empty"):
        alignment_report(X, {})
    with pytest.raises(ValueError, match="n_folds"):
        ridge_r2(np.eye(5), np.eye(5), n_folds=1)
