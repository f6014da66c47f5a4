"""Forward-mode AD and vmap on every row of the op tables, against torch.func."""
import numpy as np
import pytest
import torch
from helpers_func import func_table_tests, table_rows

import flowgrad as flow

ROWS = table_rows("test_ops_core", "test_ops_elementwise", "test_ops_activation",
                  "test_ops_reduce", "test_ops_shape", "test_ops_index", "test_ops_linalg",
                  "test_ops_conv", "test_ops_pool", "test_ops_norm", "test_ops_loss",
                  "test_ops_nn_misc", "test_ops_spatial", "test_api_more")

# Rows flowgrad does not transform like torch yet, each with why (strict: a fixed row fails
# here until it is removed from the list).
NOT_YET = {
    "jvp": {
    },
    "vmap": {},
}

# More tables (both columns; their functions' value checks and shape choices are made over
# the whole batch under vmap, as torch's batching rules make them)
MORE_ROWS = table_rows("test_ops_linalg_more", "test_ops_linalg_eig", "test_ops_special",
                      "test_ops_odds", "test_ops_gaps")

# torch's forward-mode rule is wrong here (it disagrees with torch's reverse mode and with
# finite differences), so these rows are checked against J t from torch's reverse-mode
# Jacobian: cholesky_inverse_jvp multiplies X dL X L^T for X dL L^T X; triangular_solve's
# forward rule reads the whole tangent of A while the op (and its backward) read one
# triangle; logcumsumexp_jvp normalises by the max, so entries far below it get 0 tangents.
TORCH_FORWARD_WRONG = ("linalg_more-cholesky_inverse", "linalg_more-triangular_solve",
                       "linalg_more-triangular_solve_t", "odds-logcumsumexp_large")


def _rows(column, rows):
    return [pytest.param(r, id=r[0], marks=pytest.mark.xfail(reason=NOT_YET[column][r[0]],
                                                             strict=True))
            if r[0] in NOT_YET[column] else r for r in rows]


test_jvp_against_torch, _ = func_table_tests(_rows("jvp", ROWS))
_, test_vmap_against_torch = func_table_tests(_rows("vmap", ROWS))
test_jvp_more_tables, _ = func_table_tests(_rows("jvp", MORE_ROWS), TORCH_FORWARD_WRONG)
_, test_vmap_more_tables = func_table_tests(_rows("vmap", MORE_ROWS))


def test_vmap_decides_over_the_whole_batch():
    """lstsq's residuals exist when every matrix is full rank: under vmap, every example's
    (torch's batching rule calls lstsq once on the batch); one rank-deficient example empties
    them."""
    a = np.random.default_rng(0).standard_normal((2, 5, 3))
    b = np.random.default_rng(1).standard_normal((2, 5, 2))
    a[1, :, 2] = a[1, :, 1]
    for rows in (slice(0, 1), slice(0, 2)):
        res = [m.func.vmap(lambda x, y, m=m: m.linalg.lstsq(x, y, driver="gelsd")[1])(
            m.tensor(a[rows]), m.tensor(b[rows])) for m in (flow, torch)]
        assert tuple(res[0].shape) == tuple(res[1].shape)
        np.testing.assert_allclose(res[0].numpy(), res[1].numpy(), rtol=1e-10)


def test_vmap_fractional_pool_draws_as_randomness_says():
    """The windows' samples are a rand op: randomness='error' refuses them as torch's vmap,
    'same' gives every example one draw, 'different' its own; batched samples batch."""
    pool = flow.nn.functional.fractional_max_pool2d
    flow.manual_seed(0)
    x = flow.randn(1, 2, 9, 9).expand(4, 1, 2, 9, 9)
    with pytest.raises(RuntimeError, match="randomness error mode"):
        flow.func.vmap(lambda t: pool(t, 2, output_size=4))(x)
    for mode, same in (("same", True), ("different", False)):
        y = flow.func.vmap(lambda t: pool(t, 2, output_size=4), randomness=mode)(x)
        equal = [bool((y[0] == y[b]).all()) for b in (1, 2, 3)]
        assert all(equal) if same else not any(equal)
    s = flow.rand(4, 1, 2, 2)
    y = flow.func.vmap(lambda t, u: pool(t, 2, output_size=4, _random_samples=u))(x, s)
    loop = [pool(x[b], 2, output_size=4, _random_samples=s[b]) for b in range(4)]
    np.testing.assert_array_equal(y.numpy(), flow.stack(loop).numpy())


def test_vmap_over_quantile_q():
    """q is an op input: batched q gives each example its own quantiles (as torch's), and
    the range check sees every example's q."""
    x = np.random.default_rng(0).standard_normal(5)
    q = np.array([[0.1, 0.5], [0.3, 0.9], [0.0, 1.0]])
    ours, theirs = (m.func.vmap(lambda v, m=m: m.quantile(m.tensor(x), v, interpolation="nearest"))(
        m.tensor(q)) for m in (flow, torch))
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12)
    with pytest.raises(RuntimeError, match=r"q values must be in the range \[0, 1\]"):
        flow.func.vmap(lambda v: flow.quantile(flow.tensor(x), v))(flow.tensor(q * 2))
