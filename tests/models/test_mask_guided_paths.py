"""``mask_guided_loss`` against the plain-loop ``mask_guided_loss_reference`` on random batches,
through each of its paths: one exponential of the scores shared by every line, computed with NumPy
(small CPU batches) or with torch (everything else), and one masked log-sum-exp per line kind
(taken when a line's positives sit too far below the top score for the shared exponential). Also
the refusals of bad input, which must name the same problem as the reference's checks, in the same
order."""
from __future__ import annotations

import math
from contextlib import contextmanager

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from models.training import losses
from models.training.losses import mask_guided_loss, mask_guided_loss_reference

torch.set_num_threads(1)
KEYS = ("loss", "group", "t2v", "v2t")
RATES = ("zero_neg_row_rate", "zero_neg_col_rate")


def labelled_batch(seed: int, n_rows: int, n_cols: int, p_unknown: float, p_match: float,
                   n_bare: int, n_unmatched: int, d: int = 5) -> tuple[torch.Tensor, ...]:
    """Unit embeddings and consistent labels, with ``n_bare`` rows all ⊥ in both G and M and
    ``n_unmatched`` rows without a match in M (so without a group either)."""
    rng = np.random.default_rng(seed)
    m = np.where(rng.random((n_rows, n_cols)) < p_match, 1, 0)
    m[rng.random((n_rows, n_cols)) < p_unknown] = -1
    picked = rng.permutation(n_rows)
    bare, unmatched = picked[:n_bare], picked[n_bare: n_bare + n_unmatched]
    m[bare] = -1
    m[unmatched] = np.where(m[unmatched] == 1, 0, m[unmatched])
    g = np.where(m == 1, 1, 0)
    g[rng.random((n_rows, n_cols)) < p_unknown] = -1
    g[(g == 0).any(axis=1) & ~(g == 1).any(axis=1)] = -1      # a group with a 0 needs a 1
    q = rng.normal(size=(n_rows, d))
    v = rng.normal(size=(n_cols, d))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return (torch.tensor(q), torch.tensor(v), torch.tensor(g), torch.tensor(m))


def run(fn, q, v, g, m, scale, **weights):
    """Values and gradients (q, v, scale) of one loss function on fresh leaves."""
    q = q.detach().clone().requires_grad_(True)
    v = v.detach().clone().requires_grad_(True)
    s = torch.as_tensor(scale, dtype=q.dtype).detach().clone().requires_grad_(True)
    out = fn(q, v, g, m, s, **weights)
    # a loss with nothing to score is a constant in the reference: add a zero that reaches every input
    (out["loss"] + 0 * (q.sum() + v.sum() + s)).backward()
    return out, (q.grad, v.grad, s.grad)


PATHS = ["numpy", "torch", "masked"]


@contextmanager
def taking(path: str):
    """Within it, ``mask_guided_loss`` takes ``path``: the shared exponential in NumPy (what these
    small batches take anyway) or in torch, or the masked log-sum-exp (no line is accepted by the
    shared exponential)."""
    with pytest.MonkeyPatch.context() as patch:
        if path == "torch":
            patch.setattr(losses, "_NUMPY_MAX_SCORES", 0)
        if path == "masked":
            patch.setattr(losses, "_shared_exp_floor", lambda dtype: math.inf)
        yield


def path_of(out: dict) -> str:
    """Which path computed ``out``: the shared-exponential function or a weighted sum of the masked
    log-sum-exps."""
    return "shared" if type(out["loss"].grad_fn).__name__ == "_SharedExpLossBackward" else "masked"


def expected_path(path: str) -> str:
    return "masked" if path == "masked" else "shared"


def assert_same(fast: dict, fast_grads, slow: dict, slow_grads, rtol: float = 1e-10) -> None:
    for key in KEYS:
        assert torch.allclose(fast[key], torch.as_tensor(slow[key], dtype=fast[key].dtype),
                              rtol=rtol, atol=1e-12), key
    for key in RATES:
        a, b = fast[key], slow[key]
        assert (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-15), key
    for a, b in zip(fast_grads, slow_grads):
        assert torch.allclose(a, b, rtol=100 * rtol, atol=1e-12)


