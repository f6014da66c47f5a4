"""Results' memory as torch's: strides, is_contiguous (also for channels_last), whether the
result shares its input's memory (a view) or is new, and the values of input and result after
an in-place write through the result's flattened reshape (a view of it only where the layout
allows, so a different layout is a different value). One table line a case."""
from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
import torch

import flowgrad as flow


def _x(m, *shape):
    return m.arange(1.0, math.prod(shape) + 1, dtype=m.float64).reshape(shape)


def _facts(m, build):
    """build(m) -> (input, result): what the result's memory is, then both after a write."""
    x, y = build(m)
    facts = [tuple(y.shape), y.stride(), y.is_contiguous(),
             y.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()]
    if y.ndim in (4, 5):
        fmt = m.channels_last if y.ndim == 4 else m.channels_last_3d
        facts.append(y.is_contiguous(memory_format=fmt))
    # channels_last's memory order: a view of a 4-d result in that format, else a copy
    flat = (y.permute(0, 2, 3, 1) if y.ndim == 4 else y).reshape(-1)
    flat.mul_(-1)
    return facts, x.tolist(), y.tolist()


def _cl(m, *shape):
    """A 4-d (5-d) tensor in channels_last (channels_last_3d)."""
    fmt = m.channels_last if len(shape) == 4 else m.channels_last_3d
    return _x(m, *shape).contiguous(memory_format=fmt)


def _t1(m):
    """An (N, C, L) tensor whose strides put C innermost (1-d pooling: channels_last)."""
    return _x(m, 2, 8, 3).transpose(1, 2)


def _w(m, *shape):
    return m.ones(*shape, dtype=m.float64) / 4


def _resized(m):
    x = _x(m, 2, 3, 4, 5)
    return x, x.resize_(2, 3, 4, 5, memory_format=m.channels_last)


def _unpooled(m):
    y, i = m.nn.functional.max_pool2d(_cl(m, 2, 3, 4, 6), 2, return_indices=True)
    return y, m.nn.functional.max_unpool2d(y, i, 2)


def _module_to(m):
    conv = m.nn.Conv2d(3, 2, 2).double().to(memory_format=m.channels_last)
    with m.no_grad():
        conv.weight.copy_(_x(m, 2, 3, 2, 2))
    return conv.weight, conv.weight.detach()


