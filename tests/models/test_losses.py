"""The losses of DESIGN 4.1 / 4.2 against independent implementations: the plain-loop reference of
the mask-guided loss (values and gradients), a hand-computed example, and open_clip's ClipLoss and
SigLipLoss."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from open_clip.loss import ClipLoss, SigLipLoss

from models.training.losses import (
    info_nce,
    mask_guided_loss,
    mask_guided_loss_reference,
    siglip_loss,
)

torch.set_num_threads(1)
KEYS = ("loss", "group", "t2v", "v2t")


def random_batch(seed: int, n_rows: int, n_cols: int, p_unknown: float, p_match: float,
                 n_dup: int, d: int = 5) -> tuple[torch.Tensor, ...]:
    """A consistent random batch: relations M, group labels G (a group positive is a match, a group
    negative is not, a group row with a 0 has a 1), with ``n_dup`` record columns repeated."""
    rng = np.random.default_rng(seed)
    m = np.where(rng.random((n_rows, n_cols)) < p_match, 1, 0)
    m[rng.random((n_rows, n_cols)) < p_unknown] = -1
    g = np.where(m == 1, 1, 0)
    g[rng.random((n_rows, n_cols)) < p_unknown] = -1
    g[(g == 0).any(axis=1) & ~(g == 1).any(axis=1)] = -1    # groups with a 0 need a 1
    q = rng.normal(size=(n_rows, d))
    v = rng.normal(size=(n_cols, d))
    if n_dup:
        dup = rng.integers(0, n_cols, n_dup)
        v = np.concatenate([v, v[dup]])
        m = np.concatenate([m, m[:, dup]], axis=1)
        g = np.concatenate([g, g[:, dup]], axis=1)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    as_t = lambda a: torch.tensor(a, dtype=torch.float64, requires_grad=True)  # noqa: E731
    return as_t(q), as_t(v), torch.tensor(g), torch.tensor(m)


def value_and_grads(fn, q, v, g, m, scale):
    q = q.detach().clone().requires_grad_(True)
    v = v.detach().clone().requires_grad_(True)
    s = scale.detach().clone().requires_grad_(True)
    out = fn(q, v, g, m, s, lambda_g=0.3, lambda_bi=0.8)
    # a loss with nothing to score is a constant in the reference: add a zero that reaches every input
    (out["loss"] + 0 * (q.sum() + v.sum() + s)).backward()
    return out, q.grad, v.grad, s.grad


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**31), n_rows=st.integers(1, 6), n_cols=st.integers(1, 8),
       p_unknown=st.sampled_from([0.0, 0.3, 0.7]), p_match=st.sampled_from([0.1, 0.4, 0.9]),
       n_dup=st.integers(0, 3), scale=st.floats(0.5, 30.0))
def test_mask_guided_loss_equals_loop_reference(seed, n_rows, n_cols, p_unknown, p_match, n_dup, scale):
    q, v, g, m = random_batch(seed, n_rows, n_cols, p_unknown, p_match, n_dup)
    scale = torch.tensor(scale, dtype=torch.float64)
    fast, fq, fv, fs = value_and_grads(mask_guided_loss, q, v, g, m, scale)
    slow, sq, sv, ss = value_and_grads(mask_guided_loss_reference, q, v, g, m, scale)
    for key in KEYS:
        assert torch.allclose(fast[key], slow[key], rtol=1e-10, atol=1e-12), key
    for key in ("zero_neg_row_rate", "zero_neg_col_rate"):
        a, b = fast[key], slow[key]
        assert (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b), key
    assert torch.allclose(fq, sq, rtol=1e-9, atol=1e-12)
    assert torch.allclose(fv, sv, rtol=1e-9, atol=1e-12)
    assert torch.allclose(fs, ss, rtol=1e-9, atol=1e-12)


def test_hand_computed_example():
    # given scores S = q vᵀ with v = I (scale 1), so S is q itself
    scores = torch.tensor([[2.0, 1.0, 0.0], [0.5, 3.0, -1.0]], dtype=torch.float64)
    group = torch.tensor([[1, 0, -1], [-1, -1, -1]])
    relation = torch.tensor([[1, 0, -1], [-1, 1, 0]])
    out = mask_guided_loss(scores, torch.eye(3, dtype=torch.float64), group, relation,
                           torch.tensor(1.0, dtype=torch.float64))
    # P⁺ = {0, 1}; record 2 is a mismatch of row 1 outside P⁺ and acts nowhere
    l_group = math.log(1 + math.exp(-1))                    # row 0 only: e^1 / e^2
    l_t2v = (math.log(1 + math.exp(-1)) + 0.0) / 2          # row 1 has no 0 inside P⁺
    l_v2t = (0.0 + math.log(1 + math.exp(1 - 3))) / 2       # column 0 has no 0
    assert out["group"].item() == pytest.approx(l_group, rel=1e-12)
    assert out["t2v"].item() == pytest.approx(l_t2v, rel=1e-12)
    assert out["v2t"].item() == pytest.approx(l_v2t, rel=1e-12)
    assert out["loss"].item() == pytest.approx(0.1 * l_group + 0.5 * (l_t2v + l_v2t), rel=1e-12)
    assert out["zero_neg_row_rate"] == 0.5
    assert out["zero_neg_col_rate"] == 0.5


def test_zero_negative_rates_by_hand():
    # rows 0..3: row 0 has a 1 and a 0 in P⁺; row 1 a 1 only; row 2 no 1 (not counted); row 3 a 1
    # and a 0 on record 3, which is outside P⁺ (so it counts as a row without negative)
    relation = torch.tensor([[1, 0, -1, -1],
                             [-1, 1, -1, -1],
                             [0, 0, -1, 0],
                             [-1, -1, 1, 0]])
    group = torch.full((4, 4), -1)
    out = mask_guided_loss(torch.randn(4, 3, dtype=torch.float64), torch.randn(4, 3, dtype=torch.float64),
                           group, relation, torch.tensor(5.0, dtype=torch.float64))
    assert out["zero_neg_row_rate"] == pytest.approx(2 / 3)
    # columns in P⁺: 0 (0s in rows 0... no: row 2 has 0 → negative), 1 (0s in rows 0, 2), 2 (none)
    assert out["zero_neg_col_rate"] == pytest.approx(1 / 3)
    assert out["group"].item() == 0.0


def test_unknown_pairs_get_exactly_zero_gradient_and_do_not_move_the_loss():
    torch.manual_seed(0)
    _, _, g, m = random_batch(7, 6, 9, p_unknown=0.5, p_match=0.4, n_dup=2, d=5)
    scores = (torch.randn(g.shape, dtype=torch.float64) * 3).requires_grad_(True)
    eye = torch.eye(g.shape[1], dtype=torch.float64)
    out = mask_guided_loss(scores, eye, g, m, torch.tensor(1.0, dtype=torch.float64))
    out["loss"].backward()
    # an entry acts when it is labelled in G, or labelled in M inside a P⁺ column
    in_p_plus = (m == 1).any(dim=0, keepdim=True)
    inert = (g == -1) & ((m == -1) | ~in_p_plus)
    assert inert.any() and (~inert).any()
    assert torch.equal(scores.grad[inert], torch.zeros(int(inert.sum()), dtype=torch.float64))
    # when: the inert scores are perturbed by large amounts; then: the loss does not move at all
    perturbed = scores.detach().clone()
    perturbed[inert] += torch.randn(int(inert.sum()), dtype=torch.float64) * 50
    again = mask_guided_loss(perturbed, eye, g, m, torch.tensor(1.0, dtype=torch.float64))
    for key in KEYS:
        assert torch.equal(again[key], out[key].detach()), key


def test_duplicate_records_count_with_multiplicity():
    # given: record 1 appears twice (columns 1 and 2); it is query 0's negative and query 1's match
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    v = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]], dtype=torch.float64)
    group = torch.tensor([[1, 0, 0], [-1, 1, 1]])
    relation = torch.tensor([[1, 0, 0], [-1, 1, 1]])
    out = mask_guided_loss(q, v, group, relation, torch.tensor(2.0, dtype=torch.float64))
    # then: the repeated negative weighs twice in Z⁻ of query 0
    expected = math.log(1 + 2 * math.exp(0.0) / math.exp(2.0))
    assert out["group"].item() == pytest.approx(expected, rel=1e-12)
    assert out["t2v"].item() == pytest.approx(expected / 2, rel=1e-12)      # row 1 has no 0
    # columns 1 and 2 each see positive e^2 (query 1) against negative e^0 (query 0)
    column = math.log(1 + math.exp(0.0) / math.exp(2.0))
    assert out["v2t"].item() == pytest.approx(2 * column / 3, rel=1e-12)    # column 0 has no 0
    assert out["zero_neg_col_rate"] == pytest.approx(1 / 3)


def test_groups_without_negatives_and_no_relations_give_zero_terms():
    q, v = torch.randn(3, 4), torch.randn(5, 4)
    out = mask_guided_loss(q, v, torch.full((3, 5), -1), torch.full((3, 5), -1), torch.tensor(20.0))
    assert out["loss"].item() == 0.0
    assert math.isnan(out["zero_neg_row_rate"]) and math.isnan(out["zero_neg_col_rate"])


def test_a_row_without_group_members_is_left_out_of_the_group_mean_and_still_feeds_the_batch_terms():
    # given: row 0 a full group (positives 0-1, negative 2); row 1 an L_bi-only row (no group label)
    # whose own target (column 3) and its noisy variant (column 4) match it, and which also matches
    # column 0 and is a verified mismatch of column 1
    torch.manual_seed(0)
    q = torch.nn.functional.normalize(torch.randn(2, 4, dtype=torch.float64), dim=1).requires_grad_(True)
    v = torch.nn.functional.normalize(torch.randn(5, 4, dtype=torch.float64), dim=1).requires_grad_(True)
    group = torch.tensor([[1, 1, 0, -1, -1], [-1, -1, -1, -1, -1]])
    relation = torch.tensor([[1, 1, 0, -1, -1], [1, 0, -1, 1, 1]])
    scale = torch.tensor(5.0, dtype=torch.float64)
    out = mask_guided_loss(q, v, group, relation, scale)
    ref = mask_guided_loss_reference(q, v, group, relation, scale)
    alone = mask_guided_loss(q[:1], v, group[:1], relation[:1], scale)
    # then: L_group is row 0's term alone (row 1 neither adds nor counts), everything finite
    assert all(torch.isfinite(out[k]) for k in KEYS)
    assert out["group"].item() == pytest.approx(alone["group"].item(), rel=1e-12)
    s = (scale * q @ v.T).detach()
    row0 = math.log(1 + math.exp(s[0, 2]) / (math.exp(s[0, 0]) + math.exp(s[0, 1])))
    assert out["group"].item() == pytest.approx(row0, rel=1e-12)
    # ... while row 1 is a t2v row (it has its positives and a 0 in P+) and its columns are in P+
    assert out["t2v"].item() > 0 and out["zero_neg_row_rate"] == pytest.approx(0.5)
    for key in KEYS:
        assert out[key].item() == pytest.approx(float(torch.as_tensor(ref[key]).detach()), rel=1e-10), key
    out["loss"].backward()
    assert torch.isfinite(q.grad).all() and torch.isfinite(v.grad).all()
    # a batch of L_bi-only rows only: L_group is exactly 0 and the loss stays finite
    only = mask_guided_loss(q.detach(), v.detach(), torch.full((2, 5), -1), relation, scale)
    assert only["group"].item() == 0.0 and torch.isfinite(only["loss"])


def test_large_scale_in_float32_is_finite_and_matches_float64():
    q, v, g, m = random_batch(3, 8, 12, p_unknown=0.3, p_match=0.3, n_dup=2, d=16)
    scale = torch.tensor(100.0)
    out32 = mask_guided_loss(q.detach().float(), v.detach().float(), g, m, scale)
    out64 = mask_guided_loss(q.detach(), v.detach(), g, m, scale.double())
    assert torch.isfinite(out32["loss"])
    assert out32["loss"].item() == pytest.approx(out64["loss"].item(), rel=1e-4, abs=1e-4)


@pytest.mark.parametrize("change, message", [
    (lambda g, m: (g.float(), m), "integer"),
    (lambda g, m: (g == 1, m), "integer"),
    (lambda g, m: (g, m[:, :-1]), "shape"),
    (lambda g, m: (g, torch.where(m == 0, 2, m)), "outside"),
    (lambda g, m: (torch.where(m == 1, 1, g), torch.where(m == 1, -1, m)), "verified match"),
    (lambda g, m: (torch.where(m == 1, 0, g), m), "cannot be a verified match"),
])
def test_bad_labels_are_rejected(change, message):
    q, v, g, m = random_batch(1, 4, 6, p_unknown=0.2, p_match=0.5, n_dup=0)
    g, m = change(g, m)
    with pytest.raises(ValueError, match=message):
        mask_guided_loss(q, v, g, m, torch.tensor(10.0))


def test_bad_arguments_are_rejected():
    q, v, g, m = random_batch(1, 4, 6, p_unknown=0.2, p_match=0.5, n_dup=0)
    with pytest.raises(ValueError, match="positive"):
        mask_guided_loss(q, v, g, m, torch.tensor(-1.0))
    with pytest.raises(ValueError, match="widths"):
        mask_guided_loss(q, v[:, :3], g, m, torch.tensor(10.0))
    with pytest.raises(ValueError, match="no positive"):
        mask_guided_loss(q, v, torch.tensor([[0] * 6] + [[-1] * 6] * 3), m * 0 - 1, torch.tensor(10.0))
    with pytest.raises(ValueError, match="lambda_g"):
        mask_guided_loss(q, v, g, m, torch.tensor(10.0), lambda_g=-0.1)


def unit(n: int, d: int, seed: int) -> torch.Tensor:
    x = torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return torch.nn.functional.normalize(x, dim=1).requires_grad_(True)


@pytest.mark.parametrize("n, d, tau", [(1, 4, 0.07), (7, 16, 0.07), (32, 8, 0.5)])
def test_info_nce_equals_open_clip_clip_loss(n, d, tau):
    a, b = unit(n, d, 1), unit(n, d, 2)
    ours = info_nce(a, b, tau)
    ours.backward()
    ga, gb = a.grad.clone(), b.grad.clone()
    a.grad, b.grad = None, None
    theirs = ClipLoss()(a, b, torch.tensor(1 / tau, dtype=torch.float64))
    theirs.backward()
    assert torch.allclose(ours, theirs, rtol=1e-12)
    assert torch.allclose(ga, a.grad, rtol=1e-9, atol=1e-12) and torch.allclose(gb, b.grad, rtol=1e-9, atol=1e-12)
    # and the literal formula of DESIGN 4.2
    s = (a @ b.T / tau).detach()
    literal = -(torch.log_softmax(s, 1).diagonal() + torch.log_softmax(s.T, 1).diagonal()).sum() / (2 * n)
    assert torch.allclose(ours.detach(), literal, rtol=1e-12)


@pytest.mark.parametrize("n, d, t, bias", [(1, 4, 10.0, -10.0), (9, 16, 10.0, -10.0), (24, 8, 3.0, 1.5)])
def test_siglip_loss_equals_open_clip_siglip_loss(n, d, t, bias):
    x, y = unit(n, d, 3), unit(n, d, 4)
    t_, b_ = torch.tensor(t, dtype=torch.float64), torch.tensor(bias, dtype=torch.float64)
    ours = siglip_loss(x, y, t_, b_)
    theirs = SigLipLoss()(x, y, t_, b_)
    assert torch.allclose(ours, theirs, rtol=1e-12)
    # gradient with respect to the learned log-scale t' flows through t = exp(t')
    log_t = torch.tensor(math.log(t), dtype=torch.float64, requires_grad=True)
    siglip_loss(x, y, log_t.exp(), b_).backward()
    log_t2 = log_t.detach().clone().requires_grad_(True)
    SigLipLoss()(x, y, log_t2.exp(), b_).backward()
    assert torch.allclose(log_t.grad, log_t2.grad, rtol=1e-10)


def test_siglip_and_info_nce_reject_bad_arguments():
    x, y = unit(4, 8, 5), unit(3, 8, 6)
    with pytest.raises(ValueError, match="row by row"):
        siglip_loss(x, y, torch.tensor(10.0), torch.tensor(-10.0))
    with pytest.raises(ValueError, match="scale"):
        siglip_loss(x, unit(4, 8, 6), torch.tensor(-2.3), torch.tensor(-10.0))
    with pytest.raises(ValueError, match="row by row"):
        info_nce(x, y)
    with pytest.raises(ValueError, match="positive"):
        info_nce(x, unit(4, 8, 6), tau=0.0)
