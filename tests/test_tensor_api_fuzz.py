"""Random programs over the Tensor metadata and storage API (views, set_/resize_/as_strided_,
identity rules, layouts of copies) in torch and in flowgrad must report the same metadata,
values and errors after every step: see tests/tensor_api_fuzz.py. Below them, one test per
difference the fuzz found (each failed before its fix), and KNOWN: what flowgrad does not
copy, each with a case showing it."""
from __future__ import annotations

import warnings

import fuzz_common
import numpy as np
import pytest
import tensor_api_fuzz as taf
import torch

import flowgrad as flow

# what flowgrad does not do as torch, with the reason (the fuzz does not draw these, or does
# not compare them; each has a case below that shows the difference)
KNOWN = {
    "storage growth": "torch's set_/resize_ grow a storage under every tensor over it; "
                      "NumPy memory cannot grow in place (a view refuses, and so does a "
                      "tensor whose memory other tensors or arrays share; one alone moves)",
    "zero-element strides": "NumPy keeps no strides nor storage place for an array with no "
                            "elements (stride(), storage_offset() of an empty view)",
    "stale _base after set_": "torch keeps a view's _base after set_ gives it other memory; "
                              "flowgrad's tensor is no longer a view",
    "set_ onto a grad source": "torch's set_(source that requires grad) makes a tensor that "
                               "requires grad through a NotImplemented grad_fn (backward "
                               "raises); flowgrad's does not require grad",
    "expand()": "no sizes: torch's TypeError; flowgrad's 0-d shape (shape_fuzz's 'no sizes')",
    "overlapping add_": "add_ into an unfold whose windows overlap: torch's result depends on "
                        "its kernel's order (no overlap check for unfold); flowgrad adds to "
                        "each element once",
}
# seeds whose first difference is outside the draw's reach to avoid, with the reason
# (the draw leaves out the writes KNOWN lists: overlapping add_)
KNOWN_SEEDS = {
    5248: "zero-element strides (KNOWN): a zero-size set_ window keeps no storage offset, which "
          "a later set_ onto it counts from",
}


@pytest.mark.parametrize("seed", range(2000))
def test_tensor_api_program_matches_torch(seed):
    if seed in KNOWN_SEEDS:
        pytest.skip(KNOWN_SEEDS[seed])
    verdict = taf.check(seed)
    assert verdict is None, f"{taf.Program(seed).describe()}\n{verdict}"


@pytest.mark.slow
def test_many_tensor_api_programs_match_torch():
    fuzz_common.assert_seeds_agree(taf.check, range(2000, 20000), KNOWN_SEEDS)


