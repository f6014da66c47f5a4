"""Every OpInfo's `out=` form against torch (opinfo_out.py does the work, torch test_ops' test_out
family): an out of the right shape and dtype, a strided or transposed view of a buffer, an
empty or wrongly shaped out (resized, with or without torch's warning), an out of another
dtype (cast or refused), inputs or an out that require grad, and out aliasing the input of an
elementwise op: raise/no-raise, identity, version counter, values, strides, the buffer around.

The default tier runs each OpInfo's first float64 sample (every case); the slow tier every
sample in float64, int64, bool and complex128 (and only it checks that each KNOWN entry still
matches something). A finding fails unless KNOWN explains it (a pattern its messages match,
with the reason).
"""
from __future__ import annotations

import warnings

import pytest

pytest.importorskip("expecttest")  # torch's test internals import it

import torch  # noqa: E402
from opinfo_out import probe  # noqa: E402
from opinfo_vs_torch import assert_explained, full_name, one_thread, op_db  # noqa: E402
from test_opinfo_vs_torch import KNOWN as FUNCTION_KNOWN  # noqa: E402
from test_opinfo_vs_torch import MISSING  # noqa: E402

import flowgrad as flow  # noqa: E402

DTYPES = (torch.float64, torch.int64, torch.bool, torch.complex128)
FIRST_DTYPES = DTYPES[:1]  # the default tier's (CPU budget); the fixes: their own tests

_NO_OUT = r"unexpected keyword argument 'out'"
_R_NO_OUT = ("flowgrad's function takes no out= yet (a clear TypeError): torch.nn.functional's "
             "activations, pools and linear, torch.normal and native_batch_norm are "
             "called without out= in torch code")
_TORCH_VERSION = (r"version: torch 0 -> 0",
                  "torch writes the result through an internal view of `out` (an _unsafe_view "
                  "with a counter of its own), so out's version stays 0; flowgrad's write is an "
                  "in-place write of out and moves its counter, as any write")
_TORCH_NO_OUT_KERNEL = (r"raise: torch NotImplementedError\('.(nansum|std)_cpu. not "
                        r"implemented|raise type: torch NotImplementedError",
                        "torch's out= kernel lacks the dtype its function handles (std/var of "
                        "complex, nanmean of complex through its nansum): a torch gap; "
                        "flowgrad computes it")