@pytest.mark.parametrize("path", PATHS)
@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31), n_rows=st.integers(1, 7), n_cols=st.integers(1, 9),
       p_unknown=st.sampled_from([0.0, 0.4, 0.8, 1.0]), p_match=st.sampled_from([0.1, 0.5, 0.9]),
       n_bare=st.integers(0, 2), n_unmatched=st.integers(0, 2), scale=st.floats(0.5, 40.0))
def test_both_paths_equal_the_loop_on_random_batches(path, seed, n_rows, n_cols, p_unknown, p_match,
                                                     n_bare, n_unmatched, scale):
    q, v, g, m = labelled_batch(seed, n_rows, n_cols, p_unknown, p_match, n_bare, n_unmatched)
    with taking(path):
        fast, fast_grads = run(mask_guided_loss, q, v, g, m, scale, lambda_g=0.3, lambda_bi=0.8)
    slow, slow_grads = run(mask_guided_loss_reference, q, v, g, m, scale, lambda_g=0.3, lambda_bi=0.8)
    assert_same(fast, fast_grads, slow, slow_grads)
    # with no line that has a positive and a negative there is nothing for the masked path to do
    some_line_scores = bool((g == 0).any() or ((m == 0) & (m == 1).any(dim=0)).any())
    assert path_of(fast) == (expected_path(path) if some_line_scores else "shared")


def test_the_full_group_layout_of_the_benchmark_takes_the_shared_path_and_equals_the_loop():
    rng = np.random.default_rng(5)
    n_groups = 6
    own = (np.arange(4 * n_groups) // 4)[None, :] == np.arange(n_groups)[:, None]          # [B, P]
    group = np.where(own, np.where(np.arange(4 * n_groups)[None, :] % 4 < 3, 1, 0), -1)
    cross = rng.choice([1, 0, -1], size=group.shape, p=[0.1, 0.2, 0.7])
    relation = np.where(own, group, cross)
    q = torch.nn.functional.normalize(torch.tensor(rng.normal(size=(n_groups, 8))), dim=1)
    v = torch.nn.functional.normalize(torch.tensor(rng.normal(size=(4 * n_groups, 8))), dim=1)
    g, m = torch.tensor(group), torch.tensor(relation)
    fast, fast_grads = run(mask_guided_loss, q, v, g, m, 20.0)
    slow, slow_grads = run(mask_guided_loss_reference, q, v, g, m, 20.0)
    assert path_of(fast) == "shared"
    assert_same(fast, fast_grads, slow, slow_grads)


def far_below_batch() -> tuple[torch.Tensor, ...]:
    """Scores given directly (``v = I``, scale 1): row 0's group scores near 10, row 1's matches
    and its mismatch (inside P⁺) about 95 below them, row 2 in between."""
    scores = torch.tensor([[10.0, 9.0, 8.5, -1.0],
                           [-85.0, -86.0, -84.0, -85.5],
                           [0.0, -3.0, 1.0, 2.0]], dtype=torch.float64)
    group = torch.tensor([[1, 1, 0, -1], [-1, -1, -1, -1], [-1, -1, -1, -1]])
    relation = torch.tensor([[1, 1, 0, -1], [0, 1, -1, -1], [0, 1, -1, 0]])
    return scores, torch.eye(4, dtype=torch.float64), group, relation


def test_a_line_far_below_the_top_score_takes_the_masked_path_in_float32_and_keeps_its_values():
    scores, eye, g, m = far_below_batch()
    out32, grads32 = run(mask_guided_loss, scores.float(), eye.float(), g, m, 1.0)
    out64, grads64 = run(mask_guided_loss, scores, eye, g, m, 1.0)
    ref, ref_grads = run(mask_guided_loss_reference, scores, eye, g, m, 1.0)
    # float32 cannot hold row 1's e^-95 in the normal range; float64 can
    assert path_of(out32) == "masked" and path_of(out64) == "shared"
    assert_same(out64, grads64, ref, ref_grads)
    for key in KEYS:
        assert out32[key].item() == pytest.approx(ref[key].item(), rel=1e-5, abs=1e-5), key
    for a, b in zip(grads32, ref_grads):
        assert torch.allclose(a.double(), b, rtol=1e-4, atol=1e-5)


def test_a_line_far_below_the_top_score_takes_the_masked_path_in_float64_too():
    scores, eye, g, m = far_below_batch()
    scores = torch.where(scores < -50, scores - 620, scores)    # row 1 about 715 below the top
    out, grads = run(mask_guided_loss, scores, eye, g, m, 1.0)
    ref, ref_grads = run(mask_guided_loss_reference, scores, eye, g, m, 1.0)
    assert path_of(out) == "masked"
    assert_same(out, grads, ref, ref_grads)


@pytest.mark.parametrize("path", PATHS)
def test_gradients_match_finite_differences(path):
    q, v, g, m = labelled_batch(11, 5, 7, p_unknown=0.3, p_match=0.4, n_bare=1, n_unmatched=1, d=4)
    q, v = q.requires_grad_(True), v.requires_grad_(True)
    scale = torch.tensor(3.0, dtype=torch.float64, requires_grad=True)
    with taking(path):
        assert torch.autograd.gradcheck(
            lambda a, b, s: tuple(mask_guided_loss(a, b, g, m, s)[key] for key in KEYS), (q, v, scale))


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.uint8])
def test_narrow_integer_labels_give_the_same_loss(dtype):
    # uint8 stores -1 as 255, which torch's comparisons (and so the checks) take for -1
    q, v, g, m = labelled_batch(3, 6, 9, p_unknown=0.3, p_match=0.4, n_bare=1, n_unmatched=1)
    wide, wide_grads = run(mask_guided_loss, q, v, g, m, 7.0)
    narrow, narrow_grads = run(mask_guided_loss, q, v, g.to(dtype), m.to(dtype), 7.0)
    for key in KEYS:
        assert torch.equal(wide[key], narrow[key]), key
    for a, b in zip(wide_grads, narrow_grads):
        assert torch.equal(a, b)


