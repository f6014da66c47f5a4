"""Differential fuzzing of how Tensor methods read their arguments: one method of a tensor,
called with a random argument list (small ints, floats, bools, None, tuples of ints, other
tensors, a keyword or two), in torch and in flowgrad.

Where both run, the results must be equal (values, dtype, shape; for tuples each part; for
Python numbers and bools, equal): a positional argument read as another parameter than
torch's is a wrong number with no error, the worst defect. Where torch raises, flowgrad must
raise (any class: messages are compared by tests/test_argument_errors.py), except where
torch's refusal is a TypeError of its argument parser and flowgrad takes the arguments
(flowgrad is lenient there on purpose: numbers where torch wants tensors, a dtype or memory
format given positionally), provided the call wrote none of its tensors unless its name says
it writes self (`x.relu(1)` ran F.relu's inplace=1: found). Where only flowgrad raises, the
verdict names the call unless KNOWN lists the pattern. Random methods, methods taking
callables or hooks, and storage/device plumbing are not drawn (see SKIP).

From seed 100,000 (FUNCTION_SEEDS) a third of the calls are methods, a third torch.*
functions and a third F.* functions of the tensor drawn first (SKIP_FUNCTIONS: global
state, random draws, factories, I/O, transforms and functions of several tensors).

    .venv/bin/python tests/call_fuzz.py --seeds 0:500      # summary
    .venv/bin/python tests/call_fuzz.py --show 17          # one call and its verdict
"""
from __future__ import annotations

import random
import re
import warnings

import fuzz_common
import numpy as np
import torch

import flowgrad as flow

SKIP = re.compile(
    r"^(_|apply_|map_|map2_|register_|backward|retain_grad|data_ptr|storage|untyped_storage|"
    r"share_memory_|pin_memory|is_pinned|cuda|cpu|to_|numpy|tolist|dim_order|record_stream|"
    r"random_|uniform_|normal_|cauchy_|exponential_|geometric_|log_normal_|bernoulli|"
    r"multinomial|rrelu|dropout|new_empty|empty_like|resize|set_|as_strided|__|"
    r"element_size|nbytes|itemsize|get_device|device|is_|has_|requires_grad_|detach_|"
    r"module_load|refine_names|rename|align|unflatten|names|lu_solve|smm|sspaddmm|"
    r"sparse|indices|values|crow|col|row|ccol|coalesce|dequantize|q_|int_repr|"
    r"qscheme|type|storage_offset|stride|untyped|nonzero_static|pinverse|unique|"
    r"to$|new_tensor|share|istft|stft|align_to|data$|grad|item$|const_data_ptr|new$)")
SHAPES = [(3, 4), (4,), (2, 3, 4), (), (4, 4)]
DTYPES = ["float32", "float64", "int64", "bool"]


def _methods():
    names = sorted(n for n in dir(torch.Tensor)
                   if not SKIP.match(n) and callable(getattr(torch.Tensor, n, None))
                   and hasattr(flow.Tensor, n))
    return names


METHODS = _methods()
# the torch.* and F.* functions, from seed FUNCTION_SEEDS on (older seeds keep their calls):
# those of a tensor first argument, less global state, random draws, I/O and transforms
SKIP_FUNCTIONS = re.compile(
    r"^(_|set_|get_|manual_seed|seed|initial_seed|use_|are_|is_|fork_rng|save|load|compile|"
    r"jit|vmap|func|autograd|cuda|mps|xpu|cpu|device|Generator|from_|frombuffer|as_strided|"
    r"empty|rand|normal|poisson|bernoulli|multinomial|dropout|alpha_dropout|"
    r"feature_alpha_dropout|rrelu|gumbel|binomial|sym_|typename|compiled_with|"
    r"can_cast|promote_types|result_type|cond|while_loop|vmap|export|library|"
    r"no_grad|enable_grad|inference_mode|chunk$|split$|unbind|meshgrid|broadcast_tensors|"
    r"atleast|block_diag|cartesian_prod|einsum|stft|istft|lobpcg|pca_lowrank|svd_lowrank|"
    r"lu_unpack|unique|nonzero_static|ctc_loss|embedding_bag|fold|unfold|grid_sample|"
    r"affine_grid|interpolate|upsample|pad|scaled_dot|multi_head|fractional|lp_pool|"
    r"max_unpool|adaptive_max|conv|batch_norm|instance_norm|group_norm|layer_norm|rms_norm|"
    r"local_response|embedding|one_hot|gumbel|sparse|nested|quantize|fake_quantize|q_|"
    r"histogram|bincount|searchsorted|bucketize|tensordot|kron|tril_indices|triu_indices|"
    r"arange|range|linspace|logspace|eye|full|zeros|ones|tensor|as_tensor|asarray|"
    r"scalar_tensor|complex|polar|view_as_complex|window|hann|hamming|blackman|bartlett|"
    r"kaiser|pdist|cdist|triplet|cosine_embedding|margin_ranking|hinge_embedding|"
    r"multilabel|multi_margin|ctc|nll_loss2d|channel_shuffle|pixel_|native_|stack|"
    r"cat|concat|hstack|vstack|dstack|column_stack|row_stack|where|numel|clear_|"
    r"allclose|isclose|equal|resize)")