KNOWN: dict[str, tuple[str, str]] = {
    **{name: (_NO_OUT, _R_NO_OUT) for name in (
        "native_batch_norm", "lu",
        "nn.functional.avg_pool2d", "nn.functional.avg_pool3d", "nn.functional.gelu",
        "nn.functional.hardshrink", "nn.functional.softshrink", "nn.functional.softplus",
        "nn.functional.logsigmoid", "nn.functional.linear")},
    # the function form's own entries (test_opinfo_vs_torch.py), seen through out=
    **{name: (r"out\[0\]: values differ", FUNCTION_KNOWN[name][1]) for name in (
        "special.bessel_j0", "special.bessel_j1", "special.bessel_y1")},
    "kron": _TORCH_VERSION,
    "fft.ihfft2": (_TORCH_VERSION[0] + r"|empty: resize warning: torch True|complex128: raise: "
                   r"torch RuntimeError\('Found dtype ComplexFloat but expected ComplexDouble",
                   "torch's ihfft2/ihfftn out= run a one-sided transform into an internal "
                   "view of out (its version stays 0, and an internal resize warns even for "
                   "an empty out) and want a complex128 out for an int input whose result is "
                   "complex64; flowgrad writes out as every out= function (and casts "
                   "complex64 into complex128)"),
    "fft.ihfftn": ("", "as fft.ihfft2"),
    "fft.ifft": (r"functions with out=\.\.\. arguments don't support automatic|Found dtype "
                 r"ComplexDouble but expected ComplexFloat",
                 "torch's c2c out= of a real input converts it to complex first and never "
                 "checks autograd, and it refuses complex128 out for an int input (complex64 "
                 "result) while fft.fft casts it; flowgrad checks and casts alike for all"),
    "fft.ihfft": ("", "as fft.ifft"),
    "empty": (r"version: torch 0 -> 0",
              "torch.empty(out=) resizes out and writes nothing (version 0); flowgrad's "
              "empty writes its (uninitialised-looking) zeros into out and counts the write"),
    "arange": (r"resize: resize warning: torch False, flowgrad True",
               "torch's arange warns in words of its own (\"The number of elements in the "
               "out tensor of shape ... does not match the computed number\"), not the "
               "resize warning this sweep looks for; flowgrad gives the resize warning"),
    "matmul": (r"resize warning: torch True, flowgrad False|raise: torch RuntimeError\('The "
               r"size of tensor a",
               "torch quirks: a 1-D @ 2-D matmul out= warns about a resize even when out has "
               "the result's shape (its out path folds out through a reshape), and a folded "
               "non-contiguous out is refused with a size error; flowgrad writes the result"),
    "narrow_copy": (r"(strided|transposed): out\[0\]: values differ",
                    "a torch bug: narrow_copy's CPU out= kernel memcpys the rows as if out "
                    "were contiguous, so a strided or transposed out gets scrambled values "
                    "(torch [4, 6, 8, 10] where the right [4, 5, 6, 7]); flowgrad writes "
                    "through the view"),
    "linalg.lu_solve": (r"transposed: buffer\[0\]: values differ",
                        "a torch quirk: left=False with a complex (1, 1) out that is a "
                        "transposed view: torch leaves the conjugate in the buffer under out "
                        "(out itself agrees)"),
    "diff": (r"_type \w+ but found|functions with out=\.\.\. arguments don't support",
             "n=0: torch's diff returns out.copy_(input) by another path, which refuses "
             "an out of another dtype and skips the autograd check; flowgrad's n=0 is the "
             "same as every n (cast, checked)"),
    "inner": (r"inner\(\): Found dtype",
              "inner with a 0-d operand: torch computes it by mul's out= (which casts); "
              "flowgrad keeps inner's exact-dtype rule for every shape"),
    "linalg.matrix_power": (r"matrix_power\(\): (Found dtype|functions with out)",
                            "n=0: torch copies an identity into out (cast, no autograd "
                            "check); flowgrad keeps matrix_power's rules for every n"),
    "norm.nuc": (r"functions with out=\.\.\. arguments don't support",
                 "torch's norm(p='nuc', out=) runs linalg.matrix_norm's composite without "
                 "the autograd check; flowgrad checks"),
    "mean": (r"result type flowgrad\.complex128 can't be cast",
             "torch's mean/logsumexp of a complex input into a float32 out drops the "
             "imaginary part (the reduction runs in out's dtype); flowgrad refuses, as its "
             "cast rule (complex -> real is not safe)"),
    "logsumexp": ("", "as mean"),
    "nonzero": (r"argument 'out' must be Tensor, not tuple",
                "nonzero(as_tuple=True, out=(...)): torch refuses a tuple out, flowgrad writes "
                "each index tensor into it"),
    "nanmean": _TORCH_NO_OUT_KERNEL,
    "std": _TORCH_NO_OUT_KERNEL,
    "var": _TORCH_NO_OUT_KERNEL,
}
for _name, (_pattern, _reason) in list(KNOWN.items()):
    if not _pattern:  # "as <other>": the other's pattern
        KNOWN[_name] = (KNOWN[_reason[3:]][0], _reason)

DB = [info for info in op_db() if info.supports_out]


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with one_thread():  # small tensors: thread pools only spin
        yield


def _check(info, first_only):
    findings = probe(info, FIRST_DTYPES if first_only else DTYPES, first_only=first_only)
    assert_explained(full_name(info), findings, KNOWN, stale_check=not first_only,
                     missing=MISSING)


@pytest.mark.parametrize("info", DB, ids=[full_name(info) for info in DB])
def test_opinfo_out_first_sample_vs_torch(info):
    _check(info, first_only=True)


@pytest.mark.slow
@pytest.mark.parametrize("info", DB, ids=[full_name(info) for info in DB])
def test_opinfo_out_vs_torch(info):
    _check(info, first_only=False)


# ---- the fixes this sweep found, on their own ------------------------------------------------
def _both(call):
    """call(module) in torch and in flowgrad: [(result or the exception type, warned)]."""
    found = []
    for module in (torch, flow):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                result = call(module)
            except (RuntimeError, TypeError) as error:
                result = type(error)
        found.append((result, any("was resized" in str(w.message) for w in caught)))
    return found


def _values(t):
    return t.tolist() if hasattr(t, "tolist") else t


@pytest.mark.parametrize("name,args", [
    ("alias_copy", ()), ("t_copy", ()), ("transpose_copy", (0, 1)),
    ("permute_copy", ((1, 0),)), ("view_copy", ((3, 2),)), ("unsqueeze_copy", (0,)),
    ("squeeze_copy", ()), ("expand_copy", ((2, 2, 3),)), ("diagonal_copy", ()),
    ("as_strided_copy", ((2, 2), (1, 2))), ("unfold_copy", (1, 2, 1)),
    ("slice_copy", (1, 0, 2))])
