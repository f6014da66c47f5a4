"""Shape ops (issue 3): views, reorderings, splits, joins, diagonals, pad, against torch
(forward and backward) and by float64 finite differences to second order; view ops share
storage; bad arguments raise; hypothesis checks shapes against torch."""
import numpy as np
import pytest
import torch
from helpers import check, gradcheck, op_table_tests
from hypothesis import given, settings
from hypothesis import strategies as st

import flowgrad as flow


def F(m):
    return m.nn.functional


CASES = [
    ("reshape", lambda m, x: x.reshape(3, -1), (2, 3, 2)),
    ("reshape_fn", lambda m, x: m.reshape(x, (12,)), (3, 4)),
    ("view", lambda m, x: x.view(-1, 2), (3, 4)),
    ("view_as", lambda m, x, y: x.view_as(y), (3, 4), (6, 2)),
    ("flatten", lambda m, x: m.flatten(x, 0, 1), (2, 3, 2)),
    ("unflatten", lambda m, x: x.unflatten(1, (2, -1)), (3, 4)),
    ("squeeze_all", lambda m, x: x.squeeze(), (1, 3, 1, 2)),
    ("squeeze_dims", lambda m, x: x.squeeze((0, 2)), (1, 3, 1, 2)),
    ("unsqueeze", lambda m, x: m.unsqueeze(x, 1), (3, 2)),
    ("transpose", lambda m, x: m.transpose(x, -1, 0), (2, 3, 2)),
    ("swapaxes", lambda m, x: x.swapaxes(0, 1), (2, 3)),
    ("permute", lambda m, x: x.permute((1, 2, 0)), (2, 3, 2)),
    ("movedim", lambda m, x: m.movedim(x, 0, -1), (2, 3, 2)),
    ("movedim_multi", lambda m, x: x.movedim((0, 1), (2, 0)), (2, 3, 2)),
    ("moveaxis", lambda m, x: m.moveaxis(x, -1, 0), (2, 3)),
    ("expand", lambda m, x: x.expand(2, -1, 3), (3, 1)),
    ("expand_as", lambda m, x, y: x.expand_as(y), (1, 3), (2, 3)),
    ("broadcast_to", lambda m, x: m.broadcast_to(x, (2, 3, 2)), (3, 1)),
    ("broadcast_tensors", lambda m, x, y: m.broadcast_tensors(x, y), (3, 1), (1, 2)),
    ("repeat", lambda m, x: x.repeat(2, 1, 3), (2, 2)),
    ("repeat_same_rank", lambda m, x: x.repeat(2, 2), (2, 3)),
    ("tile", lambda m, x: m.tile(x, (2,)), (2, 3)),
    ("repeat_interleave", lambda m, x: x.repeat_interleave(2, dim=1), (2, 3)),
    ("repeat_interleave_flat", lambda m, x: m.repeat_interleave(x, 3), (2, 2)),
    ("repeat_interleave_tensor",
     lambda m, x: x.repeat_interleave(m.tensor([1, 0, 2]), dim=0), (3, 2)),
    ("flip", lambda m, x: x.flip(0, 2), (2, 3, 2)),
    ("flip_list", lambda m, x: m.flip(x, [-1]), (2, 3)),
    ("fliplr", lambda m, x: m.fliplr(x), (2, 3)),
    ("flipud", lambda m, x: m.flipud(x), (2, 3)),
    ("roll", lambda m, x: x.roll(1, 1), (2, 3)),
    ("roll_multi", lambda m, x: m.roll(x, (1, -2), (0, 1)), (2, 3)),
    ("roll_flat", lambda m, x: m.roll(x, 4), (2, 3)),
    ("rot90", lambda m, x: m.rot90(x), (2, 3)),
    ("rot90_k2", lambda m, x: m.rot90(x, 2, (1, 2)), (2, 3, 2)),
    ("rot90_k3", lambda m, x: x.rot90(-1, [0, 1]), (2, 3)),
    ("narrow", lambda m, x: x.narrow(1, 1, 2), (2, 4)),
    ("narrow_neg", lambda m, x: m.narrow(x, -1, -3, 2), (2, 4)),
    ("select", lambda m, x: x.select(1, -1), (2, 3, 2)),
    ("unbind", lambda m, x: x.unbind(1), (2, 3)),
    ("unbind_partial", lambda m, x: x.unbind(0)[1], (3, 2)),
    ("split_size", lambda m, x: x.split(2, dim=1), (2, 5)),
    ("split_sizes", lambda m, x: m.split(x, [1, 3, 1], 1), (2, 5)),
    ("split_partial", lambda m, x: x.split(2)[1], (5, 2)),
    ("chunk", lambda m, x: x.chunk(3, -1), (2, 5)),
    ("chunk_fewer", lambda m, x: m.chunk(x, 4, 0), (6, 1)),
    ("tensor_split_n", lambda m, x: m.tensor_split(x, 3, 1), (2, 5)),
    ("tensor_split_idx", lambda m, x: x.tensor_split([1, 4], dim=1), (2, 5)),
    ("tensor_split_dec", lambda m, x: x.tensor_split([3, 1]), (5, 2)),
    ("hsplit", lambda m, x: m.hsplit(x, 2), (2, 4)),
    ("vsplit", lambda m, x: m.vsplit(x, [1]), (3, 2)),
    ("cat", lambda m, x, y: m.cat((x, y), -1), (2, 3), (2, 1)),
    ("cat_three", lambda m, x, y, z: m.cat([x, y, z]), (1, 2), (2, 2), (3, 2)),
    ("concat", lambda m, x, y: m.concat([x, y], 1), (2, 1), (2, 2)),
    ("stack", lambda m, x, y: m.stack([x, y], 1), (2, 3), (2, 3)),
    ("hstack", lambda m, x, y: m.hstack([x, y]), (2, 1), (2, 3)),
    ("hstack_1d", lambda m, x, y: m.hstack([x, y]), (2,), (3,)),
    ("vstack", lambda m, x, y: m.vstack([x, y]), (3,), (2, 3)),
    ("dstack", lambda m, x, y: m.dstack([x, y]), (2, 3), (2, 3)),
    ("column_stack", lambda m, x, y: m.column_stack([x, y]), (3,), (3, 2)),
    ("meshgrid_ij", lambda m, x, y: m.meshgrid(x, y, indexing="ij"), (3,), (2,)),
    ("meshgrid_xy", lambda m, x, y, z: m.meshgrid(x, y, z, indexing="xy"), (3,), (2,), (2,)),
    ("tril", lambda m, x: x.tril(), (3, 4)),
    ("tril_k", lambda m, x: m.tril(x, -1), (2, 3, 3)),
    ("triu", lambda m, x: m.triu(x, 1), (3, 4)),
    ("diag_vec", lambda m, x: m.diag(x), (3,)),
    ("diag_vec_k", lambda m, x: m.diag(x, -1), (3,)),
    ("diag_mat", lambda m, x: x.diag(1), (3, 4)),
    ("diagonal", lambda m, x: x.diagonal(), (3, 4)),
    ("diagonal_args", lambda m, x: m.diagonal(x, -1, 2, 0), (3, 2, 4)),
    ("diagonal_off", lambda m, x: m.diagonal(x, 2, -2, -1), (2, 3, 4)),
    ("diag_embed", lambda m, x: m.diag_embed(x), (2, 3)),
    ("diag_embed_args", lambda m, x: m.diag_embed(x, 1, 0, 2), (2, 3)),
    ("diagflat", lambda m, x: m.diagflat(x), (2, 2)),
    ("trace", lambda m, x: m.trace(x), (3, 4)),
    ("pad_constant", lambda m, x: F(m).pad(x, (1, 2)), (2, 3)),
    ("pad_constant_value", lambda m, x: F(m).pad(x, (1, 0, 0, 2, 1, 1), value=2.5), (2, 3, 2)),
    ("pad_constant_neg", lambda m, x: F(m).pad(x, (-1, 2, 1, -1)), (3, 4)),
    ("pad_reflect_1d", lambda m, x: F(m).pad(x, (2, 1), mode="reflect"), (2, 4)),
    ("pad_reflect_2d", lambda m, x: F(m).pad(x, (1, 2, 2, 1), mode="reflect"), (1, 3, 3)),
    ("pad_reflect_3d", lambda m, x: F(m).pad(x, (1, 1, 0, 1, 1, 0), mode="reflect"),
     (1, 2, 2, 2)),
    ("pad_replicate", lambda m, x: F(m).pad(x, (2, 1), mode="replicate"), (1, 2, 3)),
    ("pad_replicate_2d", lambda m, x: F(m).pad(x, (1, 1, 2, 0), mode="replicate"),
     (1, 2, 2, 3)),
    ("pad_replicate_3d", lambda m, x: F(m).pad(x, (1, 0, 0, 1, 1, 1), mode="replicate"),
     (2, 2, 2, 2)),
    ("pad_circular", lambda m, x: F(m).pad(x, (2, 1), mode="circular"), (2, 3)),
    ("pad_circular_2d", lambda m, x: F(m).pad(x, (1, 2, 1, 0), mode="circular"), (1, 2, 3)),
    ("pad_circular_neg", lambda m, x: F(m).pad(x, (-1, 2), mode="circular"), (1, 2, 3)),
    ("clone", lambda m, x: x.clone(), (2, 3)),
    ("contiguous", lambda m, x: x.t().contiguous(), (2, 3)),
]


