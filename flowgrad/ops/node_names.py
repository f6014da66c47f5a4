"""torch's names for the nodes the registry's ops record, their edges and `_saved_*`
attributes (read only when user code inspects a node: autograd/torch_nodes.py).

An op not named here takes torch's rule for its derivative's name (exp -> ExpBackward0).
Where flowgrad records another decomposition than torch (x.unsqueeze(0) is a reshape here,
torch's UnsqueezeBackward0), the name is that of flowgrad's op, as torch's would name it;
tests/test_grad_fn_introspection_vs_torch.py lists those cases.
"""
from __future__ import annotations

from .. import dtypes as _dt
from ..autograd import torch_nodes as _torch_nodes
from ..errors import freed_graph_error
from .creation import tensor as _tensor


def _whole(node):
    """A reduction over every dim without keepdim (sum() rather than sum(dim))."""
    attrs = node.__dict__
    if "whole" in attrs:
        return attrs["whole"]
    return not attrs.get("keepdim") and len(attrs.get("axes", ())) == len(node.input_infos[0][0])


def _overload(whole, other):
    return lambda node: whole if _whole(node) else other


def _matmul(node):
    a, b = (len(info[0]) for info in node.input_infos[:2])
    return {(1, 1): "DotBackward0", (2, 1): "MvBackward0", (2, 2): "MmBackward0"}.get(
        (a, b), "BmmBackward0")


def _linear(node):
    if len(node.input_infos[0][0]) != 2:
        return "ViewBackward0"
    return "AddmmBackward0" if len(node.input_infos) > 2 else "MmBackward0"


def _getitem(node):
    index = node.__dict__.get("index")
    parts = index if isinstance(index, tuple) else (index,)
    last = [p for p in parts if p is not Ellipsis and p != slice(None)]
    last = last[-1] if last else None
    if last is None and any(p is None for p in parts):
        return "UnsqueezeBackward0"
    return "SelectBackward0" if isinstance(last, int) else "SliceBackward0"


def _pool(kind):
    def name(node):
        return f"{kind}{len(node.input_infos[0][0]) - 2}D" + (
            "WithIndicesBackward0" if kind == "MaxPool" else "Backward0")
    return name


def _norm(node):
    axes = node.__dict__.get("axes", ())  # batch norm's: every dim but the channels (1)
    batch = len(node.input_infos[0][0]) >= 2 and 0 in axes and 1 not in axes
    return "NativeBatchNormBackward0" if batch else "NativeLayerNormBackward0"


# the ops whose 0-d result is zero_dim_value, by torch's node name (median(dim): Backward1)
_ZERO_DIM = {"median": "MedianBackward1", "nanmedian": "NanmedianBackward1"}


def _zero_dim(node):
    of = node.__dict__.get("of", "")
    return _ZERO_DIM.get(of) or _torch_nodes.torch_style(of)


def _elu(node):
    return "CeluBackward0" if node.__dict__.get("celu") else "EluBackward0"


def _shrink(node):
    return "SoftshrinkBackward0" if node.__dict__.get("soft") else "HardshrinkBackward0"


