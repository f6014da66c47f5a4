"""einsum (any equation: repeated indices, diagonals, `...` broadcasting) and tensordot.

The public function rewrites the equation into a canonical one (explicit output, `...`
spelled as letters, size-1 dims expanded), so the op sees letters of one size each. Its
kernel is `numpy.einsum` along a contraction path found once per equation and shapes
(pairs go to BLAS through tensordot). The gradient for operand i is again an einsum: of the
output gradient with the other operands, producing operand i's subscripts; a letter repeated
in operand i (a diagonal) is produced through an identity matrix, a letter summed away only
in operand i is broadcast back.

>>> import flowgrad as flow
>>> a = flow.ones(2, 3, requires_grad=True)
>>> flow.einsum("ij,j->i", a, flow.arange(3.0)).sum().backward(); a.grad
tensor([[0., 1., 2.],
        [0., 1., 2.]])
"""
from __future__ import annotations

import string

import numpy as np

from ..device import new_array
from ..errors import check_same_dtype
from ..tensor import Tensor, _wrap_dim
from .complex import conj
from .halfprec import in_float32
from .registry import op

__all__ = ["einsum", "tensordot"]

_LETTERS = string.ascii_letters
_PATHS: dict = {}


def _path(eq, arrays):
    key = (eq, tuple(a.shape for a in arrays))
    path = _PATHS.get(key)
    if path is None:
        if len(_PATHS) > 4096:  # bound the cache in long runs with varying shapes
            _PATHS.clear()
        path = _PATHS[key] = np.einsum_path(eq, *arrays, optimize="greedy")[0]
    return path


@op("einsum", jvp="multilinear", save="inputs for others", complex=True, layout="contiguous")
@in_float32
def _einsum(xp, *arrays, eq):
    if len(arrays) == 1:
        r = xp.einsum(eq, arrays[0])
        # einsum may hand back a view ('ij->ji', 'ii->i'); an op's output owns its storage
        return r.copy() if xp.may_share_memory(r, arrays[0]) else r
    return xp.einsum(eq, *arrays, optimize=_path(eq, arrays))


@_einsum.grad
def einsum_backward(ctx, dy):
    ins, out = ctx.eq.split("->")
    subs = ins.split(",")
    # an operand is saved only when another one needs its grad; conj: torch's complex convention
    operands = [None if t is None else conj(t) for t in ctx.inputs]
    grads = []
    for i, sub in enumerate(subs):
        if not ctx.needs_input_grad[i]:
            grads.append(None)
            continue
        grads.append(_operand_grad(dy, out, subs, operands, i, ctx.input_infos[i][0]))
    return tuple(grads)


def _operand_grad(dy, out, subs, operands, i, shape):
    """d(output)/d(operand i) (of that shape) applied to dy, as one einsum."""
    sub = subs[i]
    in_subs = [out] + [s for j, s in enumerate(subs) if j != i]
    args = [dy] + [t for j, t in enumerate(operands) if j != i]
    used = set("".join(subs) + out)
    fresh = iter(c for c in _LETTERS if c not in used)
    target, seen = [], set()
    for pos, c in enumerate(sub):
        if c in seen:  # a diagonal: a fresh letter tied to c through an identity matrix
            f = next(fresh)
            eye = np.eye(shape[pos], dtype=dy._data.dtype)
            in_subs.append(c + f)
            args.append(Tensor._wrap(new_array(dy._data, eye)))
            target.append(f)
        else:
            seen.add(c)
            target.append(c)
    present = set("".join(in_subs))
    kept = "".join(c for c in target if c in present)
    g = _einsum(*args, eq=",".join(in_subs) + "->" + kept)
    if len(kept) != len(target):  # letters summed away only in operand i: broadcast back
        g = g.reshape([shape[p] if c in present else 1 for p, c in enumerate(target)])
        g = g.expand(shape)
    return g