# ops where the second derivative is identically zero still run it: gradcheck returns early
test_against_torch, test_finite_differences = op_table_tests(CASES)


# ---- in-place variants ----------------------------------------------------------------------
INPLACE = [
    ("tril_", lambda m, x: (x * 1).tril_(1), (3, 3)),
    ("triu_", lambda m, x: (x * 1).triu_(), (3, 3)),
]


@pytest.mark.parametrize("case", INPLACE, ids=[c[0] for c in INPLACE])
def test_inplace_against_torch(case):
    name, fn, *specs = case
    check(fn, *specs)
    gradcheck(fn, *specs)


# ---- views share storage ----------------------------------------------------------------------
VIEWS = [
    ("reshape", lambda x: x.reshape(6, 4)),
    ("transpose", lambda x: x.transpose(0, 1)),
    ("permute", lambda x: x.permute(2, 0, 1)),
    ("movedim", lambda x: x.movedim(0, 2)),
    ("select", lambda x: x.select(1, 2)),
    ("narrow", lambda x: x.narrow(2, 1, 2)),
    ("diagonal", lambda x: x.diagonal(0, 1, 2)),
    ("diagonal_off", lambda x: x.diagonal(-1, 2, 1)),
    ("unbind", lambda x: x.unbind(1)[1]),
    ("split", lambda x: x.split(2, 1)[1]),
    ("chunk", lambda x: x.chunk(2, 2)[0]),
    ("tensor_split", lambda x: x.tensor_split(2, 1)[-1]),
    ("getitem", lambda x: x[1, ::2, None, 1:]),
    ("squeeze", lambda x: x[:, :1].squeeze(1)),
    ("unsqueeze", lambda x: x.unsqueeze(0)),
]