_torch_nodes.NAMES.update({
    "add": "AddBackward0", "sub": "SubBackward0", "mul": "MulBackward0",
    "div": "DivBackward0", "scalar_add": "AddBackward0", "scalar_mul": "MulBackward0",
    "scale": "MulBackward0",
    "scalar_div": "DivBackward0", "div_rounded": "DivBackward2",
    "pow": "PowBackward1", "scalar_pow": "PowBackward0", "scalar_rpow": "PowBackward2",
    "lerp": "LerpBackward1",
    "sum": _overload("SumBackward0", "SumBackward1"),
    "mean": _overload("MeanBackward0", "MeanBackward1"),
    "prod": _overload("ProdBackward0", "ProdBackward1"),
    "amax": _overload("MaxBackward1", "AmaxBackward0"),
    "amin": _overload("MinBackward1", "AminBackward0"),
    "max_dim": "MaxBackward0", "min_dim": "MinBackward0",
    "median": "MedianBackward0", "median_dim": "MedianBackward1",
    "nanmedian_all": "NanmedianBackward0",
    "vector_norm": "LinalgVectorNormBackward0",
    "matmul": _matmul, "linear": _linear,
    "reshape": "ViewBackward0", "permute": "PermuteBackward0", "getitem": _getitem,
    "index": "IndexBackward0", "take_flat": "GatherBackward0", "gather_flat": "GatherBackward0",
    "sort_values": "SortBackward0", "where": "WhereBackward0",
    "setitem": "CopySlices", "view_scatter": "CopySlices", "cast": "ToCopyBackward0",
    "cat": "CatBackward0", "dropout": "MulBackward0", "to_device": "ToCopyBackward0",
    "split": "SplitBackward0", "clamp": "ClampBackward1", "clamp_tensor": "ClampBackward0",
    "conv": "ConvolutionBackward0", "pad_constant": "ConstantPadNdBackward0",
    "threshold": "ThresholdBackward0",
    "max_pool": _pool("MaxPool"), "adaptive_max_pool": _pool("AdaptiveMaxPool"),
    "cross_entropy": "NllLossBackward0", "logsigmoid": "LogSigmoidBackward0",
    "shrink": _shrink, "elu": _elu, "norm_affine": _norm,
    **dict.fromkeys(("zero_dim_value", "zero_dim_of_input", "zero_dim_of_result"), _zero_dim),
    "sum_to": "SumBackward1",
    "unfold": "Im2ColBackward0", "unfold_dim": "UnfoldBackward0",
    "dist_norm": "CdistBackward0", "fmod": "FmodBackward1", "remainder": "RemainderBackward1",
    "scatter_reduce_flat": "ScatterReduceBackward0", "rrelu": "RreluWithNoiseBackward0",
    "linalg_inv": "LinalgInvExBackward0", "linalg_cholesky": "LinalgCholeskyExBackward0",
    "linalg_solve": "LinalgSolveExBackward0", "linalg_lu_factor": "LinalgLuFactorExBackward0",
    # the one-node derivatives of an activation's rule (torch's sigmoid_backward, ...)
    "sigmoid_grad": "SigmoidBackwardBackward0", "tanh_grad": "TanhBackwardBackward0",
    "relu_grad": "ThresholdBackwardBackward0", "gelu_grad": "GeluBackwardBackward0",
    "elu_grad": "EluBackwardBackward0",
    **{name: f"Special{_torch_nodes.torch_style(name)}" for name in (
        "i0e", "i1", "i1e", "erfcx", "entr", "ndtri", "log_ndtr", "xlog1py")},
})

# torch's node keeps an edge for a scalar operand ((None, 0)) and none for an index input
_torch_nodes.EDGES.update({
    "scalar_add": (0, None), "scalar_mul": (0, None), "scalar_div": (0, None), "scale": (0, None),
    "where": (1, 2), "index": (0,), "take_flat": (0,), "gather_flat": (0,), "sort_values": (0,),
    "cross_entropy": (0,),
    **dict.fromkeys(  # (torch's: grad_output, then x or y)
        ("sigmoid_grad", "tanh_grad", "relu_grad", "gelu_grad", "elu_grad"), (1, 0)),
    "nll_loss": (0,), "segment_reduce": (0,), "scatter_reduce_flat": (0, 1),
    "conv": lambda node: (0, 1, 2 if len(node.input_infos) > 2 else None),
    "norm_affine": lambda node: (0, 1 if node.has_w else None,
                                 1 + node.has_w if node.has_b else None),
})


def _freed(node):
    if node.released and node.saved_something:
        raise freed_graph_error(node, reading=True)


def _input(i):
    def get(node):
        _freed(node)
        saved = node._inputs
        s = saved[i] if saved is not None and i < len(saved) else None
        if s is None and i == 1 and "value" in node.__dict__:
            return _wrapped(node.value)
        return None if s is None else s.unpack(node)
    return get


def _wrapped(value):
    """A number operand as torch's wrapped-number tensor (a float: float64, as Python's)."""
    kind = type(value)
    dtype = _dt.float64 if kind is float else _dt.complex128 if kind is complex else None
    return _tensor(value, dtype=dtype)


def _result(node):
    _freed(node)
    return node._outputs[0].unpack(node) if node._outputs else None


def _attr(name, default=None, as_tuple=False):
    def get(node):
        value = node.__dict__.get(name, default)
        if as_tuple and value is not None and not isinstance(value, tuple):
            value = (value,)
        return value
    return get


def _sizes(i):
    return lambda node: tuple(node.input_infos[i][0])


def _one(node):
    return 1