def bad_inputs():
    """(name, change) pairs; each change maps a good batch (q, v, g, m, scale, weights) to a bad one,
    several with more than one fault so that the order of the checks shows."""
    def labels(f):
        return lambda q, v, g, m, s, w: (q, v, *f(g, m), s, w)

    def scale(value):
        return lambda q, v, g, m, s, w: (q, v, g, m, value, w)

    return [
        ("float group", labels(lambda g, m: (g.double(), m))),
        ("bool relation", labels(lambda g, m: (g, m == 1))),
        ("relation shape", labels(lambda g, m: (g, m[:, :-1]))),
        ("group value 2", labels(lambda g, m: (torch.where(g == 0, 2, g), m))),
        ("int8 relation value -2", labels(lambda g, m: (g, torch.where(m == 0, -2, m).to(torch.int8)))),
        ("uint8 relation value 7", labels(lambda g, m: (g, torch.where(m == 0, 7, m).to(torch.uint8)))),
        ("group value 2 and bool relation", labels(lambda g, m: (torch.where(g == 0, 2, g), m == 1))),
        ("group positive not a match",
         labels(lambda g, m: (torch.where(m == 1, 1, g), torch.where(m == 1, -1, m)))),
        ("group negative is a match", labels(lambda g, m: (torch.where(m == 1, 0, g), m))),
        ("group row with a 0 and no 1", labels(lambda g, m: (torch.where(g == 1, -1, g), m))),
        ("NaN logit_scale", scale(torch.tensor(math.nan))),
        ("inf logit_scale", scale(torch.tensor(math.inf))),
        ("negative logit_scale", scale(torch.tensor(-1.0))),
        ("zero logit_scale", scale(torch.tensor(0.0))),
        ("NaN float logit_scale", scale(math.nan)),
        ("two-element logit_scale", scale(torch.tensor([1.0, 2.0]))),
        ("negative scale and a mismatch", lambda q, v, g, m, s, w: (q, v, torch.where(m == 1, 0, g), m,
                                                                    torch.tensor(-1.0), w)),
        ("NaN lambda_g", lambda q, v, g, m, s, w: (q, v, g, m, s, {**w, "lambda_g": math.nan})),
        ("inf lambda_bi", lambda q, v, g, m, s, w: (q, v, g, m, s, {**w, "lambda_bi": math.inf})),
        ("NaN lambda_g and a mismatch", lambda q, v, g, m, s, w: (q, v, torch.where(m == 1, 0, g), m, s,
                                                                  {**w, "lambda_g": math.nan})),
        ("widths", lambda q, v, g, m, s, w: (q, v[:, :3], g, m, s, w)),
        ("no records", lambda q, v, g, m, s, w: (q, v[:0], g[:, :0], m[:, :0], s, w)),
        ("1-D queries", lambda q, v, g, m, s, w: (q[0], v, g, m, s, w)),
        ("integer embeddings", lambda q, v, g, m, s, w: (q.long(), v, g, m, s, w)),
    ]


