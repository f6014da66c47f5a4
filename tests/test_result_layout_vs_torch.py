"""The memory layout of an elementwise result of several strided tensors is torch's: torch's
TensorIterator takes the dim order of the first operand that decides it, NumPy's ufuncs let
the C order win where operands disagree (flowgrad/ops/layout.py). The layout decides
what a later flatten()/reshape() shares with the result and whether view() raises, so a
different one is a different value after an in-place write (program_fuzz seed 6003237).
"""
from __future__ import annotations

import random

import pytest
import torch

import flowgrad as flow

LAYOUTS = {  # name: (build from module m and dtype dt)
    "c34": lambda m, dt: m.arange(12, dtype=dt).reshape(3, 4) + 1,
    "t34": lambda m, dt: (m.arange(12, dtype=dt).reshape(4, 3) + 1).t(),
    "s34": lambda m, dt: (m.arange(24, dtype=dt).reshape(3, 8) + 1)[:, ::2],
    "st34": lambda m, dt: (m.arange(24, dtype=dt).reshape(8, 3) + 1)[::2].t(),
    "c31": lambda m, dt: m.arange(3, dtype=dt).reshape(3, 1) + 1,
    "c4": lambda m, dt: m.arange(4, dtype=dt) + 1,
    "e34": lambda m, dt: (m.arange(4, dtype=dt) + 1).expand(3, 4),
    "p234a": lambda m, dt: (m.arange(24, dtype=dt).reshape(4, 2, 3) + 1).permute(1, 2, 0),
    "p234b": lambda m, dt: (m.arange(24, dtype=dt).reshape(3, 4, 2) + 1).permute(2, 0, 1),
    "c234": lambda m, dt: m.arange(24, dtype=dt).reshape(2, 3, 4) + 1,
    "c131": lambda m, dt: m.arange(3, dtype=dt).reshape(1, 3, 1) + 1,
    "z0d": lambda m, dt: m.tensor(2, dtype=dt),
}
PAIRS = [("t34", "c34"), ("c34", "t34"), ("s34", "t34"), ("t34", "s34"), ("st34", "c34"),
         ("c31", "t34"), ("c4", "t34"), ("e34", "t34"), ("t34", "e34"), ("p234a", "p234b"),
         ("p234b", "p234a"), ("c234", "p234a"), ("p234a", "c234"), ("c131", "p234b"),
         ("z0d", "t34"), ("st34", "st34")]

OPS = {
    "add": lambda m, a, b: a + b, "sub": lambda m, a, b: a - b, "mul": lambda m, a, b: a * b,
    "div": lambda m, a, b: a / b, "pow": lambda m, a, b: a ** b,
    "add_alpha": lambda m, a, b: m.add(a, b, alpha=2),
    "maximum": lambda m, a, b: m.maximum(a, b), "fmin": lambda m, a, b: m.fmin(a, b),
    "lt": lambda m, a, b: a < b, "logical_xor": lambda m, a, b: m.logical_xor(a, b),
    "isclose": lambda m, a, b: m.isclose(a, b), "atan2": lambda m, a, b: m.atan2(a, b),
    "hypot": lambda m, a, b: m.hypot(a, b), "fmod": lambda m, a, b: m.fmod(a, b),
    "remainder": lambda m, a, b: m.remainder(a, b), "xlogy": lambda m, a, b: m.xlogy(a, b),
    "copysign": lambda m, a, b: m.copysign(a, b), "nextafter": lambda m, a, b: m.nextafter(a, b),
    "heaviside": lambda m, a, b: m.heaviside(a, b), "logaddexp": lambda m, a, b: m.logaddexp(a, b),
    "float_power": lambda m, a, b: m.float_power(a, b),
    "div_floor": lambda m, a, b: m.div(a, b, rounding_mode="floor"),
    "where": lambda m, a, b: m.where(b > 5, a, b), "clamp": lambda m, a, b: m.clamp(a, min=b),
    "addcmul": lambda m, a, b: m.addcmul(a, b, b), "lerp": lambda m, a, b: m.lerp(a, b, 0.3),
    "lerp_tensor": lambda m, a, b: m.lerp(a, b, b / 30),
    "gcd": lambda m, a, b: m.gcd(a.long(), b.long()), "igamma": lambda m, a, b: m.igamma(a, b),
    "complex": lambda m, a, b: m.complex(a, b), "mixed_dtypes": lambda m, a, b: a.float() + b,
    "xlog1py": lambda m, a, b: m.special.xlog1py(a, b),
    "hermite": lambda m, a, b: m.special.hermite_polynomial_h(a, b),
    "bce": lambda m, a, b: m.nn.functional.binary_cross_entropy(a / 30, b / 30, reduction="none"),
    "rpow": lambda m, a, b: 2.0 ** (a + b),
}


