"""Batching rules: how an op runs on physical tensors whose dim 0 is the vmap batch.

A rule is `rule(level, op, phys, flags, attrs) -> (outputs, aux)`: `phys[i]` is the physical
tensor of a batched input (flags[i]) or the input itself; every output (and aux array)
comes back with the batch at dim 0. Rules run one level down (their ops are plain). Ops
with no rule here take `fallback`: the op once per example, stacked.
"""
from __future__ import annotations

import math
import string

from ..autograd.levels import apply_full
from ..tensor import Tensor


def _call(level, op, args, attrs):
    return apply_full(level.inner, op, args, attrs)


def _stack(parts, what):
    from ..ops.shape import stack

    shapes = {tuple(p.shape) for p in parts}
    if len(shapes) != 1:
        raise RuntimeError(f"vmap: {what} gives results of different shapes across the batch "
                           f"({sorted(shapes)}); such data-dependent shapes cannot be batched")
    return stack(list(parts))


def fallback(level, op, phys, flags, attrs):
    """The op once per example, results stacked: correct for any op, one call per example."""
    if level.size == 0:  # (no example: the op on zeros of an example's shape, for the shapes)
        example = [p.new_zeros(tuple(p.shape[1:])) if f else p for p, f in zip(phys, flags)]
        o, _ = _call(level, op, example, attrs)
        return tuple(r.unsqueeze(0)[:0] for r in o), ()
    outs, auxs = [], []
    for b in range(level.size):
        o, a = _call(level, op, [p[b] if f else p for p, f in zip(phys, flags)], attrs)
        outs.append(o)
        auxs.append(a)
    stacked = tuple(_stack([o[k] for o in outs], op.name) for k in range(len(outs[0])))
    aux = ()
    if auxs[0] and all(len(a) == len(auxs[0]) for a in auxs):
        try:
            aux = tuple(_stack([a[k] for a in auxs], op.name) for k in range(len(auxs[0])))
        except RuntimeError:
            aux = ()
    return stacked, aux


def same_randomness(level, op, phys, flags, attrs):
    """randomness='same': every example draws what the first drew (the generator's state is
    rewound before each), then the generator moves on as after one draw."""
    from .. import random as _random

    gen = attrs.get("generator") or _random.default_generator
    start = gen.get_state()
    outs, auxs = [], []
    for b in range(level.size):
        gen.set_state(start)
        o, a = _call(level, op, [p[b] if f else p for p, f in zip(phys, flags)], attrs)
        outs.append(o)
        auxs.append(a)
    stacked = tuple(_stack([o[k] for o in outs], op.name) for k in range(len(outs[0])))
    aux = tuple(_stack([a[k] for a in auxs], op.name) for k in range(len(auxs[0])))
    return stacked, aux


def _only_first(flags):
    return flags[0] and not any(flags[1:])


def _ndim(p, f):
    return p.dim() - 1 if f else p.dim()


def _pad(p, r):
    """A batched physical tensor with its logical rank raised to r (1s after the batch)."""
    k = p.dim() - 1
    return p if k >= r else p.reshape(p.shape[0], *([1] * (r - k)), *p.shape[1:])


def _expand_batch(level, p, f):
    return p if f else p.unsqueeze(0).expand(level.size, *p.shape)


def _fill(level, op, phys, flags, attrs):
    """fill(x, value) takes x's shape: a batched value makes every example of x, so the write
    of fill_/copy_ into an unbatched tensor reaches the interpreter's batched-write check."""
    x, value = phys
    if flags[1] and not flags[0]:
        x, flags = x.unsqueeze(0).expand(level.size, *x.shape), (True, True)
    return elementwise(level, op, [x, value], flags, attrs)


def elementwise(level, op, phys, flags, attrs):
    """Broadcasting ops: align each batched input's logical dims to the right."""
    r = max(_ndim(p, f) for p, f in zip(phys, flags))
    return _call(level, op, [_pad(p, r) if f else p for p, f in zip(phys, flags)], attrs)


