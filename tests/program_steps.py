"""The step builders of the program fuzzer (`program_fuzz.py`): each takes the generator `g`
(a `program_fuzz._Gen`, which runs every candidate step in torch) and commits one step of
its family (views, ops, in-place writes, `.data` writes, hooks and gradients, leaves, storage
sharing), or returns False when it finds nothing to do."""
from __future__ import annotations

import numpy as np
import torch


def _r(x):
    return repr(float(x))

def _multi(g, kind, a, call):
    """`p, q = a.unbind(0)`-style steps: bind each output to a pool name."""
    r = g.peek(call)
    k = len(r) if isinstance(r, (tuple, list)) else 0
    if isinstance(r, torch.Tensor):      # `p, q = a` unpacks by iterating over a
        k = r.shape[0] if r.dim() else 0
    if not 1 <= k <= 4:
        return False
    outs = [g.fresh() for _ in range(k)]
    lhs = ", ".join(outs) + ("," if k == 1 else "")
    return g.commit(kind, f"{lhs} = {call}", outs)


def b_view(g):
    a = g.pick(g.tensors())
    if a is None:
        return False
    v, rng, t = g.ns[a], g.rng, g.fresh()
    nd, sh = v.dim(), g.shape(a)
    d = rng.randrange(nd) if nd else 0
    choices = ["index", "index", "index0d", "unsqueeze", "squeeze", "detach", "data",
               "expand", "view", "reshape"]
    if nd:
        choices += ["select", "unbind", "split", "chunk", "narrow", "iter", "expand_as"]
    if nd >= 2:
        choices += ["transpose", "t", "permute", "diagonal"]
    if nd == 1:
        choices += ["t"]
    op = rng.choice(choices)
    kind = "view:" + op
    if op == "index":
        idx = g.index(sh)
        r = g.peek(f"{a}{idx}")
        return g.commit(kind + ("0d" if r is not None and r.dim() == 0 else ""),
                        f"{t} = {a}{idx}", (t,))
    if op == "index0d":
        idx = "[" + ", ".join(str(rng.randrange(-n, n)) if n else "0" for n in sh) + "]"
        return g.commit(kind, f"{t} = {a}{idx if sh else '[()]'}", (t,))
    if op in ("unbind", "split", "chunk", "iter"):
        call = {"unbind": f"{a}.unbind({d})", "iter": f"{a}",
                "split": f"{a}.split({rng.randint(1, 2)}, {d})",
                "chunk": f"{a}.chunk({rng.randint(2, 3)}, {d})"}[op]
        if op == "iter" and rng.random() < 0.3:
            return g.commit("op:iter-stack", f"{t} = m.stack([e * 2.0 for e in {a}])", (t,))
        return _multi(g, kind, a, call)
    if op == "expand":
        new = [3 if s == 1 else s for s in sh]
        if rng.random() < 0.6:
            new = [2] + new
        code = f"{a}.expand({', '.join(map(str, new))})" if new else f"{a}.expand(2)"
    elif op == "expand_as":
        c = [n for n in g.tensors() if len(g.shape(n)) >= nd and g.partner(g.shape(n))
             and _bcast(sh, g.shape(n)) == g.shape(n)]
        if not c:
            return False
        code = f"{a}.expand_as({rng.choice(c)})"
    elif op == "view" or op == "reshape":
        n = int(np.prod(sh)) if sh else 1
        opts = ["-1"] + [f"{k}, -1" for k in (2, 3, 4) if n % k == 0 and n] + ["1, -1"]
        code = f"{a}.{op}({rng.choice(opts)})"
    elif op == "select":
        code = f"{a}.select({d}, {rng.randrange(-sh[d], sh[d]) if sh[d] else 0})"
    elif op == "narrow":
        s = rng.randrange(sh[d]) if sh[d] else 0
        code = f"{a}.narrow({d}, {s}, {rng.randint(0, sh[d] - s) if sh[d] else 0})"
    elif op == "transpose":
        code = f"{a}.transpose({d}, {rng.randrange(-nd, nd)})"
    elif op == "permute":
        p = list(range(nd))
        rng.shuffle(p)
        code = f"{a}.permute({', '.join(map(str, p))})"
    elif op == "diagonal":
        code = rng.choice([f"{a}.diagonal()", f"{a}.diagonal(1)", f"{a}.diagonal(0, -2, -1)"])
    elif op == "unsqueeze":
        code = f"{a}.unsqueeze({rng.randint(-nd - 1, nd)})"
    elif op == "squeeze":
        code = f"{a}.squeeze({rng.randrange(nd)})" if nd and rng.random() < 0.5 \
            else f"{a}.squeeze()"
    elif op == "t":
        code = f"{a}.t()"
    elif op == "detach":
        code = f"{a}.detach()"
    else:
        code = f"{a}.data"
    return _maybe_no_grad(g, kind, f"{t} = {code}", (t,), p=0.05)