def test_copy_functions_take_out(name, args):
    """torch's *_copy functions take out= (of the result's dtype; only `out` may not require
    grad): flowgrad raised TypeError (unexpected keyword 'out')."""
    def run(T, out_dtype=None, requires_grad=False):
        x = T.tensor([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]], requires_grad=requires_grad)
        out = T.full((4,), 7.0, dtype=out_dtype and getattr(T, out_dtype))
        result = getattr(T, name)(x, *args, out=out)
        assert result is out
        return out.detach().tolist(), tuple(out.shape)
    for kwargs in ({}, {"requires_grad": True}):
        got = _both(lambda T: run(T, **kwargs))  # noqa: B023 - called at once
        assert got[0] == got[1], (kwargs, got)
    got = _both(lambda T: run(T, out_dtype="float64"))
    assert got[0][0] is got[1][0] is RuntimeError, got
    got = _both(lambda T: getattr(T, name)(T.zeros(2, 3), *args,
                                           out=T.zeros(4, requires_grad=True)))
    assert got[0][0] is got[1][0] is RuntimeError, got


@pytest.mark.parametrize("name,args", [("split_with_sizes_copy", ([1, 1],)),
                                       ("unbind_copy", ())])
def test_list_copy_functions_take_out(name, args):
    """split_with_sizes_copy / unbind_copy write each piece into a list of outs and return
    None, as torch's; a wrong dtype refused."""
    def run(T, dtype=None):
        x = T.tensor([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]])
        outs = [T.zeros(1, 3, dtype=dtype), T.empty(0, dtype=dtype)]
        returned = getattr(T, name)(x, *args, out=outs)
        return returned, [o.tolist() for o in outs]
    assert _both(run)[0] == _both(run)[1]
    got = _both(lambda T: run(T, T.float64))
    assert got[0][0] is got[1][0] is RuntimeError, got


@pytest.mark.parametrize("name,call", [
    ("zeros", lambda T, o: T.zeros(5, out=o)), ("ones", lambda T, o: T.ones(2, 2, out=o)),
    ("full", lambda T, o: T.full((5,), 2.0, out=o)), ("eye", lambda T, o: T.eye(3, out=o)),
    ("linspace", lambda T, o: T.linspace(0, 1, 5, out=o)),
    ("logspace", lambda T, o: T.logspace(0, 1, 5, out=o)),
    ("range", lambda T, o: T.range(0, 4, out=o)),
    ("narrow_copy", lambda T, o: T.narrow_copy(T.ones(3, 4), 0, 0, 2, out=o)),
    ("addbmm", lambda T, o: T.addbmm(T.zeros(3, 4), T.ones(2, 3, 2), T.ones(2, 2, 4), out=o)),
    ("mm", lambda T, o: T.mm(T.ones(3, 2), T.ones(2, 3), out=o))])
def test_factories_resize_out_silently(name, call):
    """torch's factories (and narrow_copy, addbmm) resize a wrongly shaped out without the
    deprecation warning its other out= functions give: flowgrad warned for all."""
    def run(T):
        out = T.zeros(7)
        call(T, out)
        return out.tolist()
    t, f = _both(run)
    assert t == f, (t, f)


@pytest.mark.parametrize("call", [
    lambda T: T.neg(T.tensor([1.5, -2.0], dtype=T.float64), out=T.zeros(2)),
    lambda T: T.negative(T.tensor([1, -2]), out=T.zeros(2)),
    lambda T: T.bitwise_not(T.tensor([1, -2]), out=T.zeros(2)),
    lambda T: T.bitwise_not(T.tensor([True, False]), out=T.zeros(2, dtype=T.int64)),
    lambda T: T.cross(T.ones(1, 3, dtype=T.float64), T.ones(1, 3, dtype=T.float64), dim=1,
                      out=T.zeros(1, 3)),
    lambda T: T.norm(T.tensor([3.0, 4.0], dtype=T.float64), out=T.zeros(())),
    lambda T: T.clamp(T.tensor([-1.5, 2.0], dtype=T.float64), 0.0, 1.0, out=T.zeros(2)),
    lambda T: T.clamp_min(T.tensor([-1.5, 2.0], dtype=T.float64), 0.0, out=T.zeros(2)),
    lambda T: T.abs(T.tensor([1 + 1j]), out=T.zeros(1, dtype=T.int64)),
])
def test_out_of_another_dtype_refused(call):
    """torch refuses an out of another dtype here (its kernels take only the result's): flowgrad
    cast the result into it (neg of float64 into a float32 out)."""
    t, f = _both(call)
    assert t[0] is f[0] is RuntimeError, (t, f)