# name: build(m) -> (input, result)
CASES = {
    # einsum with no summed letter: torch's diagonal/permute view of the operand (a write to
    # it reaches the operand); flowgrad's was a new C-order copy
    "einsum_transpose": lambda m: (x := _x(m, 3, 4), m.einsum("ij->ji", x)),
    "einsum_permute": lambda m: (x := _x(m, 2, 3, 4), m.einsum("ijk->kij", x)),
    "einsum_identity": lambda m: (x := _x(m, 3, 4), m.einsum("ij", x)),
    "einsum_diagonal": lambda m: (x := _x(m, 3, 3), m.einsum("ii->i", x)),
    "einsum_diag_permute": lambda m: (x := _x(m, 3, 4, 3), m.einsum("iji->ji", x)),
    "einsum_triple_diag": lambda m: (x := _x(m, 3, 3, 3), m.einsum("iii->i", x)),
    "einsum_ellipsis": lambda m: (x := _x(m, 2, 3, 4), m.einsum("ab...->...ba", x)),
    "einsum_sum": lambda m: (x := _x(m, 3, 4), m.einsum("ij->j", x)),
    # channels_last: NHWC memory, as torch's (flowgrad recorded a tag on row-major arrays)
    "contiguous_cl": lambda m: (x := _x(m, 2, 3, 4, 5), x.contiguous(
        memory_format=m.channels_last)),
    "contiguous_cl_itself": lambda m: (x := _cl(m, 2, 3, 4, 5), x.contiguous(
        memory_format=m.channels_last)),
    "contiguous_of_cl": lambda m: (x := _cl(m, 2, 3, 4, 5), x.contiguous()),
    "contiguous_cl3d": lambda m: (x := _x(m, 2, 3, 2, 4, 5), x.contiguous(
        memory_format=m.channels_last_3d)),
    "permuted_is_cl": lambda m: (x := _x(m, 2, 4, 5, 3), x.permute(0, 3, 1, 2)),
    "to_cl": lambda m: (x := _x(m, 2, 3, 4, 5), x.to(memory_format=m.channels_last)),
    "to_cl_itself": lambda m: (x := _cl(m, 2, 3, 4, 5), x.to(memory_format=m.channels_last)),
    "to_cl_float32": lambda m: (x := _x(m, 2, 3, 4, 5), x.to(m.float32,
                                                              memory_format=m.channels_last)),
    "to_contiguous_format_of_cl": lambda m: (x := _cl(m, 2, 3, 4, 5), x.to(
        memory_format=m.contiguous_format)),
    "to_contiguous_format_itself": lambda m: (x := _x(m, 3, 4, 2, 5).transpose(0, 1), x.to(
        memory_format=m.contiguous_format)),
    "clone_of_cl": lambda m: (x := _cl(m, 2, 3, 4, 5), x.clone()),
    "clone_cl": lambda m: (x := _x(m, 2, 3, 4, 5), x.clone(memory_format=m.channels_last)),
    "double_of_cl": lambda m: (x := _cl(m, 2, 3, 4, 5).float(), x.double()),
    "zeros_like_cl": lambda m: (x := _x(m, 2, 3, 4, 5), m.zeros_like(
        x, memory_format=m.channels_last)),
    "ones_like_of_cl": lambda m: (x := _cl(m, 2, 3, 4, 5), m.ones_like(x)),
    "empty_cl": lambda m: (x := m.empty(2, 3, 4, 5, memory_format=m.channels_last).zero_(), x),
    "resize_cl": _resized,
    "module_to_cl": _module_to,
    "relu_of_cl": lambda m: (x := _cl(m, 2, 3, 4, 5), m.relu(x)),
    "add_of_cl": lambda m: (x := _cl(m, 2, 3, 4, 5), x + _x(m, 2, 3, 4, 5)),
    "conv2d_of_cl": lambda m: (x := _cl(m, 2, 3, 4, 5), m.nn.functional.conv2d(x, _w(m, 4, 3, 2,
                                                                                 2))),
    "conv2d_cl_weight": lambda m: (x := _x(m, 2, 3, 4, 5), m.nn.functional.conv2d(
        x, _cl(m, 4, 3, 2, 2))),
    "conv_transpose2d_of_cl": lambda m: (x := _cl(m, 2, 3, 4, 5), m.nn.functional.
                                         conv_transpose2d(x, _w(m, 3, 2, 2, 2), stride=2)),
    "conv3d_float32_of_cl3d": lambda m: (x := _cl(m, 2, 3, 3, 4, 5).float(), m.nn.functional.
                                         conv3d(x, _w(m, 2, 3, 2, 2, 2).float())),
    "conv3d_float64_of_cl3d": lambda m: (x := _cl(m, 2, 3, 3, 4, 5), m.nn.functional.conv3d(
        x, _w(m, 2, 3, 2, 2, 2))),
    "batch_norm_of_cl": lambda m: (x := _cl(m, 2, 3, 4, 5), m.nn.functional.batch_norm(
        x, None, None, training=True)),
    "batch_norm_eval_of_cl": lambda m: (x := _cl(m, 2, 3, 4, 5), m.nn.functional.batch_norm(
        x, _w(m, 3), _w(m, 3))),
    "group_norm_of_cl": lambda m: (x := _cl(m, 2, 4, 4, 5), m.nn.functional.group_norm(x, 2)),
    "layer_norm_of_cl": lambda m: (x := _cl(m, 2, 3, 4, 5), m.nn.functional.layer_norm(x, (5,))),
    "max_pool2d_of_cl": lambda m: (x := _cl(m, 2, 3, 4, 6), m.nn.functional.max_pool2d(x, 2)),
    "max_pool2d_indices_of_cl": lambda m: (x := _cl(m, 2, 3, 4, 6), m.nn.functional.max_pool2d(
        x, 2, return_indices=True)[1]),
    "avg_pool2d_of_cl": lambda m: (x := _cl(m, 2, 3, 4, 6), m.nn.functional.avg_pool2d(x, 2)),
    "adaptive_avg_pool2d_of_cl": lambda m: (x := _cl(m, 2, 3, 4, 6), m.nn.functional.
                                            adaptive_avg_pool2d(x, (3, 2))),
    "adaptive_max_pool2d_of_cl": lambda m: (x := _cl(m, 2, 3, 4, 6), m.nn.functional.
                                            adaptive_max_pool2d(x, (3, 2))),
    "max_pool3d_of_cl3d": lambda m: (x := _cl(m, 2, 3, 4, 4, 4), m.nn.functional.max_pool3d(
        x, 2)),
    "avg_pool3d_of_cl3d": lambda m: (x := _cl(m, 2, 3, 4, 4, 4), m.nn.functional.avg_pool3d(
        x, 2)),
    "interpolate_of_cl": lambda m: (x := _cl(m, 2, 3, 4, 5), m.nn.functional.interpolate(
        x, scale_factor=2)),
    "bilinear_of_cl": lambda m: (x := _cl(m, 2, 3, 4, 5), m.nn.functional.interpolate(
        x, scale_factor=2, mode="bilinear")),
    "trilinear_of_cl3d": lambda m: (x := _cl(m, 2, 3, 2, 3, 4), m.nn.functional.interpolate(
        x, scale_factor=2, mode="trilinear")),
    "pad_of_cl": lambda m: (x := _cl(m, 2, 3, 4, 5), m.nn.functional.pad(x, (1, 1, 1, 1))),
    "reflect_pad_of_cl": lambda m: (x := _cl(m, 2, 3, 4, 5), m.nn.functional.pad(
        x, (1, 1, 1, 1), mode="reflect")),
    "cat_of_cl": lambda m: (x := _cl(m, 2, 3, 4, 5), m.cat([x, x], 1)),
    "cat_of_cl_and_c": lambda m: (x := _cl(m, 2, 3, 4, 5), m.cat([x, x.contiguous()], 1)),
    "stack_of_cl": lambda m: (x := _cl(m, 2, 3, 4, 5), m.stack([x, x * 2], 1)[:, 1]),
    "stack_of_cl_and_c": lambda m: (x := _cl(m, 2, 3, 4, 5), m.stack([x, x.contiguous()])[1]),
    "stack_last_of_cl": lambda m: (x := _cl(m, 2, 3, 4, 5), m.stack([x, x * 2], 4)[..., 1]),
    "channel_shuffle_of_cl": lambda m: (x := _cl(m, 2, 4, 4, 5), m.nn.functional.
                                        channel_shuffle(x, 2)),
    "pixel_shuffle_of_cl": lambda m: (x := _cl(m, 2, 8, 3, 2), m.nn.functional.pixel_shuffle(
        x, 2)),
    # 1-d pooling of a (N, C, L) whose C is innermost: torch's 2-d kernel on (N, C, 1, L)
    "max_pool1d_indices": lambda m: (x := _t1(m), m.nn.functional.max_pool1d(
        x, 2, return_indices=True)[0]),
    "max_pool1d": lambda m: (x := _t1(m), m.nn.functional.max_pool1d(x, 2)),
    "max_pool1d_grad": lambda m: (x := _t1(m), m.nn.functional.max_pool1d(
        x.detach().requires_grad_(), 2).detach()),
    "avg_pool1d": lambda m: (x := _t1(m), m.nn.functional.avg_pool1d(x, 2)),
    "adaptive_avg_pool1d": lambda m: (x := _t1(m), m.nn.functional.adaptive_avg_pool1d(x, 3)),
    "adaptive_max_pool1d": lambda m: (x := _t1(m), m.nn.functional.adaptive_max_pool1d(x, 3)),
    "lp_pool1d": lambda m: (x := _t1(m), m.nn.functional.lp_pool1d(x, 2, 2)),
    "conv1d": lambda m: (x := _t1(m), m.nn.functional.conv1d(x, _w(m, 4, 3, 2))),
    "interpolate_1d": lambda m: (x := _t1(m), m.nn.functional.interpolate(x, scale_factor=2)),
    "max_unpool2d_of_cl": _unpooled,
    "conv_transpose3d_int64_of_cl3d": lambda m: (x := _cl(m, 2, 2, 2, 3, 2).long(), m.nn.
                                                 functional.conv_transpose3d(x, m.ones(
                                                     2, 2, 2, 2, 2, dtype=m.int64))),
    # found by opinfo_layouts.py --layout=permuted (every dim reversed in memory): torch's
    # results are C-ordered (a reduction's, a contiguous clone), flowgrad's kept the input's
    "sum_to_size_of_permuted": lambda m: (x := _x(m, 5, 4, 3).permute(2, 1, 0), x.sum_to_size(
        3, 1, 5)),
    "expand_copy_of_permuted": lambda m: (x := _x(m, 5, 1, 3).permute(2, 1, 0), m.expand_copy(
        x, (3, 4, 5))),
    # pickle: torch's storage and strides keep the layout; NumPy pickled it in C order
    "pickled_cl": lambda m: (x := _cl(m, 2, 3, 4, 5), pickle.loads(pickle.dumps(x))),
    "pickled_permuted": lambda m: (x := _x(m, 2, 3, 4).permute(2, 0, 1), pickle.loads(
        pickle.dumps(x))),
    "roll_of_cl": lambda m: (x := _cl(m, 2, 3, 4, 5), m.roll(x, 1, 2)),
    "roll_flat_of_cl": lambda m: (x := _cl(m, 2, 3, 4, 5), m.roll(x, 1)),
    # fft/ifft of a real input: torch's two-sided r2c on the input as it is, its broadcast
    # (stride-0) dims ordered by stride (flowgrad's complex cast packed them densely), ties
    # as torch's std::partition leaves them; a padded n: constant_pad_nd's layout
    "fft_of_expanded": lambda m: (x := _x(m, 1, 4, 5).expand(3, 4, 5), m.fft.fft(x)),
    "ifft_of_expanded": lambda m: (x := _x(m, 2, 1, 1, 1).expand(2, 4, 4, 2), m.fft.ifft(
        x, n=2, dim=1)),
    "rfft_padded_of_cl": lambda m: (x := _cl(m, 2, 3, 4, 5), m.fft.rfft(x, n=6, dim=1)),
}