def _bcast(a, b):
    try:
        return np.broadcast_shapes(a, b)
    except ValueError:
        return None


def _maybe_no_grad(g, kind, code, outs=(), p=0.15):
    if g.rng.random() < p:
        return g.commit("no_grad:" + kind, f"with m.no_grad(): {code}", outs)
    return g.commit(kind, code, outs)


def b_op(g):
    a = g.pick(g.tensors(), view_bias=2.0)
    if a is None:
        return False
    rng, t, sh = g.rng, g.fresh(), g.shape(a)
    op = rng.choice(["exp", "tanh", "sigmoid", "relu", "clone", "neg", "sin", "scale", "sum",
                     "sumdim", "mul", "mul", "add", "sub", "div", "matmul", "where", "advindex"])
    if op in ("exp", "tanh", "sigmoid", "relu", "clone", "neg", "sin"):
        code = f"{a}.{op}()"
    elif op == "scale":
        code = f"{a} * {_r(rng.choice([1.5, -0.5, 3.0]))}"
    elif op == "sum":
        code = f"{a}.sum()"
    elif op == "sumdim":
        if not sh:
            return False
        code = f"{a}.sum({rng.randrange(len(sh))}{', keepdim=True' * (rng.random() < 0.3)})"
    elif op in ("mul", "add", "sub", "div"):
        c = [n for n in g.tensors() if _bcast(sh, g.shape(n)) is not None]
        b = rng.choice(c)
        sym = {"mul": "*", "add": "+", "sub": "-"}.get(op)
        code = f"{a} / ({b} * {b} + 1.0)" if op == "div" else f"{a} {sym} {b}"
    elif op == "matmul":
        c = [n for n in g.tensors(min_dim=1) if sh and g.shape(n)[0 if len(g.shape(n)) == 1
                                                                  else -2] == sh[-1]]
        if not c:
            return False
        code = f"{a} @ {rng.choice(c)}"
    elif op == "where":
        b = g.partner(sh, exact=False) or a
        code = f"m.where({b} > 0, {a}, {g.partner(sh, exact=False) or a})"
    else:
        if not sh:
            return False
        code = f"{a}{g.index(sh, basic=False)}"
    return _maybe_no_grad(g, "op:" + op, f"{t} = {code}", (t,), p=0.05)


