"""flowgrad: OneFlow's eager autograd, in Python on NumPy. `import flowgrad as flow`.

>>> import flowgrad as flow
>>> x = flow.tensor([-1.0, 2.0], requires_grad=True)
>>> flow.relu(x).sum().backward()
>>> x.grad
tensor([0., 1.])
"""
import math as _math
import warnings as _warnings

from . import (
    _C,
    accelerator,
    amp,
    autograd,
    backends,
    compiler,
    cpu,
    cuda,
    distributed,
    distributions,
    fft,
    func,
    hub,
    jit,
    library,
    linalg,
    masked,
    meta,
    mps,
    multiprocessing,
    nn,  # noqa: E402,I001 - nn builds on everything above
    onnx,
    ops,
    optim,
    overrides,
    profiler,
    signal,
    sparse,
    special,
    testing,
    types,
    utils,
    xpu,
)
from . import errors as _errors
from . import sparse_shape as _sparse_shape  # noqa: F401,E402 - sparse forms of the functions
from . import tensor_copy as _tensor_copy  # noqa: F401,E402 - Tensor.__deepcopy__
from .amp.autocast_mode import (  # noqa: F401 - torch.* names of the autocast state
    autocast,
    autocast_decrement_nesting,
    autocast_increment_nesting,
    clear_autocast_cache,
    get_autocast_cpu_dtype,
    get_autocast_dtype,
    get_autocast_gpu_dtype,
    is_autocast_cache_enabled,
    is_autocast_cpu_enabled,
    is_autocast_enabled,
    set_autocast_cache_enabled,
    set_autocast_cpu_dtype,
    set_autocast_cpu_enabled,
    set_autocast_dtype,
    set_autocast_enabled,
    set_autocast_gpu_dtype,
)
from .amp.grad_scaler import GradScaler  # torch.GradScaler is torch.amp.GradScaler
from .autograd.anomaly import (  # noqa: F401 - torch.* names
    is_anomaly_check_nan_enabled,
    is_anomaly_enabled,
    set_anomaly_enabled,
)
from .autograd.grad_mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    no_grad,
    set_grad_enabled,
)
from .autograd.inference import is_inference_mode_enabled
from .compiler import compile  # torch.compile's name
from .device import device
from .dtypes import *  # noqa: F401,F403
from .dtypes import can_cast, dtype, get_default_dtype, promote_types, set_default_dtype
from .ops import lapack_outs as _lapack_outs
from .ops import linalg as _linalg_ops
from .ops import linalg_func as _linalg_func
from .ops import out_arg as _out_arg
from .ops.activation import *  # noqa: F401,F403
from .ops.compare import isin  # noqa: F401 - the other comparisons come with elementwise
from .ops.complex import *  # noqa: F401,F403
from .ops.conv import *  # noqa: F401,F403
from .ops.copies import *  # noqa: F401,F403
from .ops.creation import *  # noqa: F401,F403
from .ops.creation_extra import *  # noqa: F401,F403
from .ops.diag import *  # noqa: F401,F403
from .ops.einsum import *  # noqa: F401,F403
from .ops.elementwise import *  # noqa: F401,F403
from .ops.elementwise_more import *  # noqa: F401,F403
from .ops.foreach import *  # noqa: F401,F403 - torch._foreach_*
from .ops.gather import *  # noqa: F401,F403
from .ops.index import *  # noqa: F401,F403
from .ops.index_functions import *  # noqa: F401,F403
from .ops.index_static import *  # noqa: F401,F403
from .ops.linalg import *  # noqa: F401,F403
from .ops.linalg_func import (  # noqa: F401 - torch.* spellings of linalg functions
    chain_matmul,
    cross,
    geqrf,
    ger,
    orgqr,
    ormqr,
    triangular_solve,
    vdot,
)
from .ops.linalg_func import torch_lu as lu  # noqa: F401
from .ops.linalg_func import torch_lu_solve as lu_solve  # noqa: F401
from .ops.linalg_func import torch_matrix_exp as matrix_exp  # noqa: F401
from .ops.linalg_func import torch_matrix_power as matrix_power  # noqa: F401
from .ops.linalg_func import torch_qr as qr  # noqa: F401
from .ops.linalg_func import torch_svd as svd  # noqa: F401
from .ops.linalg_func import torch_vander as vander  # noqa: F401
from .ops.linalg_lowrank import lobpcg, pca_lowrank, svd_lowrank  # noqa: F401
from .ops.linalg_solve import cholesky_inverse, cholesky_solve, lu_unpack, pinverse  # noqa: F401
from .ops.math import *  # noqa: F401,F403
from .ops.math_extra import *  # noqa: F401,F403
from .ops.nn_extra import *  # noqa: F401,F403 - torch.* spellings of nn functions
from .ops.nn_misc import (  # noqa: F401 - torch.* has these with F's signature
    cdist,
    cosine_similarity,
    pairwise_distance,
)
from .ops.norm import *  # noqa: F401,F403
from .ops.normalization import rms_norm  # noqa: F401
from .ops.odds import *  # noqa: F401,F403
from .ops.pool import (  # noqa: F401 - the pools torch.* has too
    adaptive_avg_pool1d,
    adaptive_max_pool1d,
    avg_pool1d,
    max_pool1d,
    max_pool1d_with_indices,
    max_pool2d,
    max_pool3d,
)
from .ops.quantize import *  # noqa: F401,F403
from .ops.reduce import *  # noqa: F401,F403
from .ops.reduce_nan import *  # noqa: F401,F403
from .ops.reorder import *  # noqa: F401,F403
from .ops.sampling import poisson  # noqa: F401
from .ops.scan import *  # noqa: F401,F403
from .ops.shape import *  # noqa: F401,F403
from .ops.sort import *  # noqa: F401,F403
from .ops.spatial import pixel_shuffle, pixel_unshuffle  # noqa: F401
from .ops.special_fns import *  # noqa: F401,F403
from .ops.spectral import *  # noqa: F401,F403
from .ops.split import *  # noqa: F401,F403
from .ops.stacks import *  # noqa: F401,F403
from .ops.stats import *  # noqa: F401,F403
from .ops.strided import *  # noqa: F401,F403
from .ops.tensor_extra import *  # noqa: F401,F403
from .ops.torch_spellings import *  # noqa: F401,F403 - after the *s: torch.* keyword names
from .ops.windows import *  # noqa: F401,F403
from .printing import set_printoptions
from .random import (
    Generator,
    default_generator,
    get_rng_state,
    initial_seed,
    manual_seed,
    seed,
    set_rng_state,
)
from .serialization import load, save
from .settings import *  # noqa: F401,F403 - determinism and matmul precision switches
from .sparse import layout, sparse_coo, sparse_coo_tensor, spmm, strided  # noqa: F401
from .sparse_compressed import (  # noqa: F401
    sparse_bsc,
    sparse_bsc_tensor,
    sparse_bsr,
    sparse_bsr_tensor,
    sparse_compressed_tensor,
    sparse_csc,
    sparse_csc_tensor,
    sparse_csr,
    sparse_csr_tensor,
)
from .storage import UntypedStorage
from .tensor import Size, Tensor
from .threads import (
    get_num_interop_threads,
    get_num_threads,
    set_num_interop_threads,
    set_num_threads,
)
from .typed_tensors import *  # noqa: F401,F403 - FloatTensor..., channels_last...
from .utils.dlpack import from_dlpack, to_dlpack  # noqa: F401 - torch.* has both
from .version import __version__  # torch.version is a module too (torch.version.cuda)