@pytest.mark.parametrize("name", CASES)
def test_result_memory_as_torch(name):
    want, got = _facts(torch, CASES[name]), _facts(flow, CASES[name])
    assert got[0] == want[0], (name, want[0], got[0])
    for w, g in zip(want[1:], got[1:]):
        np.testing.assert_allclose(np.array(g), np.array(w), rtol=1e-12, atol=1e-12)


def _einsum_view_grads(m):
    """A write through einsum's view of a result that requires grad: the gradient goes
    through the write to the input, as torch's; a leaf's view is refused."""
    a = _x(m, 3, 3).requires_grad_()
    y = a * 1
    m.einsum("ii->i", y).mul_(m.tensor([2.0, 3.0, 4.0], dtype=m.float64))
    m.einsum("ij->ji", y)[0].add_(m.tensor([5.0, 6.0, 7.0], dtype=m.float64))
    (y * _x(m, 3, 3)).sum().backward()
    with pytest.raises(RuntimeError, match="leaf"):
        m.einsum("ij->ji", a).mul_(2)
    e = a.exp()
    m.einsum("ij->ji", e).add_(1)
    with pytest.raises(RuntimeError, match="modified by an in-?place operation"):
        e.sum().backward()
    return y, a.grad


def test_einsum_view_gradients_as_torch():
    for w, g in zip(_einsum_view_grads(torch), _einsum_view_grads(flow)):
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-12)


def test_roll_gradients_as_torch():
    """roll over the flattened tensor and over dims of a channels_last one: the gradient is
    the opposite roll (flowgrad's rule read an attribute only the dims path set)."""
    def grads(m):
        x = _cl(m, 2, 3, 4, 5).requires_grad_()
        w = _x(m, 2, 3, 4, 5)
        ((m.roll(x, 7) + m.roll(x, (1, 2), (1, 3))) * w).sum().backward()
        return x.grad
    np.testing.assert_array_equal(grads(flow).numpy(), grads(torch).numpy())


def test_unbatched_max_pool3d_of_channels_last_raises_as_torch():
    """A (C, D, H, W) input laid out as channels_last: torch's max_pool3d refuses it."""
    for m in (torch, flow):
        with pytest.raises(RuntimeError, match="Unsupported memory format"):
            m.nn.functional.max_pool3d(_cl(m, 2, 3, 4, 4), 2)