def _shift(d, k):
    return d % max(k, 1) + 1


def _dims_rule(*names, all_if_none=True):
    """Ops whose attributes name dims of their first input: shift them past the batch."""
    def rule(level, op, phys, flags, attrs):
        k = phys[0].dim() - 1
        if not _only_first(flags) or k == 0:  # (0-d examples: dim 0 names no physical dim)
            return fallback(level, op, phys, flags, attrs)
        new = dict(attrs)
        for name in names:
            d = attrs.get(name)
            if d is None:
                if name in attrs and not all_if_none:
                    return fallback(level, op, phys, flags, attrs)
                if name in attrs:
                    new[name] = tuple(range(1, k + 1))
            elif isinstance(d, (tuple, list)):
                new[name] = tuple(_shift(a, k) for a in d)
            else:
                new[name] = _shift(d, k)
        return _call(level, op, phys, new)
    return rule


def _trailing(level, op, phys, flags, attrs):
    """Ops acting on the last dims of their one batched input (tril, pad, linalg)."""
    if not _only_first(flags):
        return fallback(level, op, phys, flags, attrs)
    return _call(level, op, phys, attrs)


def _pad_constant(level, op, phys, flags, attrs):
    if not _only_first(flags):
        return fallback(level, op, phys, flags, attrs)
    return _call(level, op, phys, dict(attrs, pads=((0, 0),) + tuple(attrs["pads"])))


def _reshape(level, op, phys, flags, attrs):
    return _call(level, op, phys, dict(attrs, shape=(phys[0].shape[0],) + tuple(attrs["shape"])))


def _first_input(level, op, phys, flags, attrs):
    """The kept ops (ops/kept.py): their result is a copy of their first input."""
    return _call(level, op, [_expand_batch(level, phys[0], flags[0])] + list(phys[1:]), attrs)


def _expand(level, op, phys, flags, attrs):
    shape = tuple(attrs["shape"])
    return _call(level, op, [_pad(phys[0], len(shape))], dict(attrs, shape=(level.size,) + shape))


def _sum_to(level, op, phys, flags, attrs):
    shape = tuple(attrs["shape"])
    x = phys[0]
    k = x.dim() - 1
    padded = (1,) * (k - len(shape)) + shape
    (out,), aux = _call(level, op, [x], dict(attrs, shape=(level.size,) + padded))
    return (out.reshape(level.size, *shape),), aux


def _permute(level, op, phys, flags, attrs):
    k = phys[0].dim() - 1
    return _call(level, op, phys, dict(attrs, dims=(0,) + tuple(_shift(d, k)
                                                                 for d in attrs["dims"])))


def _cat(level, op, phys, flags, attrs):
    k = max(_ndim(p, f) for p, f in zip(phys, flags))
    args = [_expand_batch(level, p, f) for p, f in zip(phys, flags)]
    return _call(level, op, args, dict(attrs, dim=_shift(attrs["dim"], k)))


def _getitem(level, op, phys, flags, attrs):
    index = attrs["index"]
    key = index if isinstance(index, tuple) else (index,)
    if not _only_first(flags) or not all(
            k is None or k is Ellipsis or isinstance(k, (int, slice)) for k in key):
        return fallback(level, op, phys, flags, attrs)
    return _call(level, op, phys, dict(attrs, index=(slice(None),) + key))


def _fold_batch(level, op, phys, flags, attrs, drop_aux=False):
    """Ops over (N, C, ...) images: the vmap batch joins N."""
    if not _only_first(flags) or phys[0].dim() < 3:
        return fallback(level, op, phys, flags, attrs)
    x = phys[0]
    b, n = x.shape[0], x.shape[1]
    outs, aux = _call(level, op, [x.reshape(b * n, *x.shape[2:])] + list(phys[1:]), attrs)
    outs = tuple(o.reshape(b, n, *o.shape[1:]) for o in outs)
    if drop_aux or any(a.dim() == 0 or a.shape[0] != b * n for a in aux):
        return outs, ()
    return outs, tuple(a.reshape(b, n, *a.shape[1:]) for a in aux)