inf, nan, pi, e = _math.inf, _math.nan, _math.pi, _math.e
newaxis = None  # torch's constants (torch.inf, torch.pi, x[:, torch.newaxis])

# autograd's tools (functional, gradcheck) are built on the ops and func layers: loaded last
autograd._load_tools()

# NumPy warns (log(0), 0/0, overflow) where torch is silent and returns inf/nan: ignore the
# RuntimeWarnings raised from flowgrad's own code; the user's NumPy code still warns.
_warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"flowgrad\.")
utils.memory.keep_freed_memory(True)  # reuse freed activation buffers: see utils/memory.py


vmap = func.vmap  # torch.vmap is torch.func.vmap

# torch's `out=` on the torch.* functions that take it and have no own out parameter; those
# torch never differentiates skip its autograd check on out= (an input requiring grad is fine)
_UNTRACKED = ("eq", "ne", "lt", "le", "gt", "ge", "greater", "greater_equal", "less",
              "less_equal", "not_equal", "logical_not", "logical_and", "logical_or",
              "logical_xor", "argmax", "argmin", "any", "all", "isneginf", "isposinf", "signbit",
              "isin", "bucketize", "searchsorted", "nonzero", "histc")
# and those whose out= form torch computes by other ops (no autograd check of the inputs;
# an `out` that requires grad is still refused)
_OUT_TRACKED = ("floor_divide", "heaviside", "conj_physical", "diag", "inner", "nanquantile",
                "quantile", "tensordot", "multinomial", "softmax", "log_softmax", "histogram",
                "slice_scatter")
