"""Forward-mode AD and vmap on every row of the op tables, against torch.func."""
import pytest
from helpers_func import func_table_tests, table_rows

ROWS = table_rows("test_ops_core", "test_ops_elementwise", "test_ops_activation",
                  "test_ops_reduce", "test_ops_shape", "test_ops_index", "test_ops_linalg",
                  "test_ops_conv", "test_ops_pool", "test_ops_norm", "test_ops_loss",
                  "test_ops_nn_misc", "test_ops_spatial", "test_api_more")

# Rows flowgrad does not transform like torch yet, each with why (strict: a fixed row fails
# here until it is removed from the list).
NOT_YET = {
    "jvp": {
        **dict.fromkeys(("linalg_eig-eigvals_abs", "linalg_eig-eig_parts_real",
                         "linalg_eig-eig_parts_complex_batch"),
                        "forward AD carries no complex tangents (linalg.eig's results)"),
    },
    "vmap": {},
}

# More tables, in the jvp column only (their vmap column is not done: quantile, fractional
# pooling, mvlgamma and lstsq rows do not batch like torch yet)
JVP_ROWS = table_rows("test_ops_linalg_more", "test_ops_linalg_eig", "test_ops_special",
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
test_jvp_more_tables, _ = func_table_tests(_rows("jvp", JVP_ROWS), TORCH_FORWARD_WRONG)
