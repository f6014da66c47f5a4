"""Every OpInfo of torch's op database against flowgrad (opinfo_vs_torch.py does the work).

Each OpInfo's sample inputs run in float64 (values and gradients), int64, bool and complex128,
and its error inputs must raise. A finding fails the test unless the OpInfo is in KNOWN with
a pattern its findings match (a divergence kept on purpose, or a feature not built yet, each
with its reason); an entry that no longer matches anything fails too, so the list only
shrinks. MISSING lists the OpInfos flowgrad has no op for.
"""
from __future__ import annotations

import re

import pytest

pytest.importorskip("expecttest")  # torch's test internals import it

import opinfo_vs_torch  # noqa: E402
import torch  # noqa: E402
from opinfo_vs_torch import assert_explained, full_name, op_db, probe  # noqa: E402

DTYPES = (torch.float64, torch.int64, torch.bool, torch.complex128)

# flowgrad takes Python numbers where torch's functions insist on tensors (torch.maximum(2, t)):
# a permissiveness kept on purpose (the result is the same math)
_SCALAR_ARGS = r"no raise where torch raises Exception\(''\)"
_COMPLEX = r"complex (input|tensors?)|not supported for complex|got flowgrad\.complex"
_INTEGER = r"expected a floating point input, got flowgrad\.(int64|bool)"
_R_SCALAR = "takes Python numbers where torch's function insists on tensors (kept on purpose)"
_R_COMPLEX = "no complex support yet (a clear error)"
_R_INTEGER = "no integer kernel (a clear error)"

KNOWN: dict[str, tuple[str, str]] = {
    "nn.functional.multi_head_attention_forward": (
        r"output\[0\]: values differ", "the dropout_p=0.5, training=True samples: random "
        "draws (torch wraps them in wrapper_set_seed); the others agree, and "
        "test_nn_gaps_vs_torch.py checks values and gradients without dropout"),
    "as_strided_scatter": (r"grad\[0\]: values differ",
                           "torch 2.13's input gradient is the complement of the right one "
                           "(its own OpInfo marks test_fn_grad expectedFailure); flowgrad's "
                           "is checked against torch's as_strided_scatter in "
                           "test_as_strided_vs_torch.py"),
    "svd_lowrank": (r"processed output\[0\]: values differ",
                    "with M, A - M has full rank and the q=2 result depends on the random "
                    "projection; flowgrad's generator is not torch's stream"),
    "__radd__": (_SCALAR_ARGS, _R_SCALAR),
    "__rand__": (_SCALAR_ARGS, _R_SCALAR),
    "__rmod__": (_SCALAR_ARGS, _R_SCALAR),
    "__rmul__": (_SCALAR_ARGS, _R_SCALAR),
    "__ror__": (_SCALAR_ARGS, _R_SCALAR),
    "__rpow__": (_SCALAR_ARGS, _R_SCALAR),
    "__rsub__": (_SCALAR_ARGS, _R_SCALAR),
    "__rxor__": (_SCALAR_ARGS, _R_SCALAR),
    "clamp_max": (_SCALAR_ARGS, _R_SCALAR),
    "clamp_min": (_SCALAR_ARGS, _R_SCALAR),
    "copysign": (_SCALAR_ARGS, _R_SCALAR),
    "cov": (r"grad\[1\]: values differ",
        "float32 aweights' gradient, exactly 0 in exact arithmetic: both libraries give float32 "
        "rounding noise (1.5e-5), in different positions"),
    "fmod": (_SCALAR_ARGS, _R_SCALAR),
    "nn.functional.batch_norm": (r"expected 2D or more input",
        "a 1-D input: flowgrad asks for (N, C, ...), torch also takes an empty 1-D one"),
    "special.bessel_j0": (r"output: values differ",
        "torch's float32-accurate approximation (errors to 8e-7); flowgrad's Cephes agrees with "
        "mpmath to 1e-15"),
    "special.bessel_j1": (r"output: values differ", "as bessel_j0"),
    "special.bessel_y1": (r"output: values differ", "as bessel_j0"),
    "to_sparse": (r"_to_sparse does not support automatic differentiation",
        "flowgrad's sparse conversion of complex tensors records a gradient; torch refuses"),
}

# what only the reference inputs show (their extremal values, Python-number pairs)
_NUMBER_PAIR = r"NotImplemented"
_R_NUMBER_PAIR = ("Tensor.__rpow__/__rmod__ called with a Python number as self: flowgrad's "
                  "reflected operators return NotImplemented, as Python's protocol asks")