# (of those, the ones whose out= form torch records without a derivative: out requires grad
# and its backward raises, naming torch's op)
_OUT_NO_DERIVATIVE = {"conj_physical": "conj_physical", "diag": "diagonal_copy",
                      "softmax": "softmax", "log_softmax": "log_softmax",
                      "slice_scatter": "slice_scatter"}
_OUT_NAMES = (
    "sum", "mean", "prod", "cumsum", "cumprod", "amax", "amin", "argmax", "argmin", "matmul",
    "mm", "bmm", "mv", "dot", "outer", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p",
    "sqrt", "rsqrt", "abs", "absolute", "neg", "negative", "reciprocal", "sign", "sgn", "round",
    "floor", "ceil", "trunc", "frac", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh",
    "tanh", "asinh", "acosh", "atanh", "arcsin", "arccos", "arctan", "arcsinh", "arccosh",
    "arctanh", "sigmoid", "erf", "erfc", "erfinv", "square", "eq", "ne",
    "lt", "le", "gt", "ge", "logical_not", "logical_and", "logical_or", "logical_xor", "where",
    "stack", "hstack", "vstack", "pow", "remainder", "fmod", "maximum", "minimum", "fmax",
    "fmin", "mul", "multiply", "sub", "subtract", "atan2", "arctan2", "hypot", "bitwise_and",
    "bitwise_or", "bitwise_xor", "bitwise_not", "cross", "lerp", "addmm", "baddbmm", "addmv",
    "addcmul", "addcdiv", "logsumexp", "nansum", "std", "var", "norm",
    "floor_divide", "true_divide", "xlogy", "copysign", "nextafter", "logaddexp", "logit", "all",
    "addbmm", "addr", "angle", "any", "bitwise_left_shift", "bitwise_right_shift", "bucketize",
    "cholesky_inverse", "cholesky_solve", "conj_physical", "deg2rad", "diag", "diff",
    "digamma", "fix", "float_power", "gather", "gcd", "ger", "greater", "greater_equal",
    "heaviside", "histc", "i0", "igamma", "igammac", "index_select", "inner", "inverse",
    "isneginf", "isposinf", "lcm", "ldexp", "less", "less_equal", "lgamma", "logaddexp2",
    "logcumsumexp", "masked_select", "msort", "nan_to_num", "nanmean", "nanquantile",
    "not_equal", "polygamma", "quantile", "rad2deg", "renorm", "searchsorted", "signbit",
    "sinc", "take_along_dim", "tensordot", "tril", "triu", "vdot",
    # factories: made in out's dtype unless dtype= says
    "arange", "zeros", "ones", "empty", "full", "linspace", "logspace", "eye", "rand", "randn",
    "randint", "randperm",
    # several results: out=(values, indices), ...
    "aminmax", "cummax", "cummin", "frexp", "kthvalue", "max", "min", "mode", "sort", "topk",
)
# torch's elementwise kernels (and cumsum, diff, msort) refuse an out= sharing only part of
# an input's memory; its reductions, matmuls and the others write wherever out is
_ELEMENTWISE_OUT = frozenset(_OUT_NAMES[_OUT_NAMES.index("exp"):_OUT_NAMES.index("stack")]) | {
    "pow", "remainder", "fmod", "maximum", "minimum", "fmax", "fmin", "mul", "multiply", "sub",
    "subtract", "atan2", "arctan2", "hypot", "bitwise_and", "bitwise_or", "bitwise_xor",
    "bitwise_not",
    "lerp", "addcmul", "addcdiv", "floor_divide", "true_divide", "xlogy", "copysign",
    "nextafter", "logaddexp", "logit", "angle", "bitwise_left_shift", "bitwise_right_shift",
    "conj_physical", "deg2rad", "digamma", "fix", "float_power", "gcd", "greater",
    "greater_equal", "heaviside", "i0", "igamma", "igammac", "isneginf", "isposinf", "lcm",
    "ldexp", "less", "less_equal", "lgamma", "logaddexp2", "nan_to_num", "not_equal",
    "polygamma", "rad2deg", "signbit", "sinc", "cumsum", "cumprod", "logcumsumexp", "diff",
    "msort", "sort", "topk"}
