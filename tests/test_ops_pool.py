"""Pooling against torch (values, indices, gradients) and by float64 finite differences to
second order; bad arguments raise torch-like errors. One line per case."""
import pytest
from helpers import Positive, check, op_table_tests

import flowgrad as flow


def F(m):
    return m.nn.functional


CASES = [
    ("max_pool1d", lambda m, x: F(m).max_pool1d(x, 3, 2, 1, return_indices=True), (2, 3, 8)),
    ("max_pool1d_dil_ceil", lambda m, x: F(m).max_pool1d(x, 2, 2, dilation=2, ceil_mode=True),
     (2, 3, 8)),
    ("max_pool2d", lambda m, x: F(m).max_pool2d(x, 2), (2, 3, 6, 4)),
    ("max_pool2d_indices", lambda m, x: F(m).max_pool2d(x, 3, 2, padding=1, ceil_mode=True,
                                                        return_indices=True), (2, 3, 7, 6)),
    ("max_pool2d_dilation", lambda m, x: F(m).max_pool2d(x, (2, 3), (1, 2), padding=(1, 1),
                                                         dilation=2), (2, 3, 7, 8)),
    ("max_pool2d_unbatched", lambda m, x: F(m).max_pool2d(x, 2, return_indices=True), (3, 4, 6)),
    ("max_pool3d", lambda m, x: F(m).max_pool3d(x, 2, return_indices=True), (2, 2, 4, 4, 5)),
    ("avg_pool1d", lambda m, x: F(m).avg_pool1d(x, 3, 2, 1, ceil_mode=True), (2, 3, 8)),
    ("avg_pool1d_no_pad_count", lambda m, x: m.avg_pool1d(x, 3, 2, 1, count_include_pad=False),
     (2, 3, 8)),
    ("avg_pool2d", lambda m, x: F(m).avg_pool2d(x, 2), (2, 3, 4, 6)),
    ("avg_pool2d_ceil_incl", lambda m, x: F(m).avg_pool2d(x, 3, 2, 1, ceil_mode=True),
     (2, 3, 8, 6)),
    ("avg_pool2d_ceil_excl", lambda m, x: F(m).avg_pool2d(x, 3, 2, 1, ceil_mode=True,
                                                          count_include_pad=False),
     (2, 3, 7, 6)),
    ("avg_pool2d_divisor", lambda m, x: F(m).avg_pool2d(x, 2, divisor_override=3),
     (2, 3, 4, 6)),
    ("avg_pool2d_unbatched", lambda m, x: F(m).avg_pool2d(x, (2, 1), (1, 2)), (3, 4, 5)),
    ("avg_pool3d", lambda m, x: F(m).avg_pool3d(x, 2, padding=1), (1, 2, 3, 4, 4)),
    ("adaptive_avg_pool1d", lambda m, x: F(m).adaptive_avg_pool1d(x, 4), (2, 3, 7)),
    ("adaptive_avg_pool2d", lambda m, x: F(m).adaptive_avg_pool2d(x, (3, 5)), (2, 3, 7, 6)),
    ("adaptive_avg_pool2d_none", lambda m, x: F(m).adaptive_avg_pool2d(x, (None, 2)),
     (2, 3, 5, 6)),
    ("adaptive_avg_pool2d_global", lambda m, x: F(m).adaptive_avg_pool2d(x, 1), (3, 5, 4)),
    ("adaptive_max_pool1d", lambda m, x: F(m).adaptive_max_pool1d(x, 3, return_indices=True),
     (2, 3, 7)),
    ("adaptive_max_pool2d", lambda m, x: F(m).adaptive_max_pool2d(x, (3, 4),
                                                                  return_indices=True),
     (2, 3, 7, 6)),
    ("adaptive_max_pool2d_up", lambda m, x: F(m).adaptive_max_pool2d(x, 5), (2, 2, 3, 4)),
    ("lp_pool1d", lambda m, x: F(m).lp_pool1d(x, 3, 2), Positive((2, 3, 6))),
    ("lp_pool2d", lambda m, x: F(m).lp_pool2d(x, 2, 2), (2, 3, 4, 6)),
    ("lp_pool2d_stride", lambda m, x: F(m).lp_pool2d(x, 1.5, (2, 3), stride=1),
     Positive((1, 2, 4, 5))),
]