@pytest.mark.parametrize("case", VIEWS, ids=[c[0] for c in VIEWS])
def test_views_share_storage(case):
    name, fn = case
    base = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    x, tx = flow.tensor(base), torch.tensor(base)
    v, tv = fn(x), fn(tx)
    assert np.shares_memory(v.numpy(), x.numpy())
    before = x._version
    v[...] = -1.0
    tv.fill_(-1.0)
    np.testing.assert_array_equal(x.numpy(), tx.numpy())
    assert x._version > before  # the base sees the write


def test_expand_shares_storage():
    x = flow.zeros(1, 3)
    assert np.shares_memory(x.expand(4, 3).numpy(), x.numpy())


def test_split_backward_of_unused_pieces_is_zero():
    x = flow.randn(5, 2, requires_grad=True)
    a, b, c = x.split(2)
    (b * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.repeat([0, 0, 3, 3, 0], 2).reshape(5, 2))


# ---- bad arguments ------------------------------------------------------------------------------
def _x(*shape):
    return flow.zeros(*shape)


ERRORS = [
    ("reshape", lambda: _x(2, 3).reshape(4, 2), RuntimeError, r"shape '\[4, 2\]' is invalid"),
    ("view_stride", lambda: _x(2, 3).t().view(6), RuntimeError, "view size is not compatible"),
    ("permute_len", lambda: _x(2, 3).permute(0), RuntimeError, "number of dims don't match"),
    ("permute_dup", lambda: _x(2, 3).permute(1, 1), RuntimeError, "repeated dim"),
    ("transpose_dim", lambda: _x(2, 3).transpose(0, 2), IndexError, "Dimension out of range"),
    ("movedim_len", lambda: _x(2, 3).movedim((0, 1), 0), RuntimeError, "same number of dims"),
    ("movedim_dup", lambda: _x(2, 3).movedim((0, 0), (0, 1)), RuntimeError, "repeated dim"),
    ("expand", lambda: _x(2, 3).expand(3, 3), RuntimeError, r"expanded size.*\(3\).*\(2\)"),
    ("squeeze_dim", lambda: _x(2, 1).squeeze(2), IndexError, "Dimension out of range"),
    ("unsqueeze_dim", lambda: _x(2).unsqueeze(3), IndexError, "Dimension out of range"),
    ("flatten_order", lambda: _x(2, 3, 4).flatten(2, 1), RuntimeError, "cannot come after"),
    ("unflatten", lambda: _x(2, 6).unflatten(1, (4, -1)), RuntimeError, "is invalid"),
    ("repeat_few", lambda: _x(2, 3).repeat(2), RuntimeError, "can not be smaller"),
    ("repeat_interleave", lambda: _x(3).repeat_interleave(flow.tensor([1, 2])),
     RuntimeError, "same size as input"),
    ("flip_dup", lambda: _x(2, 3).flip(0, 0), RuntimeError, "appears multiple times"),
    ("flip_dim", lambda: _x(2, 3).flip(2), IndexError, "Dimension out of range"),
    ("roll_align", lambda: _x(2, 3).roll((1, 2), 0), RuntimeError, "must align"),
    ("rot90_dims", lambda: flow.rot90(_x(2, 3), 1, (0, 0)), RuntimeError, "different"),
    ("rot90_1d", lambda: flow.rot90(_x(3)), RuntimeError, "total dims >= 2"),
    ("narrow_range", lambda: _x(2, 3).narrow(1, 2, 2), RuntimeError, r"start \(2\).*length"),
    ("select_range", lambda: _x(2, 3).select(1, 3), IndexError, "index 3 out of range"),
    ("split_sizes", lambda: _x(5).split([2, 2]), RuntimeError, "sum exactly to 5"),
    ("split_zero", lambda: _x(5).split(0), RuntimeError, "split_size can only be 0"),
    ("chunk_zero", lambda: _x(5).chunk(0), RuntimeError, "greater than 0"),
    ("tensor_split", lambda: _x(5).tensor_split(0), RuntimeError, "larger than 0"),
    ("hsplit_div", lambda: flow.hsplit(_x(2, 5), 2), RuntimeError, "not divisible"),
    ("unbind_0d", lambda: flow.tensor(1.0).unbind(), IndexError, "no dimensions"),
    ("cat_shapes", lambda: flow.cat([_x(2, 3), _x(3, 2)]), RuntimeError,
     "Sizes of tensors must match"),
    ("cat_empty", lambda: flow.cat([]), ValueError, "non-empty list"),  # as torch
    ("cat_dim", lambda: flow.cat([_x(2), _x(2)], 1), IndexError, "Dimension out of range"),
    ("stack_shapes", lambda: flow.stack([_x(2, 3), _x(3, 2)]), RuntimeError,
     "stack expects each tensor to be equal size"),
    ("broadcast_tensors", lambda: flow.broadcast_tensors(_x(2), _x(3)), RuntimeError,
     "cannot be broadcast"),
    ("broadcast_shapes", lambda: flow.broadcast_shapes((2,), (3,)), RuntimeError,
     "cannot be broadcast"),
    ("meshgrid_indexing", lambda: flow.meshgrid(_x(2), _x(3), indexing="ji"), RuntimeError,
     "indexing must be one of"),
    ("meshgrid_2d", lambda: flow.meshgrid(_x(2, 2), _x(3)), RuntimeError, "0D or 1D"),
    ("tril_1d", lambda: flow.tril(_x(3)), RuntimeError, "at least 2 dimensions"),
    ("diagonal_same", lambda: _x(2, 3).diagonal(0, 1, 1), RuntimeError, "cannot be identical"),
    ("diag_3d", lambda: flow.diag(_x(2, 2, 2)), RuntimeError, "1D or 2D"),
    ("trace_3d", lambda: flow.trace(_x(2, 2, 2)), RuntimeError, "expected a matrix"),
    ("pad_mode", lambda: flow.nn.functional.pad(_x(2, 3), (1, 1), mode="mirror"),
     NotImplementedError, "Unrecognised padding mode mirror"),
    ("pad_odd", lambda: flow.nn.functional.pad(_x(2, 3), (1,)), RuntimeError,
     "divisible by 2"),
    ("pad_long", lambda: flow.nn.functional.pad(_x(2), (1, 1, 1, 1)), RuntimeError,
     "less than or equal to two times"),
    ("pad_reflect_size", lambda: flow.nn.functional.pad(_x(1, 2, 3), (3, 0), mode="reflect"),
     RuntimeError, "should be less than the corresponding input dimension"),
    ("pad_reflect_dims", lambda: flow.nn.functional.pad(_x(2, 3), (1, 1, 1, 1),
                                                        mode="reflect"),
     NotImplementedError, "Padding size 4 is not supported for 2D"),
    ("pad_circular_wrap", lambda: flow.nn.functional.pad(_x(1, 2), (3, 0), mode="circular"),
     RuntimeError, "wrapping around more than once"),
    ("pad_value", lambda: flow.nn.functional.pad(_x(1, 2), (1, 0), mode="replicate",
                                                 value=1.0),
     RuntimeError, "doesn't take in value"),
]