def _order(t):
    """The strides of the dims of size > 1: what decides how memory is traversed."""
    return tuple(s for s, n in zip(t.stride(), t.shape) if n != 1)


@pytest.mark.parametrize("name", OPS)
def test_elementwise_result_is_laid_out_as_torch(name):
    fn, found = OPS[name], []
    for first, second in PAIRS:
        if name == "bce" and LAYOUTS[first](torch, None).shape != LAYOUTS[second](
                torch, None).shape:
            continue  # (torch: target and input sizes must match)
        expected = fn(torch, LAYOUTS[first](torch, torch.float64),
                      LAYOUTS[second](torch, torch.float64))
        actual = fn(flow, LAYOUTS[first](flow, flow.float64), LAYOUTS[second](flow, flow.float64))
        if _order(actual) != _order(expected):
            found.append(f"{first}, {second}: torch {expected.stride()}, "
                         f"flowgrad {actual.stride()}")
    assert not found, "\n".join(found)


def _random_operand(rng, shape):
    """A strided tensor recipe broadcastable to `shape`: a permuted, sliced or expanded view."""
    dims = list(range(len(shape)))
    kind = rng.choice(["contiguous", "permuted", "sliced", "broadcast", "expanded"])
    if kind == "broadcast":
        sizes = [n if rng.random() < 0.5 else 1 for n in shape][rng.randrange(len(shape)):]
        return lambda m: m.randn(*sizes, dtype=m.float64) if sizes else m.tensor(1.5)
    if kind == "expanded":
        sizes = [n if rng.random() < 0.5 else 1 for n in shape]
        return lambda m: m.randn(*sizes, dtype=m.float64).expand(*shape)
    perm = dims[:]
    rng.shuffle(perm)
    step = 2 if kind == "sliced" else 1
    stored = [shape[d] for d in perm]
    stored[-1] *= step
    inverse = [perm.index(d) for d in dims]
    if kind == "contiguous":
        return lambda m: m.randn(*shape, dtype=m.float64)
    return lambda m: m.randn(*stored, dtype=m.float64)[..., ::step].permute(*inverse)


@pytest.mark.parametrize("seed", range(6))
def test_random_layouts_follow_torch(seed):
    """Random shapes, permutations, slices and broadcasts of two or three operands: the
    result of add and where is laid out as torch's, and flatten() shares memory with it
    exactly when torch's does."""
    rng = random.Random(seed)
    for _ in range(40):
        shape = [rng.randint(1, 4) for _ in range(rng.randint(2, 4))]
        recipes = [_random_operand(rng, shape) for _ in range(3)]
        torch.manual_seed(seed)
        a, b, c = (r(torch) for r in recipes)
        flow.manual_seed(seed)
        fa, fb, fc = (r(flow) for r in recipes)
        for expected, actual in ((a + b, fa + fb), (torch.where(c > 0, a, b),
                                                    flow.where(fc > 0, fa, fb))):
            assert _order(actual) == _order(expected), (shape, a.stride(), b.stride(),
                                                        c.stride())
            assert actual.is_contiguous() == expected.is_contiguous()


def test_flatten_of_a_permuted_difference_is_a_copy_as_torch():
    """program_fuzz seed 6003237: torch's x.permute(1, 0) - y keeps x's column-major order, so
    flatten() copies and a later write into the difference does not reach the flattened
    tensor; flowgrad's row-major difference gave a view that saw the write."""
    def run(m):
        x = m.arange(6.0).reshape(2, 3)
        z = x.permute(1, 0) - m.ones(3, 2)
        flat = z.flatten()
        z.add_(100)
        return flat, z.is_contiguous()
    (expected, expected_contiguous), (actual, actual_contiguous) = run(torch), run(flow)
    assert actual.tolist() == expected.tolist()
    assert actual_contiguous == expected_contiguous is False


def test_view_of_a_column_major_result_raises_as_torch():
    x = torch.arange(6.0).reshape(3, 2).t()
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        (x * torch.ones(2, 3)).view(6)
    fx = flow.arange(6.0).reshape(3, 2).t()
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        (fx * flow.ones(2, 3)).view(6)