def _parse(equation, operands):
    """Canonical equation ('ij,jk->ik' form, letters only) and the broadcast operands."""
    eq = equation.replace(" ", "")
    ins, arrow, out = eq.partition("->")
    subs = ins.split(",")
    if len(subs) > len(operands):
        raise RuntimeError(f"einsum(): fewer operands were provided than specified in the "
                           f"equation {equation!r} ({len(operands)} given)")
    if len(subs) < len(operands):
        raise RuntimeError(f"einsum(): more operands were provided than specified in the "
                           f"equation {equation!r} ({len(operands)} given)")
    for s in subs + [out]:
        bad = set(s.replace("...", "")) - set(_LETTERS)
        if bad or s.count("...") > 1:
            raise RuntimeError(f"einsum(): invalid subscript {s!r} in equation {equation!r}: "
                               f"use letters a-z, A-Z and at most one '...' per operand")
    used = set(eq) & set(_LETTERS)
    spare = [c for c in _LETTERS if c not in used]
    n_ell = 0
    for k, (s, t) in enumerate(zip(subs, operands)):
        n_letters = len(s.replace("...", ""))
        nd = t._data.ndim
        if ("..." not in s and n_letters != nd) or n_letters > nd:
            raise RuntimeError(
                f"einsum(): the number of subscripts in the equation ({n_letters}) does not "
                f"match the number of dimensions ({nd}) for operand {k}"
                f"{' and no ellipsis was given' if '...' not in s else ''}")
        if "..." in s:
            n_ell = max(n_ell, nd - n_letters)
    ell = "".join(spare[:n_ell])
    canon = []
    for s, t in zip(subs, operands):
        if "..." in s:
            k = t._data.ndim - len(s.replace("...", ""))
            s = s.replace("...", ell[n_ell - k:])
        canon.append(s)
    if arrow:
        # an output without '...' sums the broadcast dims away, as torch does
        out = out.replace("...", ell)
    else:
        counts = {c: "".join(canon).count(c) for c in set("".join(canon))}
        out = ell + "".join(sorted((c for c, n in counts.items() if n == 1 and c not in ell),
                                   key=_LETTERS.index))
    if len(set(out)) != len(out):
        raise RuntimeError(f"einsum(): output subscript appears more than once in "
                           f"{equation!r}")
    missing = set(out) - set("".join(canon))
    if missing:
        raise RuntimeError(f"einsum(): output subscript {sorted(missing)[0]} does not appear "
                           f"in the equation for any input operand ({equation!r})")
    sizes: dict = {}
    for k, (s, t) in enumerate(zip(canon, operands)):
        for c, n in zip(s, t._data.shape):
            prev = sizes.get(c)
            if prev is not None and n != prev and 1 not in (n, prev):
                raise RuntimeError(
                    f"einsum(): subscript {c} has size {n} for operand {k} (shape "
                    f"{tuple(t.shape)}) which does not broadcast with previously seen size "
                    f"{prev} in {equation!r}")
            sizes[c] = n if prev in (None, 1) else prev
    expanded = []
    for s, t in zip(canon, operands):
        want = tuple(sizes[c] for c in s)
        if len(set(s)) != len(s) and want != t._data.shape:
            raise RuntimeError(f"einsum(): a repeated subscript in {s!r} needs dims of one "
                               f"size, got shape {tuple(t.shape)}")
        expanded.append(t.expand(want) if want != t._data.shape else t)
    return ",".join(canon) + "->" + out, expanded


def einsum(equation, *operands):
    """Einstein summation, as torch.einsum: einsum('bij,bjk->bik', a, b).

    Accepts repeated subscripts ('ii->i' diagonals, 'ii' traces), '...' broadcasting, an
    implicit output (letters seen once, alphabetically), and operands given as one list.

    >>> import flowgrad as flow
    >>> a = flow.arange(6.0).reshape(2, 3)
    >>> flow.einsum("ij->ji", a).shape
    flowgrad.Size([3, 2])
    >>> flow.einsum("ij,ij->i", a, a)
    tensor([ 5., 50.])
    """
    if isinstance(equation, Tensor):  # torch's sublist form: einsum(a, [0, 1], b, [1, 2], [0, 2])
        equation, operands = _from_sublists((equation,) + tuple(operands))
    elif len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not isinstance(equation, str):
        raise TypeError(f"einsum(): the equation must be a string, got "
                        f"{type(equation).__name__}")
    for k, t in enumerate(operands):
        if not isinstance(t, Tensor):
            raise TypeError(f"einsum(): operand {k} must be a Tensor, got {type(t).__name__}")
    if not operands:
        raise RuntimeError("einsum(): must provide at least one operand")
    for k, t in enumerate(operands[1:], 1):  # torch does not promote: it raises
        check_same_dtype("einsum", operands[0], **{f"operand {k}": t})
    eq, ops = _parse(equation, operands)
    if ops[0]._data.dtype == np.bool_:
        ins, out = eq.split("->")
        if set(ins) - set(out) - {","}:  # letters summed over, as torch's sum or bmm would
            if len(ops) > 1:
                raise NotImplementedError(
                    "einsum(): a contraction of bool operands is not implemented (as torch's "
                    "\"bmm\" for Bool); convert them with .int() or .float() first")
            ops = (ops[0].long(),)  # one operand: torch's sum, which counts in int64
    if len(ops) == 1 and set(eq.split("->")[0]) == set(eq.split("->")[1]):
        return _relabelled(ops[0], *eq.split("->"))
    return _einsum(*ops, eq=eq)