@pytest.mark.parametrize("case", ERRORS, ids=[c[0] for c in ERRORS])
def test_bad_arguments(case):
    name, fn, exc, match = case
    with pytest.raises(exc, match=match):
        fn()


# ---- property tests: shapes against torch ------------------------------------------------------
_dims = st.lists(st.integers(1, 3), min_size=0, max_size=4)


@settings(max_examples=25, deadline=None)
@given(_dims, st.data())
def test_broadcasting_matches_torch(shape, data):
    other = [data.draw(st.sampled_from([1, s])) for s in shape][data.draw(st.integers(0, 2)):]
    a, b = np.ones(shape, np.float32), np.full(other, 2.0, np.float32)
    ours = flow.tensor(a) + flow.tensor(b)
    theirs = torch.tensor(a) + torch.tensor(b)
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert tuple(flow.broadcast_shapes(shape, other)) == tuple(torch.broadcast_shapes(shape,
                                                                                      other))


@settings(max_examples=25, deadline=None)
@given(_dims, st.data())
def test_reshape_matches_torch(shape, data):
    n = int(np.prod(shape))
    divisors = [d for d in range(1, n + 1) if n % d == 0]
    d = data.draw(st.sampled_from(divisors))
    new = (d, -1) if data.draw(st.booleans()) else (-1, d)
    base = np.arange(n, dtype=np.float32).reshape(shape)
    np.testing.assert_array_equal(flow.tensor(base).reshape(new).numpy(),
                                  torch.tensor(base).reshape(new).numpy())