def b_inplace(g):
    a = g.pick(g.tensors())
    if a is None:
        return False
    rng, sh = g.rng, g.shape(a)
    op = rng.choice(["add_", "mul_", "sub_", "div_", "copy_", "iadd", "setitem", "setitem",
                     "index_add_", "relu_", "sigmoid_", "tanh_", "exp_", "zero_", "fill_",
                     "clamp_", "detach_", "requires_grad_", "masked_fill_", "for", "add_",
                     "mul_", "iadd"])
    kind = f"inplace:{op}@{g.where(a)}"
    if op in ("add_", "mul_", "sub_", "div_"):
        b = g.operand(sh)
        if op == "div_" and not b[0].isdigit() and not b.startswith("-"):
            b = f"{b} * {b} + 1.0"
        code = f"{a}.{op}({b})"
    elif op == "copy_":
        b = g.partner(sh)
        if b is None:
            return False
        code = f"{a}.copy_({b})"
    elif op in ("iadd", "setitem"):
        idx = g.index(sh, basic=rng.random() < 0.85)
        r = g.peek(f"{a}{idx}")
        if r is None:
            return False
        tsh = tuple(r.shape)
        code = f"{a}{idx} {'+=' if op == 'iadd' else '='} {g.operand(tsh, scalar=0.4)}"
    elif op == "index_add_":
        if not sh or sh[0] < 2:
            return False
        need = (2,) + sh[1:]
        b = g.partner(need)
        # a fresh source: one aliasing the destination makes torch's result depend on the
        # order of its writes (flowgrad refuses it), and torch saves the source only for its
        # shape, so a later write to it fails torch's backward (flowgrad saves nothing)
        src = f"({b} * 1.0).expand({', '.join(map(str, need))})" if b else \
            f"m.ones({', '.join(map(str, need))}, dtype=m.float64)"
        i, j = rng.randrange(sh[0]), rng.randrange(sh[0])
        code = f"{a}.index_add_(0, m.tensor([{i}, {j}]), {src})"
    elif op in ("relu_", "sigmoid_", "tanh_", "exp_", "zero_", "detach_"):
        code = f"{a}.{op}()"
    elif op == "fill_":
        code = f"{a}.fill_(0.3)"
    elif op == "clamp_":
        code = f"{a}.clamp_(-0.777, 0.833)"
    elif op == "requires_grad_":
        code = f"{a}.requires_grad_({'False' if rng.random() < 0.3 else ''})"
    elif op == "masked_fill_":
        b = g.partner(sh) or a
        code = f"{a}.masked_fill_({b} > 0, {_r(rng.choice([0.0, 1.5]))})"
    else:
        if not sh:
            return False
        body = rng.choice(["e.mul_(2.0)", "e.add_(1.0)", "e.zero_()"])
        return g.commit(kind, f"for e in {a}: {body}")
    return _maybe_no_grad(g, kind, code)


def b_data(g):
    a = g.pick(g.tensors())
    if a is None:
        return False
    op = g.rng.choice(["mul_", "setitem", "zero_", "add_"])
    kind = f"data:{op}@{g.where(a)}"
    if op == "setitem":
        return g.commit(kind, f"{a}.data{g.index(g.shape(a))} = 0.5")
    arg = {"mul_": "1.5", "zero_": "", "add_": "0.25"}[op]
    return g.commit(kind, f"{a}.data.{op}({arg})")


_HOOK_NOTE = """Hooks go on non-views only: torch 2.13 crashes (SIGSEGV) on
    x = torch.ones(3, requires_grad=True); v = x[:1]
    with torch.no_grad(): x.add_(1.5)
    v.register_hook(lambda g: g)"""


def b_grad(g):
    rng = g.rng
    rg = g.tensors(grad=True)
    a = g.pick(rg, view_bias=2.0)
    if a is None:
        return False
    op = rng.choice(["hook", "hook", "retain_grad", "backward2", "backward2", "backward",
                     "agrad", "agrad", "agrad2"])
    if op == "hook":
        if g.ns[a]._is_view():
            a = g.pick([n for n in rg if not g.ns[n]._is_view()])
            if a is None:   # torch 2.13 segfaults on a hook on some views: see _HOOK_NOTE
                return False
        s = _r(rng.choice([2.0, 0.5, -1.0]))
        return g.commit(f"hook@{g.where(a)}", f"{a}.register_hook(lambda g: g * {s})")
    if op == "retain_grad":
        return g.commit(f"retain_grad@{g.where(a)}", f"{a}.retain_grad()")
    if op == "backward2":
        return g.commit("backward_twice", f"_l = ({a}.sin() * 0.5).sum(); "
                        "_l.backward(retain_graph=True); _l.backward(retain_graph=True)")
    if op == "backward":
        return g.commit("backward", f"({a}.sin() * 0.5).sum().backward()")
    t = g.fresh("g")
    if op == "agrad2":
        prev = [n for n in rg if n.startswith("g")]
        if not prev:
            return False
        a = rng.choice(prev)
    for _ in range(3):
        x = rng.choice(rg)
        code = (f"{t}, = m.autograd.grad(({a}.tanh() * {a}).sum(), [{x}], create_graph=True)"
                if op == "agrad" else f"{t}, = m.autograd.grad(({a} * {a}).sum(), [{x}], "
                "create_graph=True)")
        if g.commit("autograd.grad" + "2" * (op == "agrad2"), code, (t,)):
            return True
    return False