def _conv(level, op, phys, flags, attrs):
    return _fold_batch(level, op, phys, flags, attrs, drop_aux=True)  # its rule redoes im2col


def _matmul(level, op, phys, flags, attrs):
    a, b = phys
    fa, fb = flags
    ka, kb = _ndim(a, fa), _ndim(b, fb)
    if fa and fb and ka == 1 and kb == 1:
        return ((a * b).sum(-1),), ()
    if fa and ka == 1 and not fb and kb == 2:  # (B, k) @ (k, m): one GEMM
        return _call(level, op, [a, b], attrs)
    a2 = a.unsqueeze(-2 if not fa else 1) if ka == 1 else a
    b2 = b.unsqueeze(-1) if kb == 1 else b
    r = max(ka if ka > 1 else 2, kb if kb > 1 else 2)
    a2 = _pad(a2, r) if fa else a2
    b2 = _pad(b2, r) if fb else b2
    (out,), _ = _call(level, op, [a2, b2], attrs)
    if ka == 1:
        out = out.squeeze(-2)
    if kb == 1:
        out = out.squeeze(-1)
    return (out,), ()


def _linear(level, op, phys, flags, attrs):
    if _only_first(flags):
        return _call(level, op, phys, attrs)
    return fallback(level, op, phys, flags, attrs)


def _linear_wgrad(level, op, phys, flags, attrs):
    dy, x = phys
    if not all(flags) or dy.dim() != x.dim():
        return fallback(level, op, phys, flags, attrs)
    b = dy.shape[0]
    rows = math.prod(x.shape[1:-1])
    out = dy.reshape(b, rows, dy.shape[-1]).transpose(1, 2) @ x.reshape(b, rows, x.shape[-1])
    return (out,), ()


def _einsum(level, op, phys, flags, attrs):
    eq = attrs["eq"].replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    used = set(eq)
    letter = next(c for c in string.ascii_letters if c not in used)
    if not arrow:
        letters = [c for c in lhs if c.isalpha()]
        rhs = ("..." if "..." in lhs else "") + "".join(
            sorted(c for c in set(letters) if letters.count(c) == 1))
    terms = [letter + t if f else t for t, f in zip(terms, flags)]
    return _call(level, op, phys, dict(attrs, eq=",".join(terms) + "->" + letter + rhs))


def _embedding(level, op, phys, flags, attrs):
    if flags[0]:
        return fallback(level, op, phys, flags, attrs)
    return _call(level, op, phys, attrs)


def _per_example_count(target, ignore_index):
    """(B,) count of targets that are not ignored: what 'mean' divides by, per example."""
    from ..dtypes import get_default_dtype

    kept = (target != ignore_index).to(get_default_dtype())
    return kept.reshape(kept.shape[0], -1).sum(1)


def _class_loss(level, op, phys, flags, attrs):
    """cross_entropy / nll_loss with class-index targets: the vmap batch joins the loss's own
    batch at reduction 'none'; 'sum' and 'mean' then reduce each example's row."""
    x, target = phys[:2]
    reduction = attrs["reduction"]
    if any(flags[2:]) or len(phys) > 2 or target.dtype.is_floating_point:
        return fallback(level, op, phys, flags, attrs)
    x = _expand_batch(level, x, flags[0])
    target = _expand_batch(level, target, flags[1])
    none = dict(attrs, reduction="none")
    if x.dim() == 2:  # one example is (C,) with a () target
        (out,), aux = _call(level, op, [x, target], none)
    else:
        c = x.shape[2]
        xf = x.movedim(2, -1).reshape(-1, c)
        (out,), aux = _call(level, op, [xf, target.reshape(-1)], none)
        out = out.reshape(target.shape)
        aux = tuple(a.reshape(x.movedim(2, -1).shape).movedim(-1, 2) for a in aux
                    if a.dim() == 2 and a.shape[0] == xf.shape[0])
    if reduction != "none":
        out = out.reshape(out.shape[0], -1).sum(1)
        if reduction == "mean":
            out = out / _per_example_count(target, attrs["ignore_index"]).to(out.dtype)
    return (out,), aux


