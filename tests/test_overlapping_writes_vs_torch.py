"""Writes whose source shares memory with the written tensor (`x[1:4] = x[0:3]`,
`torch.exp(x[:3], out=x[1:])`), raised or computed as torch answers them.

torch refuses them where the result would depend on the order of the writes: `x[i] = v` for a
basic index is `x[i].copy_(v)` (a partial overlap is refused, a 0-d v is a fill, read first);
for an advanced index it is index_put_, which refuses any shared memory unless it is one
value under one boolean mask (masked_fill_); out= of an elementwise kernel (and cumsum, diff)
refuses an input sharing only part of out's memory, while out= that is an input itself is
fine. Before, flowgrad computed all of these as if the source had been cloned first.
"""
from __future__ import annotations

import numpy as np
import pytest
from vs_torch import assert_program_as_torch

import flowgrad as flow


def _written(write, shape=(6,)):
    def program(m):
        x = m.arange(float(np.prod(shape)), dtype=m.float64).reshape(shape)
        write(m, x)
        return [x]
    return program


def _with_grad(write):
    def program(m):
        x0 = m.tensor([0.5, -1.0, 2.0, 3.0], dtype=m.float64, requires_grad=True)
        x = x0 * 1
        write(m, x)
        (x * m.tensor([1.0, 2.0, 3.0, 4.0], dtype=m.float64)).sum().backward()
        return [x.detach(), x0.grad]
    return program


def _mask(m, *positions):
    return m.tensor([i in positions for i in range(6)])


PROGRAMS = {
    # x[basic] = value: x[basic].copy_(value)
    "setitem_slice_shifted": _written(lambda m, x: x.__setitem__(slice(1, 4), x[0:3])),
    "setitem_slice_itself": _written(lambda m, x: x.__setitem__(slice(0, 3), x[0:3])),
    "setitem_slice_apart": _written(lambda m, x: x.__setitem__(slice(3, 6), x[0:3])),
    "setitem_slice_zero_dim": _written(lambda m, x: x.__setitem__(slice(0, 3), x[1])),
    "setitem_row_broadcast": _written(lambda m, x: x.__setitem__(
        (slice(None), slice(0, 2)), x[1]), shape=(2, 1, 2)),
    "setitem_whole_reversed": _written(lambda m, x: x.__setitem__(Ellipsis, x.flip(0))),
    "setitem_zero_dim_grad": _with_grad(lambda m, x: x.__setitem__(slice(0, 3), x[1])),
    # x itself into a region of its very elements whose size-1 dim has another stride
    # (program_fuzz seed 11138235): torch's copy_ compares every stride, a partial overlap
    "setitem_itself_size_one_stride": _written(lambda m, x: x.__setitem__(
        (slice(0, None), slice(None, None, 2)), x), shape=(3, 1)),
    "setitem_itself_unsqueezed_stride": _written(lambda m, x: x.__setitem__(
        (None, slice(None), slice(None, None, 3)), x), shape=(3, 1)),
    "setitem_itself_same_strides": _written(lambda m, x: x.__setitem__(
        (slice(None), slice(0, 1)), x), shape=(3, 1)),
    # x[advanced] = value: index_put_
    "setitem_list_itself": _written(lambda m, x: x.__setitem__([0, 0, 1, 2, 3, 4], x)),
    "setitem_list_element": _written(lambda m, x: x.__setitem__([2], x[2])),
    "setitem_list_of_copy": _written(lambda m, x: x.__setitem__([1, 2, 3], x[[0, 1, 2]])),
    "setitem_list_after_slice": _written(lambda m, x: x.__setitem__(
        (slice(1, None), [0, 1]), x[0, 2:]), shape=(3, 4)),
    "setitem_list_strided_value": _written(lambda m, x: x.__setitem__(
        (slice(None), [0]), x[:, 1:2]), shape=(3, 4)),
    "setitem_mask_one_value": _written(lambda m, x: x.__setitem__(x > 2, x[0])),
    "setitem_mask_two_values": _written(lambda m, x: x.__setitem__(_mask(m, 0, 2), x[0:2])),
    "index_put_mask_one_value": _written(lambda m, x: x.index_put_((_mask(m, 0, 2),), x[1])),
    "index_put_indices_alias": _written(lambda m, x: x.index_put_((m.tensor([0, 1]),), x[0:2])),
    "index_put_accumulate_mask": _written(lambda m, x: x.index_put_(
        (_mask(m, 0, 2),), x[1], accumulate=True)),
    # out=
    "add_out_shifted": _written(lambda m, x: m.add(x[0:3], 1, out=x[1:4])),
    "add_out_itself": _written(lambda m, x: m.add(x, 1, out=x)),
    "exp_out_shifted": _written(lambda m, x: m.exp(x[0, :3], out=x[0, 1:]), shape=(3, 4)),
    "mul_out_broadcast_row": _written(lambda m, x: m.mul(x, x[0], out=x), shape=(3, 4)),
    "pow_out_shifted": _written(lambda m, x: m.pow(x[0:3], 2, out=x[1:4])),
    "lerp_out_shifted": _written(lambda m, x: m.lerp(x[0:3], x[3:6], 0.5, out=x[1:4])),
    "clamp_out_shifted": _written(lambda m, x: m.clamp(x[0:3], 0, 1, out=x[1:4])),
    "clamp_out_tensor_bound": _written(lambda m, x: m.clamp(x[3:6], min=x[0:3], out=x[1:4])),
    "div_floor_out_shifted": _written(lambda m, x: m.div(x[0:3], 2, rounding_mode="floor",
                                                         out=x[1:4])),
    "where_out_itself": _written(lambda m, x: m.where(x > 2, x, m.zeros(()).double(), out=x)),
    "cumsum_out_itself": _written(lambda m, x: m.cumsum(x, 0, out=x)),
    "cumsum_out_shifted": _written(lambda m, x: m.cumsum(x[0:3], 0, out=x[1:4])),
    "diff_out_shifted": _written(lambda m, x: m.diff(x, out=x[1:])),
    "stack_out_rows": _written(lambda m, x: m.stack([x[0], x[2]], out=x[0:2]), shape=(3, 4)),
    "hstack_out_rows": _written(lambda m, x: m.hstack([x[0], x[2]], out=x[0:2].reshape(-1)),
                                shape=(3, 4)),
    "sum_out_other_rows": _written(lambda m, x: m.sum(x[1:], 0, out=x[0]), shape=(3, 4)),
    "softmax_out_itself": _written(lambda m, x: m.softmax(x, 0, out=x)),
}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_write_from_overlapping_memory_as_torch(name):
    assert_program_as_torch(name, PROGRAMS[name])