def b_leaf(g):
    g.leaf()
    return True


def b_storage(g):
    """Storage shared or copied outside views: copy.deepcopy of one pool tensor or of two
    together (views of one storage stay views of one copy), copy.copy (the same storage),
    and set_ to another pool tensor under no_grad (the two then share their elements)."""
    names = g.tensors()
    a = g.pick(names)
    if a is None:
        return False
    op = g.rng.choice(["deepcopy", "deepcopy2", "copy", "set_", "set_"])
    if op == "set_":
        # on a tensor that does not require grad, is no view and has none in the pool:
        # flowgrad refuses set_ on a tensor with history or on a view of one that requires
        # grad (torch replays a view's history at its new place), and a leaf that requires
        # grad keeps its place in the graphs built before (torch's leaves a graph built
        # before: autograd.grad calls the leaf unused there)
        # (nor an inference tensor: torch's set_ swaps its storage, then refuses the write
        # outside inference_mode; flowgrad refuses first. None before AUTOGRAD_SEEDS)
        a = g.pick([n for n in names if g.peek(f"not {n}.requires_grad and not {n}._is_view()"
                                               f" and not {n}.is_inference()")
                    and not g.where(n).startswith("base")])
        b = g.pick([n for n in names if n != a])
        return None not in (a, b) and g.commit(f"storage:set_@{g.where(a)}",
                                               f"with m.no_grad(): {a}.set_({b})")
    t = g.fresh()
    if op == "deepcopy2":
        u = g.fresh()
        return g.commit("storage:deepcopy2", f"import copy; {t}, {u} = copy.deepcopy([{a}, "
                        f"{g.pick(names)}])", (t, u))
    return g.commit(f"storage:{op}@{g.where(a)}", f"import copy; {t} = copy.{op}({a})", (t,))


# ---- more ops (the seeds from program_fuzz.MORE_SEEDS on): ops that save their output or
# return a view or a copy by case, multi-output ops, and in-place ops that change a tensor's
# shape or write through an index
def _dim(g, sh):
    return g.rng.randrange(-len(sh), len(sh)) if sh else 0


def b_op_more(g):
    a = g.pick(g.tensors(), view_bias=2.0)
    if a is None:
        return False
    rng, t, sh = g.rng, g.fresh(), g.shape(a)
    d = _dim(g, sh)
    nd = len(sh)
    op = rng.choice(["softmax", "log_softmax", "cumsum", "cumprod", "max_dim", "min_dim",
                     "sort", "topk", "cat", "stack", "norm", "mean", "var", "prod", "pow2",
                     "sqrt", "flip", "roll", "repeat", "tril", "gather", "masked_select",
                     "clamp", "lerp", "addcmul", "abs", "contiguous", "flatten", "movedim",
                     "logsumexp", "amax", "square", "atan2", "maximum"])
    b = g.partner(sh) or a
    code = {
        "softmax": f"m.softmax({a}, {d})", "log_softmax": f"m.log_softmax({a}, {d})",
        "cumsum": f"{a}.cumsum({d})", "cumprod": f"{a}.cumprod({d})",
        "max_dim": f"{a}.max({d})[0]", "min_dim": f"{a}.min({d}).values",
        "sort": f"{a}.sort({d}, descending={rng.random() < 0.5})[0]",
        "topk": f"{a}.topk(1, {d})[0]", "cat": f"m.cat([{a}, {b}], {d})",
        "stack": f"m.stack([{a}, {b}], {rng.randint(-nd - 1, nd)})", "norm": f"{a}.norm()",
        "mean": f"{a}.mean({d})", "var": f"{a}.var()", "prod": f"{a}.prod({d})",
        "pow2": f"{a}.pow(2)", "sqrt": f"({a}.abs() + 0.1).sqrt()", "flip": f"{a}.flip({d})",
        "roll": f"{a}.roll(1, {d})", "repeat": f"{a}.repeat({', '.join(['2'] + ['1'] * nd)})",
        "tril": f"{a}.tril()", "gather": f"{a}.gather({d}, m.zeros_like({a}, "
                                          f"dtype=m.int64))",
        "masked_select": f"{a}.masked_select({a} > 0)", "clamp": f"{a}.clamp(-0.5, 0.5)",
        "lerp": f"m.lerp({a}, {b}, 0.3)", "addcmul": f"m.addcmul({a}, {b}, {b}, value=0.5)",
        "abs": f"{a}.abs()", "contiguous": f"{a}.contiguous()", "flatten": f"{a}.flatten()",
        "movedim": f"{a}.movedim(0, -1)", "logsumexp": f"{a}.logsumexp({d})",
        "amax": f"{a}.amax({d})", "square": f"{a}.square()", "atan2": f"m.atan2({a}, {b})",
        "maximum": f"m.maximum({a}, {b})",
    }[op]
    return _maybe_no_grad(g, "op2:" + op, f"{t} = {code}", (t,), p=0.05)


