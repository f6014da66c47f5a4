"""The deterministic parts of randomness and init against torch (shapes, dtypes,
requires_grad, raise/no-raise and the exception class, supports and loose statistics of the
draws): see tests/random_api_fuzz.py."""
from __future__ import annotations

import math

import fuzz_common
import numpy as np
import pytest
import random_api_fuzz as rf
import torch

import flowgrad as flow

DEFAULT = range(1200)
_KNOWN_HERE = [s for s in DEFAULT if rf.known(rf.generate(s))]


@pytest.mark.parametrize("seed", [s for s in DEFAULT if s not in _KNOWN_HERE])
def test_random_api_case_matches_torch(seed):
    verdict = rf.check(seed)
    assert verdict is None, f"{rf.generate(seed)}\n{verdict}"


@pytest.mark.slow
def test_many_random_api_cases_match_torch():
    seeds = range(1200, 12000)
    fuzz_common.assert_seeds_agree(rf.check, seeds,
                                   {s for s in seeds if rf.known(rf.generate(s))})


def test_the_known_difference_still_differs():
    seed = next(s for s in range(20000) if rf.known(rf.generate(s)))
    assert rf.check(seed) is not None


def _one(fn, m):
    """fn(m), or the class name of the exception it raises."""
    try:
        return fn(m)
    except Exception as e:  # noqa: BLE001 - the class is what is compared
        return type(e).__name__


def _both(fn):
    """fn(torch) and fn(flowgrad), each as its result or the class name of its exception."""
    return [_one(fn, torch), _one(fn, flow)]


def test_sampler_results_require_grad_with_zero_gradients():
    # normal's tensor mean and std, bernoulli's probabilities and poisson's rates: torch's
    # results require grad (zero gradients); flowgrad's did not, so a loss through them
    # raised "does not require grad" (random_api_fuzz seeds 15, 23, 143, 190)
    def run(m):
        mean = m.zeros(3, requires_grad=True)
        std = m.ones(3, dtype=m.float64, requires_grad=True)
        p = m.full((3,), 0.5, requires_grad=True)
        rate = m.ones(3, requires_grad=True)
        outs = [m.normal(mean, 1.0), m.normal(0.0, std), m.normal(mean, std), m.bernoulli(p),
                m.poisson(rate)]
        grads = m.autograd.grad(sum(o.sum() for o in outs), [mean, std, p, rate])
        return [o.requires_grad for o in outs], [g.tolist() for g in grads]
    want, got = _both(run)
    assert got == want


@pytest.mark.parametrize("p", [1.5, -0.5, math.nan])
def test_bernoulli_with_p_outside_0_1_raises(p):
    # flowgrad drew with it: bernoulli(x, 1.5) gave all ones, -0.5 all zeros (seed 67)
    want, got = _both(lambda m: m.bernoulli(m.zeros(4), p).tolist())
    assert got == want == "RuntimeError"


@pytest.mark.parametrize("how", ["input", "method", "out", "bernoulli_"])
@pytest.mark.parametrize("dtype", ["int64", "bool"])
def test_bernoulli_refuses_integer_probabilities(how, dtype):
    # torch's kernels read the probabilities as floats; flowgrad drew with 0/1 "probabilities"
    # (seeds 43, 137, 139, 160)
    def run(m):
        probs = m.tensor([0, 1, 1]).to(getattr(m, dtype))
        if how == "input":
            return m.bernoulli(probs).tolist()
        if how == "method":
            return probs.bernoulli().tolist()
        if how == "out":
            return m.bernoulli(probs, out=m.empty(3)).tolist()
        return m.zeros(3).bernoulli_(probs).tolist()
    want, got = _both(run)
    assert got == want == "NotImplementedError"


def test_normal_out_writes_torchs_shape_and_dtype():
    # normal(..., out=) was a TypeError (seeds 22, 110, 246); torch broadcasts a tensor mean
    # against out (std a number), draws in out's dtype (complex too), and refuses a grad input
    def run(m):
        res = []
        for mean, std, size, out in [
                (m.zeros(1), 0.0, None, m.empty(3, 0)),  # (broadcast with out's shape)
                (m.zeros(2, dtype=m.float64), 0.0, None, m.empty(2, dtype=m.float16)),
                (m.zeros(2), m.zeros(1), None, m.empty(5)),
                (2.0, 0.0, (2, 3), m.empty(4)),
                (m.zeros(2), 1.0, None, m.empty(2, dtype=m.complex64))]:
            kw = {} if size is None else {"size": size}
            r = m.normal(mean, std, out=out, **kw)
            res.append((r is out, tuple(r.shape), str(r.dtype).split(".")[-1]))
        res.append(_one(lambda k: k.normal(k.zeros(2, requires_grad=True), 1.0,
                                           out=k.empty(2)), m))
        res.append(_one(lambda k: k.normal(k.zeros(2, 3), 1.0, out=k.empty(4)), m))
        return res
    want, got = _both(run)
    assert got == want