GRAD_CASES = [
    ("max_pool1d", lambda m, x: F(m).max_pool1d(x, 2, 1, padding=1), (1, 2, 5)),
    ("max_pool2d", lambda m, x: F(m).max_pool2d(x, 2, 1, padding=1), (1, 1, 3, 3)),
    ("max_pool2d_ceil", lambda m, x: F(m).max_pool2d(x, 2, ceil_mode=True), (1, 2, 3, 3)),
    ("avg_pool1d", lambda m, x: F(m).avg_pool1d(x, 3, 2, 1, ceil_mode=True), (1, 2, 6)),
    ("avg_pool2d", lambda m, x: F(m).avg_pool2d(x, 2, 1, padding=1, count_include_pad=False),
     (1, 1, 3, 3)),
    ("adaptive_avg_pool2d", lambda m, x: F(m).adaptive_avg_pool2d(x, 2), (1, 1, 3, 3)),
    ("adaptive_max_pool2d", lambda m, x: F(m).adaptive_max_pool2d(x, 2), (1, 1, 3, 3)),
    ("lp_pool2d", lambda m, x: F(m).lp_pool2d(x, 2, 2), (1, 1, 2, 4)),
]


test_against_torch, test_finite_differences = op_table_tests(CASES, GRAD_CASES)


def test_max_pool_ties_and_nan_follow_torch():
    """The first maximum of a window wins (and gets the gradient); NaN propagates."""
    import numpy as np
    x = np.array([[[[1.0, 1.0], [np.nan, 0.0]], [[2.0, 2.0], [2.0, 2.0]]]], np.float32)
    check(lambda m, x: F(m).max_pool2d(x, 2, return_indices=True), x)


def _t(*shape):
    return flow.randn(*shape)


ERRORS = [
    (lambda: flow.max_pool2d(_t(1, 4, 8, 8), 2, padding=2), RuntimeError,
     "pad should be at most half of effective kernel size, but got pad=2, kernel_size=2"),
    (lambda: flow.max_pool2d(_t(1, 4, 8, 8), 2, stride=0), RuntimeError,
     "stride should not be zero"),
    (lambda: flow.max_pool2d(_t(4, 8), 2), RuntimeError,
     r"non-empty 3D or 4D \(batch mode\) tensor expected for input"),
    (lambda: flow.max_pool2d(_t(1, 4, 8, 8), 2, dilation=0), RuntimeError,
     "dilation must be greater than zero"),
    (lambda: flow.max_pool2d(_t(1, 4, 1, 1), 3), RuntimeError,
     r"Given input size: \(4x1x1\). Calculated output size: \(4x0x0\). Output size is too "
     r"small"),
    (lambda: flow.max_pool1d(_t(1, 4, 8), (2, 2, 2)), RuntimeError,
     "expected kernel_size to be a single int or a tuple of 1 ints"),
    (lambda: flow.nn.functional.avg_pool2d(_t(1, 4, 8, 8), 2, padding=2), RuntimeError,
     "pad should be at most half of effective kernel size"),
    (lambda: flow.nn.functional.avg_pool2d(_t(1, 4, 8, 8), 2, divisor_override=0),
     RuntimeError, "divisor must be not zero"),
    (lambda: flow.avg_pool1d(_t(8), 2), RuntimeError,
     r"avg_pool1d: non-empty 2D or 3D \(batch mode\) tensor expected"),
    (lambda: flow.nn.functional.avg_pool2d(_t(1, 4, 8, 8), 0), RuntimeError,
     "kernel_size must be greater than zero"),
    (lambda: flow.nn.functional.adaptive_avg_pool2d(_t(8, 8), 2), RuntimeError,
     r"adaptive_avg_pool2d\(\): Expected 3D or 4D tensor, but got \[8, 8\]"),
    (lambda: flow.nn.functional.adaptive_avg_pool2d(_t(1, 2, 8, 8), (2, 2, 2)), RuntimeError,
     "output_size must be 2 ints"),
    (lambda: flow.nn.functional.adaptive_max_pool2d(_t(1, 2, 8, 8), 0), RuntimeError,
     "output_size must be positive"),
]