def _cross_entropy_grad(level, op, phys, flags, attrs):
    logp, dy, target = phys[:3]
    reduction = attrs["reduction"]
    if len(phys) > 3 or logp.dim() - flags[0] not in (1, 2):
        return fallback(level, op, phys, flags, attrs)
    logp, dy, target = (_expand_batch(level, p, f) for p, f in zip(phys[:3], flags[:3]))
    b, c = logp.shape[0], logp.shape[-1]
    n = target[0].numel()
    if reduction != "none":  # d(sum)/d(row) is dy; d(mean) divides by the kept count
        if reduction == "mean":
            dy = dy / _per_example_count(target, attrs["ignore_index"]).to(dy.dtype)
        dy = dy.reshape(b, 1).expand(b, n)
    (out,), aux = _call(level, op, [logp.reshape(b * n, c), dy.reshape(b * n),
                                    target.reshape(b * n)],
                        dict(attrs, reduction="none"))
    return (out.reshape(logp.shape),), ()


REDUCE_AXES = ("sum", "mean", "amax", "amin", "prod", "logsumexp", "var", "std", "vector_norm",
               "all", "any", "count_nonzero")
DIM_OPS = ("softmax", "log_softmax", "cumsum", "cumprod", "cummax", "cummin", "max_dim",
           "min_dim", "median_dim", "mode", "split", "dist_norm", "argsort")
ELEMENTWISE = ("add", "sub", "mul", "div", "pow", "where", "clone", "cast", "eq", "ne", "lt",
               "le", "gt", "ge", "isnan", "isinf", "isfinite", "logical_and", "logical_or",
               "logical_xor", "logical_not", "bitwise_and", "bitwise_or", "bitwise_xor",
               "bitwise_not", "scalar_add", "scalar_mul", "scale", "scalar_div",
               "scalar_pow", "scalar_rpow", "scaled_product")
TRAILING = ("tril", "triu", "linalg_cholesky", "linalg_det", "linalg_inv",
            "linalg_slogdet", "linalg_eigh", "linalg_qr", "linalg_svd")
IMAGES = ("max_pool", "adaptive_max_pool", "window_sum", "unfold", "fold")


def _build():
    from ..ops.registry import REGISTRY

    diagonal = tuple(n for n, o in REGISTRY.items() if o.jvp == "diagonal" and n != "dropout")
    rules = {}
    rules.update(dict.fromkeys(ELEMENTWISE + diagonal, elementwise))
    rules.update(dict.fromkeys(REDUCE_AXES, _dims_rule("axes")))
    rules.update(dict.fromkeys(DIM_OPS, _dims_rule("dim", all_if_none=False)))
    rules.update(dict.fromkeys(TRAILING, _trailing))
    rules.update(dict.fromkeys(IMAGES, _fold_batch))
    rules.update({
        "flip": _dims_rule("dims"), "roll": _dims_rule("dims", all_if_none=False),
        "diagonal": _dims_rule("dim1", "dim2"), "norm_affine": _dims_rule("axes"),
        "pad_constant": _pad_constant, "reshape": _reshape, "unsafe_view": _reshape,
        "expand": _expand,
        "sum_to": _sum_to, "permute": _permute, "fill": _fill,
        "cat": _cat, "getitem": _getitem, "conv": _conv, "conv_transpose": _conv,
        "matmul": _matmul, "linear": _linear, "linear_wgrad": _linear_wgrad,
        "einsum": _einsum, "embedding": _embedding, "cross_entropy": _class_loss,
        "nll_loss": _class_loss, "cross_entropy_grad": _cross_entropy_grad,
        **dict.fromkeys(("kept1", "kept2", "kept1_result", "kept2_result"), _first_input),
    })
    return rules


BATCH_RULES = _build()
del Tensor