def test_a_refused_write_leaves_the_tensor_as_it_was():
    x = flow.arange(6.0)
    with pytest.raises(RuntimeError, match="index_put_"):
        x[[0, 1]] = x[1:3]
    with pytest.raises(RuntimeError, match=r"exp\(\)"):
        flow.exp(x[:3], out=x[1:4])
    np.testing.assert_array_equal(x.numpy(), np.arange(6.0))
    assert x._version == 0


def test_mm_into_its_own_input_gives_the_product():
    # torch's result here is its BLAS's: the product on the machines CI runs, zeros on an
    # AMD EPYC whose gemm clears the output before reading the input; flowgrad's is the product
    x = flow.arange(9.0, dtype=flow.float64).reshape(3, 3)
    want = x.clone()
    assert flow.mm(x, flow.eye(3, dtype=flow.float64), out=x) is x
    assert flow.equal(x, want)


def _grid(m):
    return m.arange(24.0, dtype=m.float64).reshape(4, 6)


def _rows(m):
    return m.tensor([[0, 1], [1, 0], [0, 0], [1, 1]])


# strided operands sharing the span of the tensor written but none of the elements written
# (torch's overlap checks call a strided pair "too hard" and run: the values of a clone)
APART = {
    "scatter_": lambda m, g: g.scatter_(1, _rows(m), g[:, 4:]),
    "scatter_add_": lambda m, g: g.scatter_add_(1, _rows(m), g[:, 3:]),
    "scatter_reduce_": lambda m, g: g.scatter_reduce_(1, _rows(m), g[:, 4:], "amin"),
    "index_add_": lambda m, g: g.index_add_(1, m.tensor([0, 1]), g[:, 3::2], alpha=2),
    "index_copy_": lambda m, g: g.index_copy_(1, m.tensor([1, 0]), g[:, 4:]),
    "put_": lambda m, g: g.put_(m.tensor([0, 1]), g[2:4, 5], accumulate=True),
    "masked_scatter_": lambda m, g: g.masked_scatter_(m.arange(24).reshape(4, 6) % 6 < 2,
                                                      g[:, 2:][:, ::2]),
    "index_select_out": lambda m, g: m.index_select(g[:, :3], 1, m.tensor([2, 0]),
                                                    out=g[:, 4:]),
    "gather_out": lambda m, g: m.gather(g[:, :3], 1, m.tensor([[0, 2]] * 4), out=g[:, 4:]),
    "cat_out": lambda m, g: m.cat([g[:, :1], g[:, 1:2]], 1, out=g[:, 4:]),
}


def _apart(name):
    def program(m):
        g = _grid(m)
        APART[name](m, g)
        return [g]
    return program


@pytest.mark.parametrize("name", sorted(APART))
def test_strided_operand_apart_from_what_is_written_runs_as_torch(name):
    """flowgrad refused these (a partial overlap; for out=, any shared span) where torch
    runs; no element read is written, so the result is torch's."""
    assert_program_as_torch(name, _apart(name))


# the same ops reading elements they write: torch runs them in its loop's order (its values
# hang on that order and on its vector width); flowgrad, which computes out of place, refuses
# them, saying so (not with torch's own refusal), and never gives other values
READS_WRITTEN = {
    "scatter_add_": lambda m, g: g.scatter_add_(1, m.tensor([[0, 1, 2, 3]] * 4), g[:, 2:]),
    "index_add_": lambda m, g: g.index_add_(1, m.tensor([0, 2, 1]), g[:, 1:4]),
    "masked_scatter_": lambda m, g: g.masked_scatter_(m.arange(24).reshape(4, 6) % 3 == 0,
                                                      g[:, 1:]),
    "copy_": lambda m, g: g[:, 2:].copy_(g[:, :4]),
    "add_": lambda m, g: g[:, 1:4].add_(g[:, :3]),
    "add_out": lambda m, g: m.add(g[:, :3], 1, out=g[:, 2:5]),
}


@pytest.mark.parametrize("name", sorted(READS_WRITTEN))
def test_strided_operand_reading_written_elements_is_refused(name):
    import torch
    READS_WRITTEN[name](torch, _grid(torch))  # (torch runs it)
    g = _grid(flow)
    with pytest.raises(NotImplementedError, match="depends? on the order of its writes"):
        READS_WRITTEN[name](flow, g)
    np.testing.assert_array_equal(g.numpy(), np.arange(24.0).reshape(4, 6))