_out_arg.accept_out(
    globals(), _OUT_NAMES,
    exact=("neg", "negative", "bitwise_not", "cross", "norm", "round", "sign", "sgn", "floor",
           "ceil", "trunc", "frac", "matmul", "mm",
           "bmm", "mv", "dot", "where", "amax", "amin", "argmax", "argmin", "addmm", "baddbmm",
           "addmv", "addbmm", "conj_physical", "diag", "fix", "gather", "heaviside", "histc",
           "index_select", "inner", "inverse", "logcumsumexp", "masked_select", "msort",
           "nan_to_num", "nanquantile", "quantile", "renorm", "take_along_dim", "tensordot",
           "tril", "triu", "vdot", "float_power", "bucketize", "searchsorted", "any",
           "isneginf", "isposinf", "signbit", "all"),
    compute_in_out=("sum", "cumsum", "cumprod", "prod", "nansum", "arange", "zeros", "ones",
                    "empty", "full", "linspace", "logspace", "eye", "rand", "randn", "randint",
                    "randperm"),
    dtype_is_out=("mean", "nanmean"), exact_weight=("lerp",),
    float_kernel={"nansum": "nansum", "nanmean": "nansum"},
    silent_zero_dim=("mode",), keepdim_outs=("kthvalue",), real_kernel=("std", "var"),
    out_rules={"matmul": _linalg_ops.matmul_out_rules},
    column_major=dict.fromkeys(("inverse", "cholesky_inverse"), (0,)),
    copies_input=_lapack_outs.LAPACK_COPIES,
    no_overlap=("kthvalue", "gather", "index_select", "masked_select", "take_along_dim",
                "cross"),
    # (and the reductions whose kernels check their outs: max/min/aminmax/mode(dim), norm)
    partial_overlap=_ELEMENTWISE_OUT | {"outer", "max", "min", "aminmax", "mode", "norm"},
    partial_overlap_first=("addmm", "addmv", "addbmm", "baddbmm", "addr"),
    untracked=_UNTRACKED, out_tracked=_OUT_TRACKED, dim_required=("sum", "prod"),
    out_no_derivative=_OUT_NO_DERIVATIVE,
    exact_real=("abs", "absolute"), exact_float_int=("ldexp",),
    silent_resize=("zeros", "ones", "empty", "full", "linspace", "logspace", "eye", "rand",
                   "randn", "randint", "randperm", "addbmm"))