@settings(max_examples=25, deadline=None)
@given(_dims.filter(len), st.data())
def test_permute_matches_torch(shape, data):
    perm = data.draw(st.permutations(range(len(shape))))
    base = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    ours, theirs = flow.tensor(base).permute(*perm), torch.tensor(base).permute(*perm)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    assert ours.stride() == theirs.stride()


def test_cat_of_one_dim_empty_tensors_is_torchs():
    """A 1-D empty tensor joins a cat of higher-dim tensors as nothing, wherever it stands (it
    was taken for the reference shape when first, and raised); a cat of only 1-D empty
    tensors keeps every input's history (a chunk's backward of empty pieces lost it: program
    fuzz seed 8001136); 0-d inputs are refused wherever they stand."""
    got = []
    for m in (torch, flow):
        a, b, c = m.zeros(0, requires_grad=True) * 1, m.zeros(0), m.zeros(2, 3)
        row = [m.cat([b, a]).requires_grad, m.cat([a, b]).requires_grad,
               tuple(m.cat([b, c, b]).shape), tuple(m.cat([b, c], dim=-1).shape),
               tuple(m.cat([b, b]).shape)]
        for bad in ([m.zeros(()), c], [c, m.zeros(())], [b, m.zeros(())]):
            with pytest.raises(RuntimeError, match="zero-dimensional"):
                m.cat(bad)
        x = m.tensor([[-1.74], [1.05], [-1.4]], dtype=m.float64, requires_grad=True)
        _, piece, _ = x.diagonal(1).chunk(3, 0)
        (g,) = m.autograd.grad((piece.tanh() * piece).sum(), [x], create_graph=True)
        row += [g.requires_grad, g.tolist()]
        got.append(row)
    assert got[1] == got[0]


