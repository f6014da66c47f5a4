"""The exception class torch raises, for mistakes found in training scripts (code that
catches `RuntimeError` or `ValueError` sees the same one): snippets run by torch and by
flowgrad through the programs' import shim (test_torch_function_vs_torch's harness)."""
import pytest
from test_torch_function_vs_torch import assert_snippet_matches_torch

CASES = {
    "cross_entropy_float_class_indices": """
F.cross_entropy(torch.zeros(4, 3), torch.tensor([0., 1., 2., 1.]))
""",
    "cross_entropy_one_hot_long_target": """
F.cross_entropy(torch.zeros(4, 3), F.one_hot(torch.tensor([0, 1, 2, 1]), 3))
""",
    "cross_entropy_spatial_target_shape": """
F.cross_entropy(torch.zeros(2, 2, 3), torch.tensor([[0, 1], [2, 1]]))
""",
    "cross_entropy_batch_mismatch": "F.cross_entropy(torch.zeros(4, 3), torch.tensor([0, 1]))",
    "lstm_input_of_another_dtype": "nn.LSTM(3, 4)(torch.zeros(5, 2, 3, dtype=torch.float64))",
    "gru_input_of_another_dtype": "nn.GRU(3, 4)(torch.zeros(5, 2, 3, dtype=torch.float64))",
    "lstm_input_of_another_dtype_under_autocast_runs": """
with torch.autocast("cpu", dtype=torch.bfloat16):
    y, _ = nn.LSTM(3, 4)(torch.zeros(5, 2, 3, dtype=torch.float64))
out = [list(y.shape)]
""",
    # a Python int beyond int64: torch's ValueError (unpacking a long long); within int64 but
    # beyond the dtype: RuntimeError
    "tensor_of_an_int_beyond_int64": "torch.tensor([1, 2 ** 63])",
    "tensor_of_a_negative_int_beyond_int64": "torch.tensor(-2 ** 63 - 1)",
    "tensor_of_an_int_beyond_int64_as_int8": "torch.tensor([2 ** 70], dtype=torch.int8)",
    "tensor_of_an_int_beyond_int32": "torch.tensor([2 ** 40], dtype=torch.int32)",
    # flowgrad let NumPy's or Python's exception through (AxisError, ZeroDivisionError,
    # AttributeError, KeyError, IndexError, ValueError), or none where torch refuses
    "promote_types_of_a_tensor": "torch.promote_types(torch.ones(1), torch.float32)",
    "a_tensor_as_dtype": "torch.zeros_like(torch.ones(2), torch.ones(2))",
    "searchsorted_of_none": "torch.searchsorted(torch.ones(2), None)",
    "hinge_embedding_loss_of_a_number": "F.hinge_embedding_loss(torch.ones(3), 1)",
    "fill_by_a_vector": "torch.fill(torch.ones(3), torch.ones(3))",
    "cosine_similarity_of_unbroadcastable": "F.cosine_similarity(torch.ones(2, 2), torch.ones(3))",
    "complex_of_unbroadcastable": "torch.complex(torch.ones(2, 2), torch.ones(3))",
    "lu_unpack_of_int64_pivots": """
LU, pivots = torch.linalg.lu_factor(torch.eye(2))
torch.lu_unpack(LU, pivots.long())
""",
    "lu_solve_of_float_pivots": """
LU, pivots = torch.linalg.lu_factor(torch.eye(2))
torch.linalg.lu_solve(LU, pivots.float(), torch.ones(2, 1))
""",
    "roll_of_a_0d_tensor_along_a_dim": "torch.roll(torch.tensor(1.0), 1, 0)",
    "hsplit_into_0_sections": "torch.hsplit(torch.ones(5, 5), 0)",
    "ormqr_of_a_vector": "torch.ormqr(torch.ones(3), torch.ones(1), torch.ones(3, 3))",
    "cholesky_inverse_of_a_0d_tensor": "torch.tensor(1.0).cholesky_inverse()",
    "is_contiguous_of_a_number": "torch.ones(2).is_contiguous(memory_format=0)",
    "norm_with_p_none_runs": """
x = torch.tensor([[3.0, 4.0], [1.0, 2.0]])
out = [x.norm(None).item(), x.norm(None, 1).tolist(), torch.norm(x, p=None, dim=0).tolist()]
""",
    # a Python int in [2**63, 2**64) is a uint64 Scalar in torch: with a bool tensor the result
    # type, which torch refuses; flowgrad wrapped it to int64 (a negative number)
    "bool_tensor_plus_2_pow_63": "torch.tensor([True, False]) + 2 ** 63",
    "bool_tensor_over_2_pow_63": "torch.tensor([True, False]) / 2 ** 63",
    "bool_tensor_eq_2_pow_63": "torch.tensor([True, False]) == 2 ** 63",
    "float_minus_below_int64": "torch.ones(2) - (-2 ** 63 - 1)",
    # setitem: a number beyond float32's range is refused (a half dtype takes inf), and an int
    # beyond int64 is unpacked as one
    "setitem_float32_beyond_its_range": "x = torch.zeros(2)\nx[0] = 1e39",
    "setitem_complex64_beyond_its_range": "x = torch.zeros(2, dtype=torch.complex64)\nx[:] = 1e39",
    "setitem_half_beyond_its_range_runs": """
x = torch.zeros(2, dtype=torch.float16)
x[0] = 70000.0
out = [x.tolist()]
""",
    "setitem_int_beyond_int64": "x = torch.zeros(2)\nx[0] = 2 ** 63",
    # F.hardtanh checks its limits, torch's hardtanh_ (a binding) does not
    "hardtanh_of_crossed_limits": "F.hardtanh(torch.tensor([1.5, -3.0]), 5.0, 1.0)",
    "hardtanh__of_crossed_limits_runs": """
x = torch.tensor([1.5, -3.0])
F.hardtanh_(x, 5.0, 1.0)
out = [x.tolist()]
""",
}


@pytest.mark.parametrize("name", list(CASES))
def test_error_type_matches_torch(name):
    assert_snippet_matches_torch(CASES[name])