def test_normal_out_values_are_the_mean_at_std_0():
    out = flow.empty(2, 3)
    flow.normal(flow.tensor([1.0, 2.0, 3.0]), 0.0, out=out)
    assert out.tolist() == [[1.0, 2.0, 3.0]] * 2


@pytest.mark.parametrize("call", [
    "rand()", "randn(dtype=m.float64)", "randint(0, 5, 3)", "normal(m.zeros(2), 1.0, size=(2,))",
    "normal(1.0, m.ones(2), size=(2,))"])
def test_factory_calls_torch_refuses_raise_type_error(call):
    # each ran: rand() gave a 0-d tensor, randint an int size, normal a size with a tensor
    # (seeds 114, 213, 331, 385, 675)
    want, got = _both(lambda m: eval(f"m.{call}", {"m": m}).shape)
    assert got == want == "TypeError"


def test_normal_with_size_reads_0d_tensors_as_numbers():
    # torch's parser binds a 0-d tensor (not requiring grad) to a float where size= is
    # given: its std is then checked (seed 3784); one requiring grad is refused
    def run(m):
        return [_one(lambda k: tuple(k.normal(k.tensor(1.0), k.tensor(2.0), size=(2,)).shape), m),
                _one(lambda k: k.normal(0.0, k.tensor(-1.0), size=(2,)), m),
                _one(lambda k: k.normal(0.0, k.tensor(1.0, requires_grad=True), size=(2,)), m)]
    want, got = _both(run)
    assert got == want


@pytest.mark.parametrize("call", [
    "m.zeros(0, dtype=m.int8).log_normal_(0.0, 0.5)",
    "m.zeros(0, dtype=m.uint8).normal_()",
    "m.zeros(0, dtype=m.bool).exponential_()",
    "m.zeros(0, 2, dtype=m.bool).geometric_(0.5)",
    "m.randn(0, 2, dtype=m.int8)",
    "m.normal(m.zeros(0, dtype=m.int64), 2.5)",
    "m.zeros(0, dtype=m.complex64).uniform_(0.0, math.inf)",
    "m.zeros(0, dtype=m.complex64).random_()",
    "m.zeros(0).bernoulli_(m.ones(7, dtype=m.int64))",
])
def test_empty_tensors_run_where_torch_runs_no_kernel(call):
    # torch's dtype (and bounds) checks sit in kernels an empty tensor never reaches; flowgrad
    # refused these (seeds 553, 798, 960, 950, 46, 6250, 10959, 1557)
    want, got = _both(lambda m: str(eval(call, {"m": m, "math": math}).dtype).split(".")[-1])
    assert got == want and got != "NotImplementedError"


@pytest.mark.parametrize("call", [
    "m.zeros(3, dtype=m.uint8).log_normal_(1.0, 0.0)",      # the std check first
    "m.zeros(3, dtype=m.int8).uniform_(3.0, -1.0)",         # the dtype before the bounds
    "m.zeros(3, dtype=m.complex64).random_()",
    "m.zeros(3, dtype=m.complex64, requires_grad=True).geometric_(0.5)",  # the leaf first
    "m.zeros(3, dtype=m.complex64, requires_grad=True).log_normal_()",
    "m.normal(m.zeros(2, 3), m.ones(6))",
    "m.normal(m.zeros(2, 0, dtype=m.int64), m.ones(2, 0))",  # mul_(std) into an int result
    "m.zeros(0, 2, dtype=m.complex64, requires_grad=True).uniform_(0, 7)",  # empty: the leaf
    "m.zeros(0, 2, dtype=m.complex64, requires_grad=True)[:, :1].uniform_(0, 7)",
])
def test_refusals_have_torchs_exception_class(call):
    # flowgrad checked in another order, or raised ValueError from NumPy's broadcast (seeds
    # 16, 957, 3558, 1127, 6356, 593, 1420); an empty complex leaf's uniform_ ran (5000174)
    want, got = _both(lambda m: eval(call, {"m": m}))
    assert got == want and isinstance(want, str)