_SELF, _OTHER, _RESULT = _input(0), _input(1), _result
_REDUCE = {"_saved_dim": _attr("axes"), "_saved_keepdim": _attr("keepdim", False)}
_SAVED = {
    "AddBackward0": {"_saved_alpha": _one}, "SubBackward0": {"_saved_alpha": _one},
    "MulBackward0": {"_saved_self": _SELF, "_saved_other": _OTHER},
    "DivBackward0": {"_saved_self": _SELF, "_saved_other": _OTHER},
    "PowBackward0": {"_saved_self": _SELF, "_saved_exponent": _attr("exponent")},
    "PowBackward1": {"_saved_self": _SELF, "_saved_exponent": _OTHER,
                     "_saved_result": _RESULT},
    "PowBackward2": {"_saved_self": _attr("base"), "_saved_exponent": _SELF,
                     "_saved_result": _RESULT},
    "SumBackward0": {"_saved_self_sym_sizes": _sizes(0)},
    "SumBackward1": {"_saved_self_sym_sizes": _sizes(0), **_REDUCE},
    "MeanBackward0": {"_saved_self_sym_sizes": _sizes(0),
                      "_saved_self_sym_numel": lambda n: _numel(n.input_infos[0][0])},
    "MeanBackward1": {"_saved_self_sym_sizes": _sizes(0), **_REDUCE,
                      "_saved_self_sym_numel": lambda n: _numel(n.input_infos[0][0])},
    "ProdBackward0": {"_saved_self": _SELF, "_saved_result": _RESULT},
    "ProdBackward1": {"_saved_self": _SELF, "_saved_result": _RESULT,
                      "_saved_dim": lambda n: n.axes[0], "_saved_keepdim": _attr("keepdim")},
    "MaxBackward1": {"_saved_self": _SELF, "_saved_result": _RESULT},
    "MinBackward1": {"_saved_self": _SELF, "_saved_result": _RESULT},
    "AmaxBackward0": {"_saved_self": _SELF, "_saved_result": _RESULT, **_REDUCE},
    "AminBackward0": {"_saved_self": _SELF, "_saved_result": _RESULT, **_REDUCE},
    "MaxBackward0": {"_saved_dim": _attr("dim"), "_saved_keepdim": _attr("keepdim", False),
                     "_saved_self_sym_sizes": _sizes(0)},
    "MinBackward0": {"_saved_dim": _attr("dim"), "_saved_keepdim": _attr("keepdim", False),
                     "_saved_self_sym_sizes": _sizes(0)},
    "LogsumexpBackward0": {"_saved_self": _SELF, "_saved_result": _RESULT, **_REDUCE},
    "MmBackward0": {"_saved_self": _SELF, "_saved_mat2": _OTHER,
                    "_saved_self_sym_sizes": _sizes(0), "_saved_mat2_sym_sizes": _sizes(1)},
    "BmmBackward0": {"_saved_self": _SELF, "_saved_mat2": _OTHER},
    "MvBackward0": {"_saved_self": _SELF, "_saved_vec": _OTHER},
    "DotBackward0": {"_saved_self": _SELF, "_saved_tensor": _OTHER},
    "SoftmaxBackward0": {"_saved_dim": _attr("dim"), "_saved_result": _RESULT},
    "LogSoftmaxBackward0": {"_saved_dim": _attr("dim"), "_saved_result": _RESULT},
    "ViewBackward0": {"_saved_self_sym_sizes": _sizes(0)},
    "ExpandBackward0": {"_saved_self_sym_sizes": _sizes(0)},
    "PermuteBackward0": {"_saved_dims": _attr("dims")},
    "CatBackward0": {"_saved_dim": _attr("dim")},
    "CumsumBackward0": {"_saved_dim": _attr("dim")},
    "ClampBackward1": {"_saved_self": _SELF, "_saved_min": _attr("min"),
                       "_saved_max": _attr("max")},
}


def _dims_or_none(node):
    """A reduction's dims as torch saves them: None for one over every dim."""
    return None if _whole(node) else node.axes


def _index_parts(node):
    """getitem's index: (dim, the component) of its one non-full component."""
    index = node.__dict__.get("index")
    parts = index if isinstance(index, tuple) else (index,)
    for dim, part in enumerate(parts):
        if part is not Ellipsis and part != slice(None):
            return dim, part
    return 0, slice(None)