def _functions(space, ours):
    return sorted(n for n in dir(space) if not SKIP_FUNCTIONS.match(n)
                  and callable(getattr(space, n)) and not isinstance(getattr(space, n), type)
                  and callable(getattr(ours, n, None)))


FUNCTIONS = {"torch": _functions(torch, flow),
             "F": _functions(torch.nn.functional, flow.nn.functional)}
FUNCTION_SEEDS = 100_000
# differences kept: reason -> a pattern of the verdicts it covers (a seed showing each is in
# tests/test_call_fuzz.py)
KNOWN = {
    "polygamma at a pole: torch's series gives a large finite number, flowgrad the +inf "
    "the function has there": r"^Tensor\.polygamma_?: differ: .*(inf|e\+(1[4-9]|[2-9]\d))",
    "a bool inside an int list (x.repeat(3, True)): torch's parser takes it as 0 or 1":
        r"must be tuple of ints, not bool|must be ints or one tuple of ints, got \(.*(True|Fa)",
    "trapezoid/cumulative_trapezoid with x of more dims than y: flowgrad broadcasts the "
    "spacing, torch's shape check refuses (no number differs where both run)":
        r"^torch\.(trapz|trapezoid|cumulative_trapezoid): only torch raised RuntimeError: "
        r"The size of tensor a",
    "gaussian_nll_loss of an integer input: torch computes in the variance's dtype, "
    "flowgrad asks for a floating input": r"gaussian_nll_loss: expected a floating point input",
    "squeeze_(d0, d1) with several ints: torch's parser reads them oddly (an int result)":
        r"^Tensor\.squeeze_?: only flowgrad raised TypeError: squeeze_?\(\)",
    "max(d, keepdim) with d a 0-d integer tensor: flowgrad takes the tensor for max's "
    "other operand": r"^Tensor\.max: only flowgrad raised TypeError: max\(\): keepdim needs",
    "gaussian_nll_loss with an integer var of other shape: torch's cast check refuses":
        r"^F\.gaussian_nll_loss: only torch raised RuntimeError: result type",
    "adaptive_avg_pool of an integer tensor to an empty output: torch returns before its "
    "dtype check": r"^F\.adaptive_avg_pool\dd: only flowgrad raised NotImplementedError",
}
# ops whose indices of tied values torch leaves unspecified: their values alone are compared
TIED_INDICES = {"topk"}


def _operand(rng):
    """A spec of an argument: ('t', shape, dtype) for a tensor, else a Python value."""
    r = rng.random()
    if r < 0.35:
        return ("t", rng.choice(SHAPES), rng.choice(DTYPES[:3]))
    if r < 0.6:
        return rng.choice([-2, -1, 0, 1, 2, 3])
    if r < 0.7:
        return rng.choice([0.5, -1.5, 2.0])
    if r < 0.8:
        return rng.choice([True, False])
    if r < 0.88:
        return None
    return tuple(rng.choice([0, 1, -1, 2]) for _ in range(rng.randint(1, 2)))


def generate(seed):
    """(name, self or first argument, other arguments, keywords, space): space "Tensor" (a
    method), "torch" or "F" (a function of the first argument)."""
    rng = random.Random(seed)
    space = "Tensor" if seed < FUNCTION_SEEDS else rng.choice(["Tensor", "torch", "F"])
    name = rng.choice(METHODS if space == "Tensor" else FUNCTIONS[space])
    self_spec = ("t", rng.choice(SHAPES), rng.choice(DTYPES))
    args = [_operand(rng) for _ in range(rng.choice([0, 1, 1, 2, 2, 3]))]
    kwargs = {}
    if rng.random() < 0.25:
        kwargs[rng.choice(["dim", "keepdim", "dtype", "alpha", "value", "out_dtype"])] = \
            rng.choice([0, 1, True, "float64"])
    return name, self_spec, args, kwargs, space