_out_arg.accept_out(  # (the torch.* functions above and these: every one torch gives out=)
    globals(), ("svd", "histogram", "geqrf", "cholesky", "chain_matmul", "lu_solve",
                "multinomial", "kron", "lu_unpack", "matrix_power", "mvlgamma", "narrow_copy",
                "nonzero", "ormqr", "polar", "range", "triangular_solve", "complex", "qr",
                "slogdet", "median", "nanmedian", "isin", "clamp_min", "clamp_max", "softmax",
                "log_softmax", "index_add", "index_copy", "scatter", "scatter_add", "take",
                "scatter_reduce", "index_reduce", "slice_scatter"),
    exact=("scatter_reduce", "index_reduce", "slice_scatter", "chain_matmul", "lu_solve",
           "multinomial", "nonzero", "polar",
           "complex", "isin", "narrow_copy", "ormqr", "clamp_min", "clamp_max", "softmax",
           "log_softmax", "index_add", "index_copy", "scatter", "scatter_add", "take"),
    compute_in_out=("range",), castable_outs=("geqrf",), nondiff_first=("lu_unpack",),
    column_major={"qr": (0, 1), "svd": (0,), "geqrf": (0,), "triangular_solve": (0, 1),
                  "lu_solve": (0,), "ormqr": (0,)},
    exact_scalar=("clamp_min", "clamp_max"),
    out_rules={"matrix_power": _linalg_func.power_out_rules},
    copies_input=_lapack_outs.LAPACK_COPIES,
    no_overlap=("take",),
    partial_overlap=("clamp_min", "clamp_max", "kron", "median", "nanmedian"),
    untracked=_UNTRACKED, out_tracked=_OUT_TRACKED, dim_required=("median", "nanmedian"),
    out_no_derivative=_OUT_NO_DERIVATIVE,
    silent_resize=("range", "multinomial", "narrow_copy"))
_out_arg.accept_out(
    vars(linalg), ("cholesky", "cond", "cross", "det", "eigvalsh", "inv", "matmul",
                   "matrix_norm", "matrix_power", "matrix_rank", "multi_dot", "norm", "pinv",
                   "solve", "solve_triangular", "svdvals", "tensorinv", "tensorsolve", "vecdot",
                   "vector_norm", "householder_product", "ldl_solve", "lu_solve", "eigvals",
                   "cholesky_ex", "eig", "eigh", "inv_ex", "ldl_factor", "ldl_factor_ex", "lu",
                   "lu_factor", "lu_factor_ex", "qr", "slogdet", "solve_ex", "svd", "lstsq"),
    # torch's linalg kernels take an `out` of the result's own dtype, except these, which
    # cast into a wider one (cond, pinv, matrix_rank, ...)
    exact=("cholesky", "cross", "det", "eigvalsh", "inv", "matmul", "matrix_norm", "multi_dot",
           "norm", "solve", "solve_triangular", "svdvals", "vecdot",
           "vector_norm", "ldl_solve", "lu_solve"),
    castable_outs=("eig", "lstsq"), nondiff_first=("lu",), no_overlap=("cross",),
    partial_overlap=("vector_norm",),
    out_rules={"matrix_power": _linalg_func.power_out_rules,
               "matmul": _linalg_ops.matmul_out_rules},
    # (torch's LAPACK-backed kernels resize an out to column-major matrices)
    column_major={**dict.fromkeys(("inv", "solve", "cholesky", "solve_triangular", "lu_solve",
                                   "householder_product", "ldl_solve", "lu_factor",
                                   "lu_factor_ex", "inv_ex", "cholesky_ex", "solve_ex",
                                   "ldl_factor", "ldl_factor_ex", "lstsq"), (0,)),
                  "eigh": (1,), "eig": (1,), "qr": (0, 1), "svd": (0, 2)},
    copies_input=_lapack_outs.LINALG_COPIES, copies_transposed=_lapack_outs.TRANSPOSED_TOO,
    out_tracked=("matrix_rank", "cond", "eigvals", "matrix_norm", "norm", "tensorinv",
                 "tensorsolve", "ldl_solve", "ldl_factor", "ldl_factor_ex"))
# the *_copy functions: out of the result's dtype; torch's check sees only `out`
_COPY_OUT = ("alias_copy", "as_strided_copy", "diagonal_copy", "expand_copy", "permute_copy",
             "slice_copy", "squeeze_copy", "t_copy", "transpose_copy", "unfold_copy",
             "unsqueeze_copy", "view_copy")
_out_arg.accept_out(globals(), (*_COPY_OUT, "split_with_sizes_copy", "unbind_copy"),
                    exact=_COPY_OUT, out_tracked=(*_COPY_OUT, "unbind_copy"),
                    untracked=("split_with_sizes_copy",),
                    list_outs=("split_with_sizes_copy", "unbind_copy"))