ONE_TENSOR_LAYOUTS = ("t34", "st34", "p234a", "e34", "s34")
ONE_TENSOR_OPS = {  # kernels that are not one NumPy ufunc, and torch's C-ordered results
    "erf": lambda m, x: m.erf(x), "erfc": lambda m, x: m.erfc(x),
    "erfinv": lambda m, x: m.erfinv(x / 30), "polygamma": lambda m, x: m.polygamma(1, x),
    "i0": lambda m, x: m.i0(x), "square": lambda m, x: x ** 2, "pow": lambda m, x: x ** 2.5,
    "silu": lambda m, x: m.nn.functional.silu(x), "mish": lambda m, x: m.nn.functional.mish(x),
    "gelu": lambda m, x: m.nn.functional.gelu(x), "sin": lambda m, x: m.sin(x),
    "logsigmoid": lambda m, x: m.nn.functional.logsigmoid(x),
    "rrelu_eval": lambda m, x: m.nn.functional.rrelu(x, training=False),
    "clone": lambda m, x: x.clone(), "zeros_like": lambda m, x: m.zeros_like(x),
    "repeat": lambda m, x: x.repeat(1, 1, 1)[0], "tile": lambda m, x: x.tile(1, 1),
    "narrow_copy": lambda m, x: x.narrow_copy(1, 0, 2),
    "rot90_k0": lambda m, x: m.rot90(x, 4, [0, 1]), "angle_complex": lambda m, x: m.angle(
        x * (1 + 1j) if m is torch else x * (1 + 1j)),
    "dropout": lambda m, x: m.nn.functional.dropout(x, 0.5),
    "alpha_dropout": lambda m, x: m.nn.functional.alpha_dropout(x, 0.5, training=True),
    "nonzero": lambda m, x: m.nonzero(x > 3), "argwhere": lambda m, x: m.argwhere(x > 3),
    "nonzero_column": lambda m, x: m.nonzero(x > 3, as_tuple=True)[1],
    # sort's results are made like the input (flowgrad's were argsort + gather: C-ordered)
    "sort_values": lambda m, x: m.sort(x, 1)[0], "sort_indices": lambda m, x: m.sort(x, 0)[1],
    "argsort": lambda m, x: m.argsort(x, 1, descending=True), "msort": lambda m, x: m.msort(x),
    # index_fill writes into a clone of input (its layout), index_add into a contiguous one
    "index_fill": lambda m, x: x.index_fill(1, m.tensor([0, 2]), -1.0),
    "index_add": lambda m, x: x.index_add(1, m.tensor([0, 2]), m.ones(x.shape[0], 2,
                                                                   *x.shape[2:]).double()),
    "masked_fill": lambda m, x: x.masked_fill(x > 3, -1.0),
    "addr": lambda m, x: _addr(m, x[..., 0] if x.dim() > 2 else x),
}


def _addr(m, x):
    return m.addr(x, m.arange(x.shape[0], dtype=m.float64), m.arange(x.shape[1], dtype=m.float64),
                  beta=0.5)


@pytest.mark.parametrize("name", ONE_TENSOR_OPS)
def test_one_tensor_result_is_laid_out_as_torch(name):
    fn, found = ONE_TENSOR_OPS[name], []
    for layout in ONE_TENSOR_LAYOUTS:
        expected = fn(torch, LAYOUTS[layout](torch, torch.float64))
        actual = fn(flow, LAYOUTS[layout](flow, flow.float64))
        if _order(actual) != _order(expected):
            found.append(f"{layout}: torch {expected.stride()}, flowgrad {actual.stride()}")
    assert not found, "\n".join(found)


def test_view_of_nonzero_raises_as_torch():
    """torch's nonzero is (n, ndim) with strides (1, n): view(-1) raises there (flowgrad's
    C-ordered result viewed), and each as_tuple column is contiguous."""
    for m in (torch, flow):
        found = m.nonzero(m.tensor([[0.0, 1.0], [2.0, 3.0]]))
        with pytest.raises(RuntimeError, match="view"):
            found.view(-1)
        assert found.reshape(-1).tolist() == [0, 1, 1, 0, 1, 1]


def test_conj_physical_of_a_real_tensor_is_the_tensor_itself():
    """torch returns a real input itself (a write into the result reaches it); flowgrad
    copied."""
    for m in (torch, flow):
        x = m.arange(3.0, requires_grad=True) * 2
        assert m.conj_physical(x) is x