def _slice_field(field):
    def get(node):
        dim, part = _index_parts(node)
        size = node.input_infos[0][0][dim]
        start, stop, step = part.indices(size)
        return {"dim": dim, "start": start, "step": step,
                "end": 9223372036854775807 if part.stop is None else stop}[field]
    return get


_TWO = {"_saved_self": _input(0), "_saved_other": _input(1)}
_SAVED.update({
    "SelectBackward0": {"_saved_dim": lambda n: _index_parts(n)[0],
                        "_saved_index": lambda n: _index_parts(n)[1],
                        "_saved_self_sym_sizes": _sizes(0)},
    "SliceBackward0": {"_saved_" + f: _slice_field(f) for f in ("dim", "start", "end", "step")}
    | {"_saved_self_sym_sizes": _sizes(0)},
    "StdBackward0": {"_saved_self": _SELF, "_saved_result": _RESULT,
                     "_saved_dim": _dims_or_none, "_saved_keepdim": _attr("keepdim")},
    "VarBackward0": {"_saved_self": _SELF, "_saved_dim": _dims_or_none,
                     "_saved_keepdim": _attr("keepdim")},
    "LinalgVectorNormBackward0": {"_saved_self": _SELF, "_saved_result": _RESULT,
                                  "_saved_dim": _dims_or_none,
                                  "_saved_keepdim": _attr("keepdim")},
    "WhereBackward0": {"_saved_condition": _input(0)},
    "MaximumBackward0": _TWO, "MinimumBackward0": _TWO, "Atan2Backward0": _TWO,
    "HypotBackward0": _TWO,
    "SplitBackward0": {"_saved_dim": _attr("dim"), "_saved_self_sym_sizes": _sizes(0),
                       "_saved_split_size": lambda n: n.bounds[1] - n.bounds[0]},
    "RepeatBackward0": {"_saved_repeats": _attr("reps"), "_saved_self_sym_sizes": _sizes(0)},
    "FlipBackward0": {"_saved_dims": _attr("dims")},
    "RollBackward0": {"_saved_dims": _attr("dims"), "_saved_shifts": _attr("shifts")},
    "GeluBackward0": {"_saved_self": _SELF, "_saved_approximate": _attr("approximate")},
    "LeakyReluBackward0": {"_saved_self": _SELF, "_saved_negative_slope": _attr("slope")},
    "HardtanhBackward0": {"_saved_self": _SELF, "_saved_min_val": _attr("lo"),
                          "_saved_max_val": _attr("hi")},
    "CeluBackward0": {"_saved_self": _SELF, "_saved_alpha": _attr("alpha")},
    "EluBackward0": {"_saved_self": _SELF, "_saved_alpha": _attr("alpha"),
                     "_saved_scale": _attr("scale"), "_saved_input_scale": _attr("input_scale")},
    "SoftplusBackward0": {"_saved_self": _SELF, "_saved_beta": _attr("beta"),
                          "_saved_threshold": _attr("threshold")},
    "DiagonalBackward0": {"_saved_offset": _attr("offset"), "_saved_dim1": _attr("dim1"),
                          "_saved_dim2": _attr("dim2"), "_saved_self_sym_sizes": _sizes(0)},
    "TrilBackward0": {"_saved_diagonal": _attr("diagonal")},
    "TriuBackward0": {"_saved_diagonal": _attr("diagonal")},
    "CumprodBackward0": {"_saved_dim": _attr("dim"), "_saved_self": _SELF,
                         "_saved_result": _RESULT},
})


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


_UNARY_SELF = ("Log", "Sin", "Cos", "Abs", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh",
               "Log2", "Log10", "Log1P", "Erf", "Erfinv", "Lgamma", "Digamma", "Asinh",
               "Acosh", "Atanh", "Reciprocal", "Gelu", "Silu", "Mish", "Softplus", "Neg")
_UNARY_RESULT = ("Exp", "Sqrt", "Relu", "Sigmoid", "Tanh", "Rsqrt", "Exp2", "Expm1")
for _name in _UNARY_SELF:
    _SAVED.setdefault(_name + "Backward0", {"_saved_self": _SELF})
for _name in _UNARY_RESULT:
    _SAVED.setdefault(_name + "Backward0", {"_saved_result": _RESULT})
_SAVED["NegBackward0"] = {}  # (torch's saves nothing)
_torch_nodes.SAVED.update(_SAVED)