def test_poisson_of_huge_rates_counts_instead_of_raising():
    # NumPy's poisson refuses rates from ~9.2e18 on: flowgrad raised ValueError ("lam value
    # too large"); a count is lam + sqrt(lam) * N(0, 1) there (torch's is -2**63, an int64
    # overflow cast back: not copied)
    rates = flow.tensor([1e18, 5e18, 1e30, math.inf, 0.0, 4.0], dtype=flow.float64)
    counts = flow.poisson(rates).numpy()
    np.testing.assert_allclose(counts[:3], rates.numpy()[:3], rtol=1e-7)
    assert counts[3] == math.inf and counts[4] == 0 and counts[5] == round(counts[5])
    assert flow.poisson(flow.tensor([3e38])).item() == pytest.approx(3e38, rel=1e-6)


@pytest.mark.parametrize("state", ["m.zeros(8)", "[0] * 8", "m.zeros(8, dtype=m.uint8)",
                                   "m.zeros(0, dtype=m.uint8)"])
def test_set_state_refuses_what_get_state_did_not_give_as_torch(state):
    # a float tensor or a list: TypeError; bytes that are no state: RuntimeError (flowgrad's
    # JSON parse raised JSONDecodeError, a ValueError, for every one)
    def run(m):
        return [_one(lambda k: k.Generator().set_state(eval(state, {"m": k})), m),
                _one(lambda k: k.set_rng_state(eval(state, {"m": k})), m)]
    want, got = _both(run)
    assert got == want and want[0] in ("TypeError", "RuntimeError")


def test_generators_name_their_device_and_the_default_one_is_exported():
    # torch.default_generator and Generator.device were missing (AttributeError)
    def run(m):
        g = m.default_generator
        return (g.device.type, m.Generator().device.type, g is m.random.default_generator,
                tuple(m.rand(2, generator=g).shape))
    want, got = _both(run)
    assert got == want


def test_normal_of_numbers_into_a_complex_out_puts_the_mean_in_both_parts():
    # torch's factory form is out.normal_(mean, std): a complex out gets mean + mean*1j at
    # std 0, as flowgrad's own complex normal_ (seed 11594: flowgrad's was mean + 0j)
    want, got = _both(lambda m: m.normal(3.0, 0.0, size=(2,),
                                         out=m.empty(2, dtype=m.complex64)).tolist())
    assert got == want == [3 + 3j, 3 + 3j]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_uniform_draws_stay_below_the_upper_bound(dtype):
    # float64 draws cast to float16 rounded up to 1.0 about once in 4000 (bfloat16: once in
    # 500): rand, rand_like and uniform_ gave values outside [0, 1) and [a, b); torch draws
    # on the dtype's own grid, k / 2**digits
    flow.manual_seed(0)
    dt = getattr(flow, dtype)
    draws = [flow.rand(50000, dtype=dt), flow.rand_like(flow.zeros(50000, dtype=dt)),
             flow.empty(50000, dtype=dt).uniform_()]
    assert all(float(x.max()) < 1.0 for x in draws)
    assert float(flow.empty(50000, dtype=dt).uniform_(-1.0, 1.0).max()) < 1.0
    assert float(flow.empty(50000, dtype=dt).uniform_(1000.0, 1001.0).max()) < 1001.0


def test_random_integers_in_a_half_dtype_stay_below_to():
    # past 2**digits a half dtype rounds integers: randint(0, 300, dtype=bfloat16) drew 300
    # (299 rounded up), outside [0, 300) (seed 9929); torch's stay below `to` (and warn)
    flow.manual_seed(0)
    for x in (flow.randint(0, 300, (20000,), dtype=flow.bfloat16),
              flow.randint_like(flow.zeros(20000, dtype=flow.bfloat16), 0, 300),
              flow.empty(20000, dtype=flow.bfloat16).random_(0, 300),
              flow.empty(20000, dtype=flow.float16).random_(0, 4001)):
        top = 300 if x.numel() and x.dtype == flow.bfloat16 else 4001
        assert float(x.max()) < top and float(x.min()) >= 0