def _relabelled(t, sub, out):
    """`t` (subscripts `sub`) as `out` when no letter is summed: a view, as torch's einsum
    gives (diagonals of repeated letters, each moved last as torch's diagonal moves it, then a
    permute), so a write to it reaches `t`."""
    letters = list(sub)
    for c in sub:
        while letters.count(c) > 1:
            p = letters.index(c)
            q = letters.index(c, p + 1)
            t = t.diagonal(0, p, q)
            del letters[q], letters[p]
            letters.append(c)
    return t.permute([letters.index(c) for c in out])


def _from_sublists(args):
    """torch.einsum(op1, sublist1, op2, sublist2, ..., [out_sublist]) as (equation, operands):
    subscripts are ints in [0, 52) (letters a-z, A-Z) or Ellipsis."""
    def letters(sublist):
        out = []
        for s in sublist:
            if s is Ellipsis:
                out.append("...")
            elif isinstance(s, int) and 0 <= s < len(_LETTERS):
                out.append(_LETTERS[s])
            else:
                raise ValueError(f"einsum(): subscript in subscript list is not within the "
                                 f"valid range [0, {len(_LETTERS)}): got {s!r}")
        return "".join(out)
    operands = args[0::2][:len(args) // 2]
    subs = [letters(args[k]) for k in range(1, 2 * len(operands), 2)]
    equation = ",".join(subs)
    if len(args) % 2:  # an output sublist
        equation += "->" + letters(args[-1])
    return equation, operands


def tensordot(a, b, dims=2):
    """Contract `dims` trailing dims of a with leading dims of b (or the listed dims)."""
    check_same_dtype("tensordot", a, b=b)
    na, nb = a._data.ndim, b._data.ndim
    if isinstance(dims, Tensor):  # torch: one element is a count, more are the two dim lists
        dims = dims.tolist() if dims.numel() > 1 else int(dims.item())
    if isinstance(dims, int):
        if dims < 0 or dims > min(na, nb):
            raise RuntimeError(f"tensordot: dims must be in [0, {min(na, nb)}] for shapes "
                               f"{tuple(a.shape)} and {tuple(b.shape)}, got {dims}")
        da, db = list(range(na - dims, na)), list(range(dims))
    else:
        da, db = ([d] if isinstance(d, int) else list(d) for d in dims)
        if isinstance(da, Tensor) or isinstance(db, Tensor):
            da, db = list(np.asarray(da).tolist()), list(np.asarray(db).tolist())
    if len(da) != len(db):
        raise RuntimeError(f"tensordot: both dim lists must have the same length, got {da} "
                           f"and {db}")
    da = [_wrap_dim(d, na, "tensordot") for d in da]
    db = [_wrap_dim(d, nb, "tensordot") for d in db]
    sha, shb = list(a._data.shape), list(b._data.shape)
    for x, y in zip(da, db):  # a size-1 contracted dim broadcasts against the other, as torch
        if sha[x] == 1:
            sha[x] = shb[y]
        elif shb[y] == 1:
            shb[y] = sha[x]
        if sha[x] != shb[y]:
            raise RuntimeError(
                f"tensordot: contracted dimensions need to match, but first has size "
                f"{a._data.shape[x]} in dim {x} and second has size {b._data.shape[y]} in dim "
                f"{y} (shapes {tuple(a.shape)} and {tuple(b.shape)})")
    if sha != list(a._data.shape):
        a = a.expand(sha)
    if shb != list(b._data.shape):
        b = b.expand(shb)
    sa = list(_LETTERS[:na])
    sb = [None] * nb
    for x, y in zip(da, db):
        sb[y] = sa[x]
    rest = iter(_LETTERS[na:])
    sb = [c if c is not None else next(rest) for c in sb]
    out = [c for k, c in enumerate(sa) if k not in da] + [c for k, c in enumerate(sb)
                                                          if k not in db]
    return einsum(f"{''.join(sa)},{''.join(sb)}->{''.join(out)}", a, b)