@pytest.mark.parametrize("fn,exc,match", ERRORS)
def test_bad_arguments(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()


def _empty_batch_case(name, fn, shape):
    return pytest.param(fn, shape, id=name)


EMPTY_BATCH = [
    _empty_batch_case("max_pool1d", lambda m, x: F(m).max_pool1d(x, 2), (0, 2, 6)),
    _empty_batch_case("max_pool2d", lambda m, x: F(m).max_pool2d(x, 2), (0, 2, 6, 6)),
    _empty_batch_case("max_pool2d_overlap", lambda m, x: F(m).max_pool2d(x, 3, 1, 1),
                      (0, 2, 6, 6)),
    _empty_batch_case("max_pool2d_indices",
                      lambda m, x: F(m).max_pool2d(x, 2, return_indices=True)[0], (0, 2, 6, 6)),
    _empty_batch_case("max_pool3d", lambda m, x: F(m).max_pool3d(x, 2), (0, 2, 4, 4, 4)),
    _empty_batch_case("avg_pool1d", lambda m, x: F(m).avg_pool1d(x, 2), (0, 2, 6)),
    _empty_batch_case("avg_pool2d", lambda m, x: F(m).avg_pool2d(x, 3, 2, 1), (0, 2, 6, 6)),
    _empty_batch_case("avg_pool3d", lambda m, x: F(m).avg_pool3d(x, 2), (0, 2, 4, 4, 4)),
    _empty_batch_case("adaptive_avg_pool1d", lambda m, x: F(m).adaptive_avg_pool1d(x, 3),
                      (0, 2, 7)),
    _empty_batch_case("adaptive_avg_pool2d",
                      lambda m, x: F(m).adaptive_avg_pool2d(x, (3, 2)), (0, 2, 7, 5)),
    _empty_batch_case("adaptive_avg_pool3d", lambda m, x: F(m).adaptive_avg_pool3d(x, 2),
                      (0, 2, 4, 4, 4)),
    _empty_batch_case("adaptive_max_pool1d", lambda m, x: F(m).adaptive_max_pool1d(x, 3),
                      (0, 2, 7)),
    _empty_batch_case("adaptive_max_pool2d",
                      lambda m, x: F(m).adaptive_max_pool2d(x, (3, 2)), (0, 2, 7, 5)),
    _empty_batch_case("adaptive_max_pool3d", lambda m, x: F(m).adaptive_max_pool3d(x, 2),
                      (0, 2, 4, 4, 4)),
    _empty_batch_case("lp_pool2d", lambda m, x: F(m).lp_pool2d(x, 2, 2), (0, 2, 6, 6)),
]


@pytest.mark.parametrize("fn,shape", EMPTY_BATCH)
def test_empty_batch_gives_empty_output_and_gradient(fn, shape):
    """A batch of size 0 pools to an empty output of torch's shape and back-propagates an
    empty gradient, as torch (no error)."""
    import torch

    out = {}
    for m in (torch, flow):
        x = m.zeros(shape, dtype=m.float64, requires_grad=True)
        y = fn(m, x)
        y.sum().backward()
        out[m] = tuple(y.shape), tuple(x.grad.shape)
    assert out[flow] == out[torch]
    assert out[flow][0][0] == 0 and out[flow][1] == shape


def test_empty_non_batch_dim_raises_as_torch():
    with pytest.raises(RuntimeError, match=r"optional 0 dim batch size"):
        flow.max_pool2d(_t(1, 0, 8, 8), 2)