@pytest.mark.parametrize("call", [
    lambda m, x: x.scatter_add(0, m.zeros(2, 4, dtype=m.int64), m.ones(2, 4, dtype=m.float64)),
    lambda m, x: x.masked_scatter(x.t().t() > 5, m.zeros(12, dtype=m.float64)),
])
def test_scatters_into_a_contiguous_copy_as_torch(call):
    """torch's out-of-place scatter_add and masked_scatter write into a contiguous clone of a
    transposed input; composed of add and where, flowgrad's took the input's order."""
    expected = call(torch, LAYOUTS["t34"](torch, torch.float64))
    actual = call(flow, LAYOUTS["t34"](flow, flow.float64))
    assert _order(actual) == _order(expected)
    assert actual.tolist() == expected.tolist()


def _spd(m):
    a = m.arange(16.0, dtype=m.float64).reshape(4, 4).sin()
    return a @ a.mT + 4 * m.eye(4, dtype=m.float64)


LINALG = {  # torch's LAPACK-backed results are column-major in their last two dims
    "inv": lambda m: m.linalg.inv(_spd(m)),
    "inv_batched": lambda m: m.linalg.inv(_spd(m).expand(2, 4, 4)),
    "cholesky": lambda m: m.linalg.cholesky(_spd(m)),
    "qr": lambda m: m.linalg.qr(_spd(m)[:, :3]),
    "solve": lambda m: m.linalg.solve(_spd(m), m.ones(4, 3, dtype=m.float64)),
    "lu_factor": lambda m: m.linalg.lu_factor(_spd(m)),
    "lu": lambda m: m.linalg.lu(_spd(m)),
    "eigh": lambda m: m.linalg.eigh(_spd(m)),
    "svd": lambda m: m.linalg.svd(_spd(m)[:, :3]),
    "solve_triangular": lambda m: m.linalg.solve_triangular(
        m.linalg.cholesky(_spd(m)), m.ones(4, 3, dtype=m.float64), upper=False),
    "cholesky_inverse": lambda m: m.cholesky_inverse(m.linalg.cholesky(_spd(m))),
    "geqrf": lambda m: m.geqrf(_spd(m)),
    "ldl_factor": lambda m: m.linalg.ldl_factor(_spd(m)),
    # batched: the vectors beside the matrices (singular values, eigenvalues, pivots, tau,
    # info) are C-ordered, as torch's: only outputs with the input's dims are matrices
    "svd_batched": lambda m: m.linalg.svd(_spd(m).expand(3, 4, 4)[:, :, :3]),
    "eigh_batched": lambda m: m.linalg.eigh(_spd(m).expand(3, 4, 4)),
    "eig_batched": lambda m: m.linalg.eig(_spd(m).expand(3, 4, 4)),
    "lu_factor_batched": lambda m: m.linalg.lu_factor_ex(_spd(m).expand(3, 4, 4)),
    "geqrf_batched": lambda m: m.geqrf(_spd(m).expand(3, 4, 4)),
    "ldl_factor_batched": lambda m: m.linalg.ldl_factor_ex(_spd(m).expand(3, 4, 4)),
    "solve_ex_batched": lambda m: m.linalg.solve_ex(_spd(m).expand(3, 4, 4),
                                                    m.ones(3, 4, 2, dtype=m.float64)),
}


@pytest.mark.parametrize("name", LINALG)
def test_linalg_results_are_column_major_as_torch(name):
    expected, actual = LINALG[name](torch), LINALG[name](flow)
    expected = expected if isinstance(expected, tuple) else (expected,)
    actual = actual if isinstance(actual, tuple) else (actual,)
    assert [_order(a) for a in actual] == [_order(e) for e in expected]


def test_reshape_of_a_q_factor_is_a_copy_as_torch():
    """torch's Q is column-major, so Q.reshape(-1) copies and a later write into Q does not
    reach it; flowgrad's row-major Q gave a view that saw the write."""
    def run(m):
        q = m.linalg.qr(_spd(m))[0]
        flat = q.reshape(-1)
        q.mul_(0)
        return flat
    assert flow.allclose(run(flow), flow.tensor(run(torch).numpy()))