@pytest.mark.parametrize("call", [
    lambda m, x: x.view(np.int32(6)), lambda m, x: x.view(np.int64(3), 2),
    lambda m, x: x.view((np.int64(2), -1)), lambda m, x: x.reshape(np.int64(3), np.int32(2)),
    lambda m, x: x.expand(np.int64(2), 2, 3), lambda m, x: x.repeat(np.int64(2), 1),
    lambda m, x: x.sum(dim=np.int64(1)), lambda m, x: x.transpose(np.int64(0), 1),
    lambda m, x: x.unsqueeze(np.int64(0)), lambda m, x: m.zeros(np.int64(2), 3),
    lambda m, x: m.cat([x, x], dim=np.int64(1)), lambda m, x: x[np.int64(1)],
    lambda m, x: x.narrow(np.int64(1), np.int64(1), np.int64(2)),
    lambda m, x: x.flatten(np.int64(0)), lambda m, x: x.view(m.int32),
])
def test_numpy_integers_as_sizes_and_dims(call):
    # a NumPy integer is an int wherever torch takes one (view(np.int32(6)) once read the
    # bytes as int32: an int32 NumPy scalar was taken for a dtype)
    want = call(torch, torch.arange(6.0).reshape(2, 3))
    got = call(flow, flow.arange(6.0).reshape(2, 3))
    assert tuple(got.shape) == tuple(want.shape) and str(got.dtype)[-5:] == str(want.dtype)[-5:]
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_inplace_shape_methods_as_torch():
    # t_, transpose_, swapdims_, swapaxes_, squeeze_, unsqueeze_: the tensor takes the view's
    # layout, keeps its storage (a view made before sees later writes) and bumps its version
    got = []
    for m in (torch, flow):
        z = m.zeros(2, 1, 3)
        steps = [z.squeeze_(), z.unsqueeze_(0), z.transpose_(0, 2), z.swapdims_(0, 1),
                 z.swapaxes_(0, 1)]
        w = m.arange(6.0).view(2, 3).clone()
        before = w.t()
        w.t_()
        w[0, 1] = 9.0
        version = w._version
        got.append(([tuple(s.shape) for s in steps], z.stride(), tuple(w.shape), w.tolist(),
                     before.tolist(), version, all(s is z for s in steps)))
    assert got[0] == got[1]
    for m in (torch, flow):  # (more in test_layout_inplace_vs_torch.py)
        with pytest.raises(RuntimeError, match="leaf"):
            m.ones(2, 3, requires_grad=True).t_()
        assert tuple(m.ones(2, 3)[0:1].t_().shape) == (3, 1)