_out_arg.accept_out(vars(special), [n for n in special.__all__ if n not in (
    "softmax", "log_softmax")], exact=("round",), out_tracked=("ndtr",), untracked=[
        # (torch has no derivatives of these)
        n for n in special.__all__ if "bessel" in n or "polynomial" in n or n == "airy_ai"],
    # (its elementwise kernels refuse an out sharing part of an input, as torch's)
    partial_overlap=set(special.__all__) - {"logsumexp", "multigammaln", "ndtr"})
ops.torch_spellings.accept_numpy_spellings(globals(), Tensor)  # x.sum(axis=0, keepdims=True)


def is_tensor(obj) -> bool:
    """True if `obj` is a flowgrad Tensor (Parameters included), as torch.is_tensor."""
    return isinstance(obj, Tensor)


def get_device_module(device=None):  # noqa: F811 - torch.get_device_module's parameter
    """The module of a device type: flowgrad.cpu for "cpu" (and the default), flowgrad.cuda,
    flowgrad.mps or flowgrad.xpu for theirs.

    >>> import flowgrad as flow
    >>> flow.get_device_module("cpu") is flow.cpu
    True
    """
    name = "cpu" if device is None else str(getattr(device, "type", device)).split(":")[0]
    modules = {"cpu": cpu, "cuda": cuda, "mps": mps, "xpu": xpu}
    if name not in modules:
        raise RuntimeError(f"Device '{device}' does not have a corresponding module registered "
                           f"as 'flowgrad.{name}'")
    return modules[name]


def numel(input) -> int:
    """The number of elements of `input`, as torch.numel."""
    return input.numel()


class OutOfMemoryError(RuntimeError):
    """torch.OutOfMemoryError (an accelerator allocation failed): never raised by flowgrad,
    whose host allocations raise NumPy's MemoryError; defined so `except` clauses resolve."""


class AcceleratorError(RuntimeError):
    """torch.AcceleratorError: never raised by flowgrad (it has no accelerator)."""


def is_distributed(input) -> bool:
    """False, as torch.is_distributed of a tensor (torch's old THD flag)."""
    return input.is_distributed()


def _inplace_function(name):
    def function(input, *args, **kwargs):
        return getattr(input, name)(*args, **kwargs)
    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"torch.{name}(input, ...): `input.{name}(...)`, in place."
    return function


# torch's in-place functions of the torch namespace (torch.sigmoid_(x) is x.sigmoid_())
for _name in ("abs_", "acos_", "acosh_", "addmv_", "arccos_", "arccosh_", "arcsin_", "arcsinh_",
              "arctan_", "arctanh_", "as_strided_", "asin_", "asinh_", "atan_", "atanh_", "ceil_",
              "clamp_", "clamp_max_", "clamp_min_", "clip_", "conj_physical_", "cos_", "cosh_",
              "deg2rad_", "detach_", "erf_", "erfc_", "exp2_", "exp_", "expm1_", "fill_", "fix_",
              "floor_", "frac_", "gcd_", "i0_", "index_put_", "lcm_", "ldexp_", "log10_",
              "log1p_", "log2_", "log_", "logit_", "nan_to_num_", "neg_", "negative_",
              "rad2deg_", "reciprocal_", "round_", "rsqrt_", "sigmoid_", "sin_", "sinc_",
              "sinh_", "sqrt_", "square_", "tan_", "tanh_", "trunc_", "xlogy_"):
    globals()[_name] = _inplace_function(_name)
del _name


# a non-tensor where a tensor is needed raises torch's TypeError (flow.tanh(2.0)), in every
# public namespace of functions
for _space in (globals(), vars(nn.functional), vars(linalg), vars(special), vars(fft)):
    _errors.guard_tensor_arguments(_space)
for _space in (globals(), vars(nn.functional), vars(linalg), vars(special), vars(fft),
               vars(hub), vars(backends.cuda)):
    _errors.pickle_by_name(_space)  # (after the guards: the functions users hold)
del _space
_errors.guard_tensor_methods(Tensor)
_errors.pickle_by_name(vars(Tensor), "Tensor.")

# last: the library's objects (and everything imported before) leave the cycle collector's
# full collections, which a deep backward graph triggers: see utils/memory.py
utils.memory.freeze_imported_objects()