def _both(fn):
    """fn(torch), fn(flowgrad)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(torch), fn(flow)


# ---- fixed -----------------------------------------------------------------------------------
def test_is_view_as_torch():
    def f(m):
        x = m.arange(6.0)
        return [x._is_view(), x[1:]._is_view(), x.view(2, 3)._is_view(), x.clone()._is_view()]
    want, got = _both(f)
    assert got == want


@pytest.mark.parametrize("dtype", ["float32", "int32", "int16", "float64"])
def test_view_dtype_is_not_a_tracked_view(dtype):
    # torch's view(dtype) is not differentiable: a plain tensor over the same storage (no
    # _base, no grad) sharing the version counter; flowgrad's was a view that required grad
    def f(m):
        x = m.arange(8.0).view(2, 4).requires_grad_()
        v = x[1].view(getattr(m, dtype))
        with m.no_grad():
            x.add_(1)
        return [v._base is None, v._is_view(), v.requires_grad, v.is_leaf, v.grad_fn is None,
                v.storage_offset(), v.stride(), v._version, v.float().tolist()]
    want, got = _both(f)
    assert got == want


def test_view_dtype_checks_the_storage_offset():
    # x[1, 1:3] starts 5 float32 elements in: not a whole float64 (flowgrad read it anyway)
    for m in (torch, flow):
        x = m.arange(8.0).view(2, 4)
        with pytest.raises(RuntimeError, match="storage_offset"):
            x[1, 1:3].view(m.float64)
        assert x[1, 2:4].view(m.float64).storage_offset() == 3


def test_view_dtype_of_a_broadcast_last_dim_raises():
    for m in (torch, flow):
        with pytest.raises(RuntimeError, match="stride"):
            m.ones(1).expand(3)[:1].view(m.int16)


@pytest.mark.parametrize("make", [
    lambda m: m.arange(24).view(2, 3, 4)[:, :1].permute(2, 0, 1),       # (4, 2, 1)
    lambda m: m.arange(3, dtype=m.int32).view(3, 1).unsqueeze(1).T,     # size-1 dims
    lambda m: m.arange(12).view(3, 4)[:, 1:2].t(),                       # (1, 3), stride 4
    lambda m: m.arange(24).view(2, 3, 4).permute(2, 0, 1),               # dense, permuted
    lambda m: m.arange(6).view(2, 3).expand(2, 2, 3).transpose(0, 2),    # overlapping
])
def test_copies_keep_torchs_preserved_strides(make):
    # preserve_format keeps a dense tensor's strides exactly, those of its size-1 dims too
    # (flowgrad's to()/double()/type_as()/empty_like()/clone() gave NumPy's own there)
    def f(m):
        x = make(m)
        return [x.to(m.float64).stride(), x.double().stride(), x.type_as(m.ones(1)).stride(),
                m.empty_like(x).stride(), m.zeros_like(x, dtype=m.float32).stride(),
                x.clone().stride(), x.to(m.float64, copy=True).tolist()]
    want, got = _both(f)
    assert got == want


# size-1 dims get torch's strides from every view op (NumPy's own: 0 for a new axis, the
# extent after them for a reshape), so later copies, empty_like and dim_order follow torch's
# (tensor_api_fuzz 9006443: unsqueeze_ then empty_like gave strides (6, 12, 3, 1))
@pytest.mark.parametrize("make", [
    lambda m: m.ones(3, 4).t().unsqueeze(-1),                        # (1, 4, 1), not (1, 4, 4)
    lambda m: m.ones(3, 4).t().unsqueeze(1),
    lambda m: m.ones(3, 4).t().view(4, 3, 1),                        # computeStride: (1, 4, 4)
    lambda m: m.ones(3, 4).t().reshape(1, 4, 1, 3),
    lambda m: m.ones(2, 1, 1, 3).transpose(1, 3).squeeze(1),         # the rest keep theirs
    lambda m: m.ones(2, 1, 1, 3).transpose(1, 3).squeeze((1, 2)),
    lambda m: m.ones(3, 1).t().expand(1, 1, 3),                      # a new leading 1
    lambda m: m.ones(3, 1).t()[1:2].expand(2, -1, 3),
    lambda m: m.ones(4)[None, ::2, None],                            # None: unsqueeze's
    lambda m: m.ones(2, 3).t()[..., None, 1:],
    lambda m: m.ones(1, 1).diagonal().flatten(),
    lambda m: m.arange(6.0).view(2, 3)[1::2].contiguous().unsqueeze(0),
    lambda m: m.ones(2, 3, 4).transpose(0, 1).unsqueeze_(2).clone(),
    lambda m: m.empty_like(m.ones(3, 1).unfold(0, 2, 1).unsqueeze_(-1).transpose(0, -2)
                           .unsqueeze_(1).clone().expand(2, 3, 1, -1, 3)),
])
def test_size_one_dims_get_torchs_strides(make):
    want, got = _both(lambda m: (make(m).stride(), make(m).dim_order()))
    assert got == want


def test_dim_order_of_a_both_contiguous_and_channels_last_tensor():
    # a 4-d tensor whose size-1 dims make it contiguous and channels-last by strides: torch
    # sorts its dims (flowgrad's (1, 0, 2, 3)-like orders came from NumPy's size-1 strides)
    want, got = _both(lambda m: [m.ones(3, 2, 1, 2).unsqueeze(-5).transpose_(-5, -4)
                                 .dim_order(), m.ones(2, 1, 1, 3).dim_order(),
                                 m.ones(2, 3, 1, 1).permute(0, 2, 3, 1).dim_order()])
    assert got == want


def test_view_dtype_of_a_size_one_last_dim_with_another_stride_raises():
    for m in (torch, flow):
        with pytest.raises(RuntimeError, match="stride"):
            m.zeros(1, 4, dtype=m.float16).t().view(m.uint8)


def test_a_size_one_view_with_other_strides_partially_overlaps():
    # torch's overlap check compares every stride: t[::2] of a 1-element t is a partial
    # overlap of t (program_fuzz 9005945: flowgrad added in place)
    for m in (torch, flow):
        for write in (lambda t: t[::2].add_(t), lambda t: t.copy_(t[::3])):
            x = m.arange(4.0)
            with pytest.raises(RuntimeError, match="memory location"):
                write(x.narrow(0, 2, 1))
    x = flow.arange(4.0)
    x[:1].add_(x[:1])
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_as_strided_in_place_keeps_base_none():
    def f(m):
        x = m.arange(6.0)
        x.as_strided_((2, 2), (1, 2), 1)
        v = x[0]
        y = m.arange(6.0)[1:]
        y.as_strided_((2,), (1,))
        return [x._base is None, x._is_view(), v._base is x, y._base is None, y._is_view(),
                x.storage_offset(), v.storage_offset(), y.storage_offset()]
    want, got = _both(f)
    assert got == want


def test_contiguous_refuses_preserve_format_for_a_non_contiguous_tensor():
    for m in (torch, flow):
        x = m.ones(2, 3)
        assert x.contiguous(memory_format=m.preserve_format) is x
        with pytest.raises(RuntimeError, match="preserve memory format"):
            x.t().contiguous(memory_format=m.preserve_format)


def test_resize_of_a_view_or_a_shared_tensor_reads_its_storage():
    # torch: contiguous strides from the same storage offset, over the same storage; flowgrad
    # refused a view, and took a non-contiguous tensor's own elements (other numbers)
    def f(m):
        x = m.arange(8.0)
        v = x[2:6]
        v.resize_(2, 2)
        d = x[1::2].detach()
        d.resize_(3)
        y = m.arange(6.0).view(2, 3).t().detach()
        y.resize_(2, 2)
        v[0, 0] = 100.0
        return [v.tolist(), v._base is x, v.storage_offset(), v.stride(), d.tolist(),
                d.storage_offset(), y.tolist(), y.stride(), x.tolist()]
    want, got = _both(f)
    assert got == want


def test_offsets_of_views_of_a_tensor_set_into_a_storage():
    # the views' storage offsets and as_strided's storage: of the storage, not of their base
    def f(m):
        x = m.arange(6.0)
        x.resize_(3)
        w = x.t().as_strided((1,), (3,), 3)
        y = m.zeros(1).set_(m.arange(6.0).untyped_storage(), 3, (2,), (1,))
        c = m.arange(4.0).to(m.complex64)
        c.set_(c.untyped_storage(), 1, (2,), (1,))
        return [w.tolist(), w.storage_offset(), y.view(2, 1).storage_offset(),
                y[1:].storage_offset(), c.real.storage_offset(), c[1:].imag.storage_offset()]
    want, got = _both(f)
    assert got == want


def test_set_onto_a_window_of_a_tensor_of_another_dtype():
    # with an offset and a size torch reads the source's storage in this tensor's dtype
    def f(m):
        s = m.arange(4, dtype=m.int16)
        a = m.zeros(1, dtype=m.bfloat16).set_(s, 1, (2,))
        b = m.zeros(1, dtype=m.float32).set_(s, 1, (1,))
        return [str(a.dtype), tuple(a.shape), a.storage_offset(), b.storage_offset(),
                a.view(m.int16).tolist()]
    want, got = _both(f)
    assert [w.replace("torch", "flowgrad") if isinstance(w, str) else w for w in want] == got
    for m in (torch, flow):  # (the tensor itself as source: the dtypes must agree)
        with pytest.raises(RuntimeError):
            m.zeros(1, dtype=m.bfloat16).set_(m.arange(4, dtype=m.int16))


def test_set_window_counts_from_the_source_offset_and_keeps_same_size_strides():
    # torch's set_(tensor, offset, size): the offset from the source's own storage offset (a
    # count of elements), and the same sizes with no stride keep this tensor's strides
    def f(m):
        s = m.arange(8.0)[3:]
        a = m.zeros(1).set_(s, 2, (1,))
        b = m.zeros(4, 3).t()
        b.set_(m.arange(12.0), 0, (3, 4))
        c = m.zeros(1, dtype=m.float64).set_(m.arange(8.0)[1:], 1, (1,))  # (float32 source)
        return [a.storage_offset(), a.tolist(), b.stride(), b.tolist(), c.storage_offset()]
    want, got = _both(f)
    assert got == want


def test_set_reads_an_empty_stride_as_none_given():
    # torch's set_(storage, offset, size, ()): no stride (contiguous, or this tensor's own
    # strides for its own sizes); flowgrad refused it as one stride short per size
    def f(m):
        t = m.arange(12.0).view(3, 4).t()
        t.set_(t.untyped_storage(), 0, (4, 3), ())
        u = m.arange(12.0).view(3, 4)
        u.set_(u.untyped_storage(), 1, (2, 2), [])
        return [t.stride(), t.tolist(), u.stride(), u.tolist()]
    want, got = _both(f)
    assert got == want


def test_new_channels_last_tensors_take_torch_strides_for_size_1_dims():
    # a new tensor in a format asked for has get_channels_last_strides' strides, a size-1
    # dim's too (the channel's is 1); flowgrad kept a row-major array whose size-1 dims lay
    # anywhere (contiguous(channels_last) may keep them: torch's does too)
    def f(m):
        out = []
        for shape, fmt in [((2, 1, 3, 2), m.channels_last), ((2, 3, 1, 1), m.channels_last),
                           ((2, 1, 1, 3, 2), m.channels_last_3d)]:
            x = m.zeros(shape)
            out += [m.empty_like(x, memory_format=fmt).stride(),
                    m.ones_like(x, memory_format=fmt).stride(),
                    m.full_like(x, 2.0, memory_format=fmt).stride(),
                    m.rand_like(x, memory_format=fmt).stride(),
                    m.empty(shape, memory_format=fmt).stride(),
                    x.contiguous(memory_format=fmt).stride()]
        return out
    want, got = _both(f)
    assert got == want


def test_set_zero_size_window_and_overlapping_window():
    def f(m):
        e = m.zeros(1, dtype=m.int16).set_(m.zeros(1, dtype=m.int16).untyped_storage(), 3,
                                            (0,), (1,))
        o = m.zeros(1).set_(m.arange(4.0), 1, (2, 2), (0, 0))
        try:
            o.add_(1)  # (one memory location under several elements: refused)
            wrote = True
        except RuntimeError:
            wrote = False
        o.fill_(3)
        return [tuple(e.shape), wrote, o.tolist()]
    want, got = _both(f)
    assert got == want


def test_as_strided_over_imag_of_a_complex_root_and_past_a_resized_one():
    def f(m):
        c = m.ones(1, 4, dtype=m.complex128).expand(1, 3, 4).imag
        c.as_strided_((2, 2), (3, 3))
        x = m.arange(6.0)
        x.resize_(3)
        v = x.as_strided((), (), 2)
        return [c.tolist(), c.storage_offset(), v._base is x, v.item()]
    want, got = _both(f)
    assert got == want


def test_view_dtype_checks_every_stride():
    for m in (torch, flow):
        with pytest.raises(RuntimeError, match=r"stride\(0\)"):
            m.arange(3, dtype=m.int32).unfold(0, 2, 1).view(m.float64)


def test_to_keeps_the_layout_for_preserve_format():
    def f(m):
        x = m.ones(2, 3).t()
        return [x.to(m.float64, memory_format=m.preserve_format).stride(),
                x.to(m.float64, memory_format=m.contiguous_format).stride()]
    want, got = _both(f)
    assert got == want


def test_resize_grows_a_tensor_at_an_offset_as_torch():
    # the grown storage keeps the old bytes first and the tensor at its offset (flowgrad took
    # the tensor's own elements from offset 0; an as_strided_ tensor refused as a view)
    def f(m):
        x = m.arange(6.0)
        x.as_strided_((2,), (2,), 1)
        x.resize_(2, 3)
        y = m.arange(4.0)[1::2].detach()
        y.resize_(5)
        return [x[:, :2].tolist(), x.storage_offset(), x._base is None, y[:3].tolist(),
                y.storage_offset(), y.untyped_storage().nbytes()]
    want, got = _both(f)
    assert got == want


# ---- KNOWN -----------------------------------------------------------------------------------
def test_known_storage_growth():
    x = torch.arange(4.0)
    v = x[2:]
    v.resize_(4)  # torch grows x's storage under x and v
    assert v.untyped_storage().nbytes() == 24
    fx = flow.arange(4.0)
    with pytest.raises(NotImplementedError, match="growing a view"):  # KNOWN
        fx[2:].resize_(4)
    with pytest.raises(RuntimeError, match="grows the storage"):  # KNOWN
        flow.zeros(1).set_(fx, 2, (3,))


def test_known_zero_element_strides():
    assert torch.zeros(2, 0, 3).stride() == (3, 3, 1)
    assert torch.arange(6.0)[4:4].storage_offset() == 4
    assert flow.arange(6.0)[4:4].storage_offset() == 0  # KNOWN
    assert np.zeros((2, 0, 3)).strides == (0, 0, 0)  # (NumPy's own)


@pytest.mark.parametrize("make", [
    lambda m: m.full((3, 1), 2.0, dtype=m.bfloat16).t().as_strided((2, 2), (1, 0), 1),
    lambda m: m.zeros(5, dtype=m.bfloat16).narrow(0, 2, 1).as_strided((2,), (1,)).expand(-1),
    lambda m: m.zeros(5, dtype=m.bfloat16)[:1].expand(3),
    lambda m: m.zeros(2, 3, dtype=m.bfloat16)[:, :1].expand(2, 1)])
@pytest.mark.parametrize("write", ["fill_", "add_", "zero_"])
def test_bfloat16_writes_through_expands(make, write):
    # an expand's writable alias came back as raw 'V2' bytes (the array interface's spelling
    # of bfloat16): NumPy's "No cast function available" (seeds 5004554, 5009957), KNOWN
    # before as "bfloat16 stride-0 writes"
    outcomes = []
    for m in (torch, flow):
        t = make(m)
        try:
            with m.no_grad():
                getattr(t, write)(*([] if write == "zero_" else [1]))
            outcomes.append(t.float().tolist())
        except RuntimeError as e:  # (torch's overlap refusal of add_ into an aliased expand)
            outcomes.append(type(e).__name__)
    assert outcomes[1] == outcomes[0]


def test_known_overlapping_add():
    t = torch.arange(6).unfold(0, 2, 1)
    t.add_(1)
    f = flow.arange(6).unfold(0, 2, 1)
    f.add_(1)
    assert t.tolist() != f.tolist()  # KNOWN (torch's: its kernel's order)
    assert f.tolist() == [[1, 2], [2, 3], [3, 4], [4, 5], [5, 6]]


def test_known_set_onto_a_grad_source():
    x = torch.zeros(3)
    x.set_(torch.ones(2, requires_grad=True))
    fx = flow.zeros(3)
    fx.set_(flow.ones(2, requires_grad=True))
    assert x.requires_grad and not fx.requires_grad  # KNOWN


def test_known_stale_base_after_set():
    x = torch.arange(6.0)
    v = x[1:]
    with torch.no_grad():
        v.set_(torch.zeros(2))
    assert v._base is x
    fx = flow.arange(6.0)
    fv = fx[1:]
    fv.set_(flow.zeros(2))
    assert fv._base is None  # KNOWN


def test_setitem_into_a_new_dim_region_from_its_own_elements_runs():
    # x[0, None] = x.view(-1): torch expands the value with a leading 1 of stride 3 (not
    # NumPy's 0), the region's own strides: the same elements, no partial overlap
    # (program_fuzz 10002059, once overlap checks compared every stride)
    def f(m):
        x = m.tensor([[-1.81, -1.65, 1.27]], dtype=m.float64)
        x[0, None] = x.view(-1).neg_()
        return x.tolist()
    want, got = _both(f)
    assert got == want


@pytest.mark.parametrize("copy", ["clone", "contiguous", "flip", "expand"])
def test_copies_of_a_bool_view_of_bytes_write_zero_or_one(copy):
    """torch's copies write each bool as 0 or 1: a bool view of uint8 2 copies as 1, seen
    through a later view of the bytes; NumPy's copy kept the 2 (tensor_api_fuzz 10633580)."""
    import torch

    def run(m):
        b = m.tensor([0, 1, 2, 255, 4, 0], dtype=m.uint8).view(m.bool)
        y = {"clone": lambda: b.clone(), "contiguous": lambda: b[::2].contiguous(),
             "flip": lambda: b.flip(0), "expand": lambda: b[2:3].expand(3).contiguous()}[copy]()
        return y.view(m.uint8).tolist()
    assert run(flow) == run(torch)