def _value(m, spec, k):
    if isinstance(spec, tuple) and spec and spec[0] == "t":
        _, shape, dtype = spec
        n = int(np.prod(shape, dtype=np.int64))
        data = ((np.arange(n) * 0.75 + k) % 5 - 2).reshape(shape)
        if dtype == "bool":
            data = data > 0
        return m.tensor(data.tolist() if shape else data.item(), dtype=getattr(m, dtype))
    if spec == "float64":
        return m.float64
    return spec


def _describe(spec):
    if isinstance(spec, tuple) and spec and spec[0] == "t":
        return f"m.ones({spec[1]}, dtype=m.{spec[2]})"
    return "m.float64" if spec == "float64" else repr(spec)


def source(seed):
    name, self_spec, args, kwargs, space = generate(seed)
    parts = [_describe(a) for a in args] + [f"{k}={_describe(v)}" for k, v in kwargs.items()]
    if space == "Tensor":
        return f"{_describe(self_spec)}.{name}({', '.join(parts)})"
    where = "m" if space == "torch" else "m.nn.functional"
    return f"{where}.{name}({', '.join([_describe(self_spec)] + parts)})"


def _call(m, seed, written=None):
    """The call's result; `written` (a list) gets True when it changed a tensor it was given
    other than an in-place method's self."""
    name, self_spec, args, kwargs, space = generate(seed)
    x = _value(m, self_spec, 0)
    a = [_value(m, s, i + 1) for i, s in enumerate(args)]
    kw = {k: _value(m, v, 9) for k, v in kwargs.items()}
    given = [t for t in (*a, *kw.values()) if hasattr(t, "shape") and hasattr(t, "clone")]
    if not name.endswith("_"):
        given.append(x)
    before = [t.clone() for t in given]
    try:
        if space == "Tensor":
            return getattr(x, name)(*a, **kw)
        return getattr(m if space == "torch" else m.nn.functional, name)(x, *a, **kw)
    finally:
        if written is not None:
            written.append(any(not m.equal(t, b) for t, b in zip(given, before)))


def _as_compared(r, values_only=False):
    if values_only and isinstance(r, tuple):
        return _as_compared(r[0])
    if hasattr(r, "detach") and hasattr(r, "shape"):
        t = r.detach()
        return ("tensor", str(t.dtype).split(".")[-1], tuple(t.shape),
                t.to(torch.float64 if isinstance(t, torch.Tensor) else flow.float64).numpy()
                if t.dtype not in (torch.complex64, torch.complex128, flow.complex64,
                                   flow.complex128) and t.dtype not in (torch.bfloat16,
                                                                       flow.bfloat16)
                else None)
    if isinstance(r, (tuple, list)):
        return tuple(_as_compared(v) for v in r)
    if isinstance(r, (bool, int, float, complex)):
        return r
    return "uncompared"


def _same(a, b):
    if isinstance(a, tuple) and isinstance(b, tuple):
        if a and a[0] == "tensor" and b and b[0] == "tensor":
            if a[1:3] != b[1:3]:
                return False
            if a[3] is None or b[3] is None:
                return True
            return np.allclose(a[3], b[3], rtol=1e-5, atol=1e-6, equal_nan=True)
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return np.isclose(a, b, rtol=1e-5, equal_nan=True)
    return a == b or "uncompared" in (a, b)


def check(seed):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tied = generate(seed)[0] in TIED_INDICES
        try:
            want, et = _as_compared(_call(torch, seed), tied), None
        except Exception as e:  # noqa: BLE001 - any refusal is compared
            want, et = None, e
        written = []
        try:
            got, ef = _as_compared(_call(flow, seed, written), tied), None
        except Exception as e:  # noqa: BLE001
            got, ef = None, e
    if et is not None and ef is not None:
        return None
    if isinstance(et, TypeError) and written and not written[0]:
        return None  # (flowgrad's leniency: see the module's docstring)
    if et is not None:
        verdict = f"only torch raised {type(et).__name__}: {str(et).splitlines()[0][:150]}"
    elif ef is not None:
        verdict = f"only flowgrad raised {type(ef).__name__}: {str(ef).splitlines()[0][:150]}"
    elif not _same(want, got):
        verdict = f"differ: torch {str(want)[:200]}, flowgrad {str(got)[:200]}"
    else:
        return None
    name, space = generate(seed)[0], generate(seed)[4]
    verdict = f"{space}.{name}: {verdict}"
    if any(re.search(p, verdict) for p in KNOWN.values()):
        return None
    return verdict


if __name__ == "__main__":
    fuzz_common.main(__doc__, source, check)