@pytest.mark.parametrize("call", [
    lambda T: T.abs(T.tensor([3 + 4j, -1j], dtype=T.complex128), out=T.zeros(2)),
    lambda T: T.absolute(T.tensor([3 + 4j], dtype=T.complex128), out=T.zeros(1)),
    lambda T: T.clamp(T.tensor([-1.5, 2.0], dtype=T.float64), T.tensor(0.0, dtype=T.float64),
                      T.tensor(1.0, dtype=T.float64), out=T.zeros(2)),
    lambda T: T.clamp_min(T.tensor([-1.5, 2.0], dtype=T.float64),
                          T.tensor([0.0, 3.0], dtype=T.float64), out=T.zeros(2)),
    lambda T: T.clamp_max(T.tensor([1, 5]), T.tensor([2, 3]),
                          out=T.zeros(2, dtype=T.complex128)),
])
def test_out_of_another_dtype_cast(call):
    """torch casts into an out of a wider or same-kind dtype here (abs of a complex input,
    clamp with tensor bounds): flowgrad refused ("Found dtype float32 but expected float64")."""
    def run(T):
        out = call(T)
        return str(out.dtype).split(".")[1], out.tolist()
    t, f = _both(run)
    assert t == f, (t, f)


@pytest.mark.parametrize("name", ["absolute", "arcsin", "arccos", "arctan", "arcsinh",
                                  "arctanh", "arccosh", "arctan2"])
def test_aliases_take_out(name):
    """torch's spellings arccos, absolute, ... take out= as their ops do: flowgrad's raised
    TypeError."""
    def run(T):
        x = T.tensor([0.5, 0.25], dtype=T.float64) + (1.0 if name == "arccosh" else 0.0)
        out = T.zeros(2, dtype=T.float64)
        args = (x, x) if name == "arctan2" else (x,)
        assert getattr(T, name)(*args, out=out) is out
        return out.tolist()
    t, f = _both(run)
    assert t[0] == pytest.approx(f[0], rel=1e-14), (t, f)


@pytest.mark.parametrize("call", [
    lambda T, a, b: T.cross(a, b, dim=1, out=a),
    lambda T, a, b: T.linalg.cross(a, b, out=b),
    lambda T, a, b: T.take_along_dim(a, T.tensor([[0, 1, 2], [2, 1, 0]]), dim=1, out=a)])
def test_out_sharing_an_input_refused(call):
    """cross and take_along_dim refuse an out that is one of their inputs (torch's
    assert_no_overlap): flowgrad wrote into it while reading it."""
    def run(T):
        a = T.tensor([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]])
        b = T.tensor([[2.0, 0.0, 1.0], [1.0, 1.0, 1.0]])
        return call(T, a, b)
    t, f = _both(run)
    assert t[0] is f[0] is RuntimeError, (t, f)


@pytest.mark.parametrize("call", [
    lambda T, x, o: T.scatter_reduce(x, 0, T.tensor([0, 1, 1, 2]), T.arange(4.0).double(),
                                     "amax", include_self=False, out=o),
    lambda T, x, o: T.index_reduce(x + 2, 0, T.tensor([0, 2]), T.ones(2).double() * 3, "prod",
                                   out=o),
    lambda T, x, o: T.slice_scatter(x, T.ones(2).double(), 0, 0, 2, out=o)])
def test_scatter_functions_take_out(call):
    """scatter_reduce, index_reduce and slice_scatter take out= (of the result's dtype), as
    torch's: flowgrad raised TypeError (unexpected keyword 'out')."""
    def run(T, dtype):
        out = T.empty(0, dtype=getattr(T, dtype))
        assert call(T, T.zeros(3, dtype=T.float64), out) is out
        return out.tolist()
    t, f = _both(lambda T: run(T, "float64"))
    assert t == f, (t, f)
    t, f = _both(lambda T: run(T, "float32"))
    assert t[0] is f[0] is RuntimeError, (t, f)
    t, f = _both(lambda T: call(T, T.zeros(3, dtype=T.float64, requires_grad=True),
                                T.empty(0, dtype=T.float64)))
    assert (t[0] is RuntimeError) == (f[0] is RuntimeError), (t, f)


def test_bernoulli_takes_out():
    """torch.bernoulli(p, out=o) draws into o in o's dtype, resized silently; flowgrad raised
    TypeError (unexpected keyword 'out')."""
    def run(T, dtype, size=4):
        p = T.tensor([0.0, 1.0, 1.0, 0.0], dtype=T.float64)
        out = T.full((size,), 5, dtype=getattr(T, dtype))
        assert T.bernoulli(p, out=out) is out
        return out.tolist()
    for dtype, size in (("float32", 4), ("int64", 4), ("float64", 7)):
        t, f = _both(lambda T: run(T, dtype, size))  # noqa: B023 - called at once
        assert t == f, (dtype, t, f)
    t, f = _both(lambda T: T.bernoulli(T.ones(2, requires_grad=True), out=T.zeros(2)))
    assert t[0] is f[0] is RuntimeError, (t, f)