@pytest.mark.parametrize("call", [
    lambda m, x: x.double(memory_format=m.contiguous_format),
    lambda m, x: x.half(memory_format=m.contiguous_format),
    lambda m, x: x.float(memory_format=m.contiguous_format),
    lambda m, x: x.to(m.float32, memory_format=m.contiguous_format),
    lambda m, x: x.to(m.float64, memory_format=m.preserve_format),
    lambda m, x: x.cdouble(memory_format=m.contiguous_format),
    lambda m, x: x.cfloat(memory_format=m.contiguous_format),
])
def test_conversions_honour_memory_format_as_torch(call):
    """x.double(memory_format=contiguous_format) is a contiguous copy in torch (flowgrad's
    casters dropped the argument); x.to(its own dtype, memory_format=contiguous_format) is x
    itself, its suggested format being that one (flowgrad copied)."""
    x, fx = (m.arange(6.0).reshape(2, 3).t() for m in (torch, flow))
    expected, actual = call(torch, x), call(flow, fx)
    assert _order(actual) == _order(expected)
    assert (actual is fx) == (expected is x)


@pytest.mark.parametrize("call", [
    lambda m, x: m.topk(x, 2, dim=1).indices, lambda m, x: m.kthvalue(x, 2, dim=1).indices,
])
def test_selection_indices_are_their_own_tensors_as_torch(call):
    """topk's and kthvalue's indices were a narrowed view of a full argsort: not dense, so
    view() raised where torch's (C-ordered) indices allow it."""
    expected = call(torch, LAYOUTS["p234a"](torch, torch.float64))
    actual = call(flow, LAYOUTS["p234a"](flow, flow.float64))
    assert _order(actual) == _order(expected)
    assert actual.view(-1).tolist() == expected.view(-1).tolist()


def test_tile_method_takes_sizes_as_arguments_as_torch():
    """torch's x.tile(1, 2) takes the sizes as arguments (its function takes a sequence);
    flowgrad's method raised TypeError."""
    for m in (torch, flow):
        x = m.arange(6.0).reshape(2, 3)
        assert tuple(x.tile(1, 2).shape) == tuple(x.tile((1, 2)).shape) == (2, 6)
        with pytest.raises(TypeError):
            m.tile(x, 1, 2)


def test_eval_batch_norm_of_a_strided_input_is_c_ordered_as_torch():
    def run(m):
        x = LAYOUTS["p234a"](m, m.float64)
        return m.nn.functional.batch_norm(x, m.zeros(3, dtype=m.float64),
                                          m.ones(3, dtype=m.float64))
    assert _order(run(flow)) == _order(run(torch))


def test_lerp_with_a_tensor_weight_is_torchs_node_and_gradients():
    """lerp's tensor-weight form is one node (LerpBackward1), its gradients torch's formulas:
    (1 - w) dy, w dy, (end - input) dy, where a composite's where/add chain rounded them
    otherwise."""
    def run(m):
        a, b = (m.linspace(-1, 1, 7, dtype=m.float32).requires_grad_() for _ in range(2))
        w = m.linspace(-0.9, 1.3, 7, dtype=m.float32).requires_grad_()
        out = m.lerp(a, b * 3, w)
        out.backward(m.linspace(0.1, 0.7, 7, dtype=m.float32))
        return out.grad_fn.name(), [t.grad.tolist() for t in (a, b, w)]
    assert run(flow) == run(torch)


WRITE_INTO_CLONE = {  # torch writes into a clone of input (preserve_format): input's layout
    "index_put": lambda m, x: x.index_put((m.tensor([0, 1]),), m.tensor(-1.0, dtype=x.dtype)),
    "put": lambda m, x: x.put(m.tensor([0, 5]), m.tensor([-1.0, -2.0], dtype=x.dtype)),
    "select_scatter": lambda m, x: m.select_scatter(x, -x.select(1, 1), 1, 1),
    "slice_scatter": lambda m, x: m.slice_scatter(x, -x[:, ::2], 1, 0, None, 2),
    "diagonal_scatter": lambda m, x: m.diagonal_scatter(x, -x.diagonal(), 0),
}


@pytest.mark.parametrize("name", WRITE_INTO_CLONE)
def test_write_into_a_clone_keeps_the_input_layout_as_torch(name):
    """torch's out-of-place index_put, put and *_scatter are laid out as a transposed or
    permuted input; flowgrad's composites (where of a C-ordered mask) came out C-ordered, so a
    later view() raised or flatten() shared memory differently."""
    fn, found = WRITE_INTO_CLONE[name], []
    for layout in ("t34", "p234a", "p234b"):
        expected = fn(torch, LAYOUTS[layout](torch, torch.float64))
        actual = fn(flow, LAYOUTS[layout](flow, flow.float64))
        assert actual.tolist() == expected.tolist()
        if _order(actual) != _order(expected):
            found.append(f"{layout}: torch {expected.stride()}, flowgrad {actual.stride()}")
    assert not found, "\n".join(found)