_NAN_LANES = r"grad\[0\]: values differ"
_R_NAN_LANES = ("the gradient at nan: torch's scalar tail (these 9-value samples) and its "
                "vector lanes differ; flowgrad gives the vector lanes' value")
_R_NAN_ARGS = ("nan arguments: torch returns 0 or 1 by its boundary checks' order, flowgrad nan")
KNOWN_REFERENCE: dict[str, tuple[str, str]] = {
    "__rpow__": (_NUMBER_PAIR, _R_NUMBER_PAIR),
    "__rmod__": (_NUMBER_PAIR + "|derivative for aten::remainder is not implemented",
                 _R_NUMBER_PAIR + "; torch has no gradient for remainder's divisor"),
    "remainder": ("derivative for aten::remainder is not implemented",
                  "torch has no gradient for remainder's divisor; flowgrad's is -floor(a/b)"),
    **{name: (_NAN_LANES, _R_NAN_LANES) for name in (
        "nn.functional.elu", "nn.functional.celu", "nn.functional.selu",
        "nn.functional.hardtanh", "nn.functional.relu6", "nn.functional.hardshrink",
        "nn.functional.softshrink")},
    "igamma": (r"output: values differ", _R_NAN_ARGS),
    "igammac": (r"output: values differ", _R_NAN_ARGS),
    "polar": (r"grad\[0\]: values differ", "abs < 0 (outside torch's domain): torch's gradient "
              "uses sgn(result) and flips sign; flowgrad's matches finite differences"),
    **{f"polygamma.polygamma_n_{n}": (r"output: values differ", "polygamma(n >= 2, +inf): "
                                      "torch nan (inf/inf in its zeta), flowgrad the limit 0")
       for n in (1, 2, 3, 4)},
    "digamma": (r"grad\[0\]: values differ", "trigamma at exact poles: +inf (a double pole), "
                "torch a finite number from rounding in sin(pi x)"),
    "narrow_copy": (r"grad raise: torch RuntimeError\('The size of tensor a",
                    "a negative start: torch's own gradient raises, flowgrad's works"),
    "addcdiv": (r"values differ", "a bfloat16 operand: rounding of the mixed-precision product"),
    "special.i1": (r"grad\[0\]: values differ", "the gradient at nan: torch 0.5 (its |x| <= "
                   "eps test is false for nan), flowgrad nan"),
    "special.i1e": (r"grad\[0\]: values differ", "as special.i1"),
    "special.zeta": (r"output: values differ", "every term underflows (q = inf, or x and q "
                     "huge): the sum is 0; torch's nan is inf/inf in its kernel"),
    "special.airy_ai": (r"output: values differ", "torch's float32-accurate approximation "
                        "(errors to 3e-6), and below x ~ -1e4 its asymptotic value where "
                        "SciPy's airy gives nan"),
    "signal.windows.kaiser": (r"torch nan, flowgrad 0\.0", "beta = 100 in float32: torch's "
                              "float32 i0 overflows past x ~ 88 (its exp(x)) where the value "
                              "still fits (i0(90) = 5.1e37), so i0(beta) = inf: torch nan, "
                              "flowgrad finite / inf = 0"),
    "special.bessel_y0": (r"output: values differ", "torch's float32-accurate approximation, "
                          "as bessel_j0"),
    "special.log_ndtr": (r"grad\[0\]: values differ", "the gradient phi/Phi for x << 0: "
                         "torch's is 0.4% off at -1.4e6 and inf or 0.399 from -1e12; flowgrad's "
                         "is -x(1 - 1/x^2 + ...) to an ulp, and +inf at -inf (torch nan)"),
}

MISSING: set[str] = {
    "_batch_norm_with_update", "_chunk_cat", "_native_batch_norm_legit",
    "_softmax_backward_data",
    "_unsafe_masked_index", "_unsafe_masked_index_put_accumulate", "_upsample_bilinear2d_aa",
    "chalf",
    "hash_tensor", "jiterator_2inputs_2outputs",
    "jiterator_4inputs_with_extra_args", "jiterator_binary",
    "jiterator_binary_return_by_ref", "jiterator_unary", "max_pool2d_with_indices_backward",
    "native_dropout_backward", "slice",
    "torch._scaled_mm", "torch._scaled_mm_v2",
    "torch.ops.aten._efficient_attention_forward", "torch.ops.aten._flash_attention_forward",
    "torch.ops.aten._safe_softmax.default",
}

