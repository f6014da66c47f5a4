"""Numeric edge cases against torch (histc's binning, mode with nan, nan_to_num on complex,
quantile at infinities, reduced-precision opmath, empty matrix norms, ...): snippets run
unchanged by torch and by flowgrad (the harness of test_torch_function_vs_torch)."""
import pytest
from test_torch_function_vs_torch import assert_snippet_matches_torch

CASES = {
    "histc_bins_by_torch_formula": """
t = torch.tensor
out = [torch.histc(t([0.3, 0.7], dtype=torch.float64), bins=10, min=0, max=1),
       torch.histc(torch.linspace(0, 1, 1001, dtype=torch.float64), bins=7, min=0.1, max=0.9),
       torch.histc(torch.linspace(0, 1, 1001), bins=13, min=0.1, max=0.9),
       torch.histc(t([0.3, 0.7], dtype=torch.bfloat16), bins=10, min=0, max=1).float(),
       torch.histc(t([1., 2.], dtype=torch.float16), bins=3000, min=0, max=3)]
""",
    "histc_extreme_ranges": """
t = torch.tensor
out = [torch.histc(t([1e-45, 0.]), bins=2),
       torch.histc(t([3e38, -3e38]), bins=2),
       torch.histc(t([3e38, 1e38, 0., 2e38]), bins=4, min=-1e38, max=3e38),
       torch.histc(t([1e-45, 2e-45, 3e-45]), bins=4, min=1e-45, max=3e-45),
       torch.histc(t([60000., -60000, 0], dtype=torch.float16), bins=2, min=-6e4, max=6e4)]
""",
}


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("name", list(CASES))
def test_numeric_edge_matches_torch(name):
    assert_snippet_matches_torch(CASES[name])