@pytest.mark.parametrize("name, change", bad_inputs(), ids=[name for name, _ in bad_inputs()])
def test_bad_input_is_refused_with_the_reference_message(name, change):
    q, v, g, m = labelled_batch(1, 5, 7, p_unknown=0.2, p_match=0.5, n_bare=0, n_unmatched=0)
    assert ((g == 1).any(dim=1) | (g == -1).all(dim=1)).all() and (g == 0).any()
    q, v, g, m, scale, weights = change(q, v, g, m, torch.tensor(10.0, dtype=torch.float64), {})
    with pytest.raises(ValueError) as fast:
        mask_guided_loss(q, v, g, m, scale, **weights)
    with pytest.raises(ValueError) as slow:
        mask_guided_loss_reference(q, v, g, m, scale, **weights)
    assert str(fast.value) == str(slow.value)


def test_a_python_number_for_logit_scale_is_accepted_like_a_tensor():
    q, v, g, m = labelled_batch(2, 4, 6, p_unknown=0.2, p_match=0.5, n_bare=0, n_unmatched=1)
    as_number = mask_guided_loss(q, v, g, m, 12.0)
    as_tensor = mask_guided_loss(q, v, g, m, torch.tensor(12.0, dtype=torch.float64))
    for key in KEYS:
        assert torch.equal(as_number[key], as_tensor[key]), key


@pytest.mark.parametrize("path", PATHS)
def test_unlabelled_scores_change_no_bit_and_get_exactly_zero_gradient(path):
    _, _, g, m = labelled_batch(7, 6, 9, p_unknown=0.5, p_match=0.4, n_bare=1, n_unmatched=1)
    scores = torch.randn(g.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) * 3
    eye = torch.eye(g.shape[1], dtype=torch.float64)
    inert = (g == -1) & ((m == -1) | ~(m == 1).any(dim=0, keepdim=True))
    assert inert.any() and (~inert).any()
    with taking(path):
        out, (grad, _, _) = run(mask_guided_loss, scores, eye, g, m, 1.0)
        perturbed = torch.where(inert, scores + 50 * torch.randn(g.shape, dtype=torch.float64), scores)
        again, _ = run(mask_guided_loss, perturbed, eye, g, m, 1.0)
    assert torch.equal(grad[inert], torch.zeros(int(inert.sum()), dtype=torch.float64))
    for key in KEYS:
        assert torch.equal(again[key], out[key]), key


@pytest.mark.parametrize("path", PATHS)
def test_the_outputs_are_tensors_of_their_own(path):
    # as before: a trainer may scale the loss in place (gradient accumulation) and read the terms
    q, v, g, m = labelled_batch(4, 5, 7, p_unknown=0.3, p_match=0.4, n_bare=0, n_unmatched=1)
    q = q.requires_grad_(True)
    with taking(path):
        out = mask_guided_loss(q, v, g, m, torch.tensor(5.0, dtype=torch.float64))
        whole = torch.autograd.grad(out["loss"], q, retain_graph=True)[0]
        out["loss"] /= 4
        out["loss"].backward()
    assert torch.allclose(q.grad, whole / 4, rtol=1e-12)
    assert all(out[key].ndim == 0 for key in KEYS)


@pytest.mark.parametrize("path", PATHS)
def test_second_derivatives_equal_those_of_the_masked_path(path):
    # create_graph=True (a gradient penalty, a Hessian-vector product) differentiates again
    q, v, g, m = labelled_batch(4, 5, 7, p_unknown=0.3, p_match=0.4, n_bare=0, n_unmatched=1)

    def second(path: str) -> tuple[torch.Tensor, ...]:
        a, b = q.clone().requires_grad_(True), v.clone().requires_grad_(True)
        s = torch.tensor(5.0, dtype=torch.float64, requires_grad=True)
        with taking(path):
            out = mask_guided_loss(a, b, g, m, s)
            first = torch.autograd.grad(out["loss"] + out["t2v"], (a, b, s), create_graph=True)
            return torch.autograd.grad(sum((f ** 2).sum() for f in first), (a, b, s))

    for x, y in zip(second(path), second("masked")):
        assert torch.allclose(x, y, rtol=1e-10, atol=1e-12)