DB = op_db()


def _check(info, dtypes, known, stale_check=True):
    name = full_name(info)
    findings = probe(info, dtypes)
    if findings and findings[0][2] == "missing":
        assert name in MISSING, f"{name}: flowgrad has no op of this name (add it, or MISSING)"
        pytest.skip("not in flowgrad")
    assert name not in MISSING, f"{name} exists in flowgrad now: remove it from MISSING"
    assert_explained(name, findings, known, stale_check)


@pytest.mark.parametrize("info", DB, ids=[full_name(info) for info in DB])
def test_opinfo_vs_torch(info):
    _check(info, DTYPES, KNOWN)


@pytest.mark.slow
@pytest.mark.parametrize("info", DB, ids=[full_name(info) for info in DB])
def test_opinfo_reference_inputs_vs_torch(info, monkeypatch):
    """torch's larger reference inputs: extremal values (nan, +-inf, 0, poles), big tensors,
    Python-number operands; float64, with gradients (KNOWN's entries for other dtypes may see
    nothing here)."""
    monkeypatch.setattr(opinfo_vs_torch, "REFERENCE", True)
    known = dict(KNOWN)
    for name, (pattern, reason) in KNOWN_REFERENCE.items():  # a name in both: either pattern
        if name in known:
            pattern, reason = f"{known[name][0]}|{pattern}", f"{known[name][1]}; {reason}"
        known[name] = (pattern, reason)
    _check(info, DTYPES[:1], known, stale_check=False)


# float16 and bfloat16: outputs (raise/no-raise, dtype, shape, values at half tolerance), no
# gradients and no error inputs (the float64 test has both). Where torch's half arithmetic
# differs from flowgrad's float32-then-round, or a half kernel is not built:
_HALF_LINALG = ("half-precision linalg (matrix_exp): not built, a clear error "
                "(torch computes them in half)")
_HALF_ROUNDING = ("torch computes in half precision step by step; flowgrad in float32, rounded "
                  "once: values near a rounding or bin edge land on the other side")
KNOWN_HALF: dict[str, tuple[str, str]] = {
    "nn.functional.multi_head_attention_forward": (
        r"output\[0\]: values differ", "dropout_p=0.5 with training=True: random draws"),
    "complex": (r"expected real to be a float32 or float64", "no complex32 (chalf) dtype"),
    "view_as_complex": (r"only supported for float32 and float64", "no complex32 dtype"),
    "matrix_exp": (r"Expected a floating point or complex tensor", _HALF_LINALG),
    "linalg.matrix_exp": (r"Expected a floating point or complex tensor", _HALF_LINALG),
    "nn.functional.batch_norm": (r"expected 2D or more input", "a 1-D empty input (as float64)"),
    "nn.functional.scaled_dot_product_attention": (r"values differ", _HALF_ROUNDING + " (scores "
                                                   "of ~100 make softmax an argmax)"),
    "nn.functional.soft_margin_loss": (r"torch inf", "torch's float16 exp overflows to inf; "
                                       "flowgrad's float32 exp gives the finite loss"),
}


@pytest.mark.parametrize("info", DB, ids=[full_name(info) for info in DB])
def test_opinfo_half_precision_vs_torch(info):
    if full_name(info) in MISSING:
        pytest.skip("not in flowgrad")
    fn = opinfo_vs_torch.resolve(info)
    supported = info.supported_dtypes("cpu")
    findings = []
    for dtype in (torch.float16, torch.bfloat16):
        if dtype not in supported:
            continue
        for sample in opinfo_vs_torch.samples(info, dtype):
            message = opinfo_vs_torch.run_sample(info, fn, sample, check_grad=False,
                                                 values=info.name not in opinfo_vs_torch.RANDOM)
            if message and not message.startswith("skip"):
                findings.append(f"[{str(dtype)[6:]}] {opinfo_vs_torch.describe(sample)}\n    "
                                f"{message}")
    pattern = KNOWN_HALF.get(full_name(info), (None,))[0]
    unexplained = [f for f in findings if pattern is None or not re.search(pattern, f)]
    assert not unexplained, "\n".join(unexplained[:6])
    assert pattern is None or findings, "no finding matches KNOWN_HALF any more: remove it"