def b_inplace_more(g):
    a = g.pick(g.tensors())
    if a is None:
        return False
    rng, sh = g.rng, g.shape(a)
    d = _dim(g, sh)
    op = rng.choice(["t_", "transpose_", "unsqueeze_", "squeeze_", "abs_", "neg_", "pow_",
                     "clamp_min_", "addcmul_", "lerp_", "index_fill_", "index_copy_",
                     "scatter_", "scatter_add_", "masked_scatter_", "sin_", "square_",
                     "tril_", "cumsum_", "copy_bcast", "fill_diagonal_", "sqrt_"])
    kind = f"inplace2:{op}@{g.where(a)}"
    b = g.partner(sh) or "1.25"
    n = sh[d] if sh else 0
    if op in ("index_fill_", "index_copy_", "scatter_", "scatter_add_") and not n:
        return False
    i = rng.randrange(n) if n else 0
    code = {
        "t_": f"{a}.t_()", "transpose_": f"{a}.transpose_(0, -1)",
        "unsqueeze_": f"{a}.unsqueeze_({rng.randint(-len(sh) - 1, len(sh))})",
        "squeeze_": f"{a}.squeeze_()", "abs_": f"{a}.abs_()", "neg_": f"{a}.neg_()",
        "pow_": f"{a}.pow_(2)", "clamp_min_": f"{a}.clamp_min_(-0.25)",
        "addcmul_": f"{a}.addcmul_({b}, {b}, value=0.5)" if b != "1.25" else f"{a}.mul_(2.0)",
        "lerp_": f"{a}.lerp_({b}, 0.25)" if b != "1.25" else f"{a}.add_(0.5)",
        "index_fill_": f"{a}.index_fill_({d}, m.tensor([{i}]), -0.75)",
        "index_copy_": f"{a}.index_copy_({d}, m.tensor([{i}]), "
                       f"{a}.narrow({d}, 0, 1).clone() * 2.0)",
        "scatter_": f"{a}.scatter_({d}, m.zeros_like({a}, dtype=m.int64).narrow({d}, 0, 1), "
                    f"{a}.narrow({d}, 0, 1) * 3.0)",
        "scatter_add_": f"{a}.scatter_add_({d}, m.zeros_like({a}, dtype=m.int64), "
                        f"{b if b != '1.25' else a} * 0.5)",
        "masked_scatter_": f"{a}.masked_scatter_({a} > 0, {b if b != '1.25' else a} * 2.0)",
        "sin_": f"{a}.sin_()", "square_": f"{a}.square_()", "tril_": f"{a}.tril_()",
        "cumsum_": f"{a}.cumsum_({d})", "copy_bcast": f"{a}.copy_({g.operand(sh, 0.5)})",
        "fill_diagonal_": f"{a}.fill_diagonal_(0.5)", "sqrt_": f"{a}.abs_().add_(0.1).sqrt_()",
    }[op]
    if op in ("t_", "transpose_", "unsqueeze_", "squeeze_") and g.ns[a].requires_grad:
        # not under no_grad: flowgrad refused a layout change there until it recorded nothing
        # there as torch (tests/test_layout_inplace_vs_torch.py covers it); kept out of the
        # draw so that the seeds keep their programs
        return g.commit(kind, code)
    return _maybe_no_grad(g, kind, code)
