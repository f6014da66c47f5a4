"""Random nn.utils and nn.init cases (clipping, parameter vectors, parametrize and the
norm parametrizations, pruning, fusion, functional_call, every initializer and
calculate_gain) in torch and in flowgrad must have the same outcome: see
tests/nn_utils_fuzz.py. Then the bugs the fuzzer found, one test each."""
from __future__ import annotations

import math
import warnings

import fuzz_common
import nn_utils_fuzz as nf
import numpy as np
import pytest
import torch
import torch.nn.utils.prune  # noqa: F401 - (torch.nn.utils does not import it)

import flowgrad as flow


@pytest.mark.parametrize("seed", range(600))
def test_nn_utils_case_matches_torch(seed):
    verdict = nf.check(seed)
    assert verdict is None, f"{nf.describe(seed)}\n{verdict}"


@pytest.mark.slow
def test_many_nn_utils_cases_match_torch():
    fuzz_common.assert_seeds_agree(nf.check, range(600, 8000))


def _outcome(m, fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            out = fn(m)
        except Exception as e:  # noqa: BLE001 - the class is what is compared
            return type(e).__name__
    return nf._plain(out)


def _same(fn):
    want, got = _outcome(torch, fn), _outcome(flow, fn)
    if isinstance(want, str) or isinstance(got, str):
        assert got == want, f"flowgrad {got}, torch {want}"
    else:
        assert nf._differ(got, want, 1e-6) is None, nf._differ(got, want, 1e-6)


# ---- KNOWN: where flowgrad differs on purpose, each still so (else its entry goes) ---------

def test_known_clip_grad_value_without_gradients():
    assert nf.KNOWN["clip_grad_value_ without gradients"]
    p = [torch.zeros(2, requires_grad=True)]
    with pytest.raises(RuntimeError, match="nested_tensorlist"):
        torch.nn.utils.clip_grad_value_(p, 1.0)
    assert flow.nn.utils.clip_grad_value_([flow.zeros(2, requires_grad=True)], 1.0) is None


def test_known_vector_to_parameters_of_a_single_tensor():
    assert nf.KNOWN["vector_to_parameters of a single tensor"]
    got = []
    for m in (torch, flow):
        p = m.nn.Parameter(m.zeros(2, 2))
        m.nn.utils.vector_to_parameters(m.arange(4.0), p)
        got.append(p.detach().numpy().tolist())
    assert got == [[[0.0, 0.0], [0.0, 0.0]], [[0.0, 1.0], [2.0, 3.0]]]


def test_known_stateless_functional_call_of_a_tuple_of_dicts():
    assert nf.KNOWN["stateless.functional_call of a tuple of dicts"]
    x = np.ones((1, 2))
    with pytest.raises(AttributeError):
        torch.nn.utils.stateless.functional_call(torch.nn.Linear(2, 2), ({}, {}),
                                                 (torch.tensor(x).float(),))
    y = flow.nn.utils.stateless.functional_call(flow.nn.Linear(2, 2), ({}, {}),
                                                (flow.tensor(x).float(),))
    assert tuple(y.shape) == (1, 2)


def test_known_orthogonal_of_a_half_tensor():
    assert nf.KNOWN["orthogonal_ of a half tensor"]
    with pytest.raises(NotImplementedError):
        torch.nn.init.orthogonal_(torch.empty(3, 4, dtype=torch.float16))
    w = flow.nn.init.orthogonal_(flow.empty(3, 4, dtype=flow.float16)).float().numpy()
    np.testing.assert_allclose(w @ w.T, np.eye(3), atol=2e-3)


def test_known_parameters_to_vector_of_a_non_contiguous_parameter():
    assert nf.KNOWN["parameters_to_vector of a non-contiguous parameter"]
    w = np.arange(6.0).reshape(2, 3)
    with pytest.raises(RuntimeError, match="view"):
        torch.nn.utils.parameters_to_vector([torch.tensor(w).t()])
    v = flow.nn.utils.parameters_to_vector([flow.tensor(w).t()])
    np.testing.assert_array_equal(v.numpy(), w.T.reshape(-1))


def test_known_re_pruning_refused():
    """torch drops the first method's hook before refusing the second."""
    assert nf.KNOWN["re-pruning refused"]

    def run(m):
        lin = m.nn.Linear(3, 4)
        m.nn.utils.prune.l1_unstructured(lin, "weight", 0.5)
        with pytest.raises(ValueError):
            m.nn.utils.prune.l1_unstructured(lin, "weight", 1.5)
        return m.nn.utils.prune.is_pruned(lin)
    assert run(flow) and not run(torch)


# ---- the bugs the fuzzer found ----------------------------------------------------------

@pytest.mark.parametrize("norm_type", [math.inf, -math.inf, "inf"])
@pytest.mark.parametrize("foreach", [None, False])
def test_clip_grad_norm_inf_of_an_empty_grad_raises_as_torch(norm_type, foreach):
    # the max of no entries: flowgrad gave 0 (inf for -inf) and scaled the other grads by it
    def run(m):
        a, b = m.zeros(0, requires_grad=True), m.zeros(3, requires_grad=True)
        a.grad, b.grad = m.zeros(0), m.tensor([1.0, -4.0, 2.0])
        return m.nn.utils.clip_grad_norm_([b, a], 1.0, norm_type, foreach=foreach), b.grad
    _same(run)


def test_clip_grads_with_norm_takes_only_a_tensor_total():
    def run(m, total):
        p = m.zeros(3, requires_grad=True)
        p.grad = m.tensor([3.0, 4.0, 0.0])
        m.nn.utils.clip_grads_with_norm_([p], 1.0, total(m))
        return p.grad
    _same(lambda m: run(m, lambda m: 5.0))  # torch: TypeError (flowgrad clipped)
    _same(lambda m: run(m, lambda m: m.tensor(5.0)))


@pytest.mark.parametrize("clip", [1e9, 7e4, 6e4, math.inf])
def test_clip_grad_value_checks_the_bound_against_a_half_grad(clip):
    # flowgrad clipped with a bound float16 cannot hold (torch: RuntimeError, as clamp_)
    def run(m):
        p = m.zeros(2, dtype=m.float16, requires_grad=True)
        p.grad = m.tensor([1.0, -3.0], dtype=m.float16)
        m.nn.utils.clip_grad_value_([p], clip)
        return p.grad
    _same(run)


def test_get_total_norm_of_a_none_raises_torchs_type():
    _same(lambda m: m.nn.utils.get_total_norm([None, m.ones(2)]))  # AttributeError
    _same(lambda m: m.nn.utils.get_total_norm([m.ones(2), None]))  # RuntimeError


@pytest.mark.parametrize("shape", [(0,), (0, 5), (3, 4)])
@pytest.mark.parametrize("fn,args", [
    ("uniform_", (3.0, -1.0)), ("uniform_", (0.0, 1e6)), ("uniform_", (math.nan, 1.0)),
    ("xavier_uniform_", (-1.0,)), ("trunc_normal_", (0.0, 1.0, 2.0, 1.0)),
    ("trunc_normal_", (0.0, 1.0, 5.0, 6.0))])
@pytest.mark.parametrize("dtype", ["float16", "int64", "complex64"])
def test_init_checks_bounds_and_dtype_of_an_empty_tensor_too(shape, fn, args, dtype):
    # an empty tensor skipped torch's checks: NumPy's ValueError / OverflowError, or nothing
    def run(m):
        t = m.zeros(shape, dtype=getattr(m, dtype))
        return [getattr(m.nn.init, fn)(t, *args) is t, t.shape, str(t.dtype)[-5:]]
    _same(run)


@pytest.mark.parametrize("value", [1e30, math.nan, math.inf, 300, -2 ** 63, 2.5])
@pytest.mark.parametrize("dtype", ["int64", "int8", "uint8", "float16", "bool"])
def test_constant_checks_the_value_as_fill(value, dtype):
    # flowgrad wrote int64's minimum for 1e30, nan and inf, and wrapped 300 into an int8
    _same(lambda m: m.nn.init.constant_(m.zeros(3, dtype=getattr(m, dtype)), value))


def test_normal_checks_std_before_the_dtype():
    _same(lambda m: m.nn.init.normal_(m.zeros(3, dtype=m.int64), 0.0, -1.0))


@pytest.mark.parametrize("n", ["fro", "nuc"])
@pytest.mark.parametrize("amount", [0, 0.0, 1])
def test_ln_structured_computes_the_norm_even_when_nothing_is_pruned(n, amount):
    # torch's norm over three dims refuses 'fro' and 'nuc': flowgrad skipped it for amount 0
    def run(m):
        conv = m.nn.Conv2d(2, 3, 2)
        m.nn.utils.prune.ln_structured(conv, "weight", amount, n, 1)
        return sorted(conv.state_dict())
    _same(run)


@pytest.mark.parametrize("target", ["weight", "buffer"])
def test_remove_parametrizations_refuses_a_changed_dtype(target):
    # torch's set_ keeps the original's dtype and raises; flowgrad made the weight float32
    def run(m):
        class Float(m.nn.Module):
            def forward(self, X):
                return X.float()

        lin = m.nn.Linear(3, 3).double()
        name = target
        if target == "buffer":
            lin.register_buffer(name, m.ones(3, 3, dtype=m.float64))
        m.nn.utils.parametrize.register_parametrization(lin, name, Float(), unsafe=True)
        m.nn.utils.parametrize.remove_parametrizations(lin, name)
        return getattr(lin, name)
    _same(run)


@pytest.mark.parametrize("both", [True, False])
def test_weight_norm_loads_a_checkpoint_of_the_old_weight_norm(both):
    # torch's parametrizations.weight_norm renames weight_g / weight_v on load (a pre-hook):
    # flowgrad refused them as unexpected keys, missing original0 / original1
    def run(m):
        old = m.nn.utils.weight_norm(nf._seeded(m, m.nn.Linear(3, 2).double(), 3))
        with m.no_grad():
            old.weight_g.mul_(3.0)
        sd = dict(m.nn.Sequential(old).state_dict())
        if not both:
            del sd["0.weight_v"]
        new = m.nn.Sequential(m.nn.utils.parametrizations.weight_norm(
            nf._seeded(m, m.nn.Linear(3, 2).double(), 9)))
        result = new.load_state_dict(sd, strict=False)
        return [sorted(result.missing_keys), sorted(result.unexpected_keys),
                sorted(new.state_dict()), new[0].weight if both else old.weight]
    _same(run)


@pytest.mark.parametrize("what", ["instance", "function", "class"])
def test_skip_init_refuses_what_is_not_a_module_class(what):
    # an instance: torch's issubclass raises TypeError (flowgrad's RuntimeError); a function
    # with a device argument: torch's "Expected a Module" (flowgrad called it)
    def run(m):
        def make(device=None):
            return m.nn.Linear(2, 2)
        cls = {"instance": m.nn.Linear(2, 2), "function": make, "class": m.nn.Linear}[what]
        return m.nn.utils.skip_init(cls, 2, 3).weight.shape if what == "class" else \
            m.nn.utils.skip_init(cls)
    _same(run)


@pytest.mark.parametrize("case", ["plain", "parametrized", "other_shape", "missing", "split",
                                  "not_parametrized", "all"])
def test_transfer_parametrizations_shares_the_originals_as_torch(case):
    # flowgrad copied the originals' values (copy_: a shape mismatch raised, a missing tensor
    # failed, and the two modules did not share the trained tensor) and skipped the
    # registration on an already parametrized module; torch registers the same
    # parametrizations again and assigns the very originals
    def run(m):
        kinds = nf._parametrizations(m)
        P = m.nn.utils.parametrize
        src = nf._seeded(m, m.nn.Linear(3, 3).double(), 1)
        if case != "not_parametrized":
            P.register_parametrization(src, "weight", kinds["split" if case == "split" else
                                                           "scale"]())
            P.register_parametrization(src, "bias", kinds["scale"]())
        dst = nf._seeded(m, m.nn.Linear(3, 4 if case == "other_shape" else 3).double(), 2)
        if case == "parametrized":
            P.register_parametrization(dst, "weight", kinds["sym"]())
        if case == "missing":
            dst = m.nn.Module()
        P.transfer_parametrizations_and_params(src, dst, None if case == "all" else "weight")
        out = [sorted(dst.state_dict()), P.is_parametrized(dst)]
        if case == "not_parametrized":
            return out
        plist = dst.parametrizations.weight
        out += [len(plist), dst.weight,
                [getattr(plist, k) is getattr(src.parametrizations.weight, k)
                 for k in ("original", "original0", "original1") if hasattr(plist, k)]]
        return out
    _same(run)


@pytest.mark.parametrize("shape", [(3, 3), (4, 3)])
@pytest.mark.parametrize("omap", [None, "matrix_exp", "cayley", "householder"])
def test_orthogonal_of_a_complex_weight(shape, omap):
    # the householder map has no complex form in torch (ValueError), and a complex weight's
    # default map is matrix_exp whatever its shape; flowgrad ran householder, with NumPy's
    # warning about discarding imaginary parts. matrix_exp and cayley map X - X^H
    # (skew-Hermitian): flowgrad took X - X^T, a weight that is not unitary
    def run(m):
        rng = np.random.RandomState(0)
        mod = m.nn.Module()
        mod.weight = m.nn.Parameter(m.tensor(rng.randn(*shape) + 1j * rng.randn(*shape)))
        m.nn.utils.parametrizations.orthogonal(mod, orthogonal_map=omap)
        P = mod.parametrizations.weight
        with m.no_grad():  # (the map shows once the original moves off zero)
            P.original.add_(m.tensor((rng.randn(*shape) + 1j * rng.randn(*shape)) * 0.3))
            if hasattr(P[0], "base"):  # (completed at random for a non-square weight)
                n = max(shape)
                P[0].base.copy_(m.linalg.qr(m.tensor(rng.randn(n, n) + 1j * rng.randn(n, n)))[0])
        w = mod.weight.detach().numpy()
        return [np.round(w.conj().T @ w, 8), w]
    _same(run)
