"""Differential fuzzing of vmapped PROGRAMS: `flow.func.vmap` against `torch.func.vmap`.

The programs are program_fuzz.py's (views, in-place writes, out-of-place ops, steps under
no_grad), generated the same way without its autograd steps, over leaves that do not require
grad. Each leaf becomes an argument of the vmapped function, given a batch of three versions
of its values, and the function returns every tensor the program bound. Both frameworks must
agree on raise / no-raise of the whole call and on every returned tensor's shape and values.
`CHECKS["grad"]` vmaps func.grad of a loss over those tensors instead: per-example
gradients through the program's views and in-place writes; `CHECKS["jvp"]` vmaps func.jvp
(jacfwd's order): their tangents; "hvp" (no vmap) takes grad of grad, a Hessian-vector
product, and "jvp_of_grad" (no vmap) jvp of grad, the same product in forward-over-reverse;
"jvp_of_jvp" and "grad_of_jvp" nest forward mode likewise; the "vmap_" modes vmap those
over the batch; "grad_of_vmap_grad" differentiates the per-example gradients again, outside
the vmap, and "grad_of_vmap" and "backward_of_vmap" differentiate the vmapped program itself
there, by func.grad and by backward(). `--mode M` picks one.
A difference is reported at the shortest prefix of the program that shows it.

    .venv/bin/python tests/vmap_fuzz.py --seeds 0:2000      # summary + first differences
    .venv/bin/python tests/vmap_fuzz.py --show 17           # one program and its verdict
    .venv/bin/python tests/vmap_fuzz.py --mode vmap_hvp --seeds 0:500   # another check
"""
from __future__ import annotations

import functools
import sys
import warnings

import forward_fuzz
import fuzz_common
import numpy as np
import program_fuzz as pf
import torch

import flowgrad as flow

BATCH = 3
_PER_LEAF = ("grad", "hvp", "jvp_of_grad", "vmap_hvp", "vmap_jvp_of_grad",
             "grad_of_jvp", "vmap_grad_of_jvp", "grad_of_vmap_grad", "grad_of_vmap",
             "backward_of_vmap")  # labels d<leaf> (and "chain" where it ends in g or v)
# modes that vmap inside what they differentiate (the whole batch, not one example)
_WHOLE_BATCH = ("grad_of_vmap_grad", "grad_of_vmap", "backward_of_vmap", "chain")
# the chains of transforms mode "chain" draws from (g grad of the sin-weighted sum, j jvp
# along cos(3 x), v vjp of ones, m vmap over two versions of each tensor, r jacrev, f
# jacfwd), outermost first
CHAINS = ["gm", "jm", "vm", "mg", "mj", "mv", "gg", "gj", "jg", "jj", "gmg", "gmj", "vmg",
          "jmg", "mgm", "mmg", "gmm", "mgg", "mjg", "gjm", "ggm", "jgm", "mmj", "gmgm"]
# (r jacrev and f jacfwd of every output in every input: drawn by seeds from 100000 on)
JAC_CHAINS = ["r", "f", "rm", "fm", "mr", "mf", "gr", "rg", "fr", "rf", "gmr", "rmg", "fmg"]


def chain_of(seed):
    chains = JAC_CHAINS if seed >= 100000 else CHAINS
    return chains[seed % len(chains)]


def _transformed(m, kind, fn):
    """`kind` of fn, a function of tensors returning a tuple of tensors, as the same kind of
    function."""
    F = m.func

    def scalar(*a):
        return sum((t.sin() * (0.3 + 0.1 * k)).sum() for k, t in enumerate(fn(*a)))

    if kind == "g":
        return lambda *a: F.grad(scalar, argnums=tuple(range(len(a))))(*a)
    if kind == "j":
        return lambda *a: tuple(F.jvp(fn, a, tuple(m.cos(3 * t) for t in a))[1])
    if kind == "v":
        def pulled(*a):
            out, pull = F.vjp(fn, *a)
            return tuple(pull(tuple(m.ones_like(o) for o in out)))
        return pulled
    if kind in "rf":  # jacrev, jacfwd: every output's Jacobian in every input, flattened
        jac = F.jacrev if kind == "r" else F.jacfwd
        return lambda *a: tuple(j for row in jac(fn, argnums=tuple(range(len(a))))(*a)
                                for j in row)
    return lambda *a: tuple(F.vmap(fn)(*(m.stack([t, t * 0.5 - 0.2]) for t in a)))
BUILDERS = [(4, pf.b_leaf), (30, pf.b_view), (33, pf.b_inplace), (16, pf.b_op)]


class _PlainGen(pf._Gen):
    """program_fuzz's generator with leaves that never require grad (vmap's inputs)."""

    def leaf(self, grad=None):
        super().leaf(grad=False)


def generate(seed):
    """The program of `seed` (a deterministic function of the seed and torch's behaviour)."""
    g = _PlainGen(seed)
    pf._reset_modes()
    pf.grow(g, BUILDERS, first_grad=False)
    pf._reset_modes()
    return pf.Program(seed, g.steps)


def _leaves(program):
    """{leaf name: its values} of the program's leaf steps."""
    out = {}
    for s in program.steps:
        if s.kind == "leaf":
            ns = {"m": torch}
            pf._exec(s.code, ns)
            out[s.outs[0]] = ns[s.outs[0]].numpy()
    return out


def _batches(program):
    """Three versions of each leaf's values, stacked: as written, shifted, scaled."""
    rng = np.random.default_rng(program.seed)
    return {n: np.stack([v, np.round(v + rng.uniform(-1, 1, v.shape), 2), -0.5 * v])
            for n, v in _leaves(program).items()}


def run(m, program, upto, batches, grad=False):
    """vmap over the leaves of `program.steps[:upto]`: (the returned tensors as (name, array)
    pairs, None) or (None, the exception). With `grad="grad"`, what is vmapped is func.grad
    of a loss over every bound tensor with respect to every leaf (per-example gradients);
    with "jvp", func.jvp of the program's tensors, tangents cos(3 x) (jacfwd's order)."""
    steps = program.steps[:upto]
    leaves = [s.outs[0] for s in steps if s.kind == "leaf"]
    names = []
    for s in steps:
        names += [o for o in s.outs if o not in names]

    def step(*args):
        ns = {"m": m, **dict(zip(leaves, args))}
        for s in steps:
            if s.kind != "leaf":
                error = pf._exec(s.code, ns)
                if error is not None:
                    raise error
        bound = [(n, ns[n]) for n in names if isinstance(ns.get(n), m.Tensor)]
        step.bound = [n for n, _ in bound]
        return tuple(t for _, t in bound)

    def loss(*args):
        return sum((t.sin() * (0.3 + 0.1 * k)).sum() for k, t in enumerate(step(*args))
                   if t.is_floating_point())

    def tangents(*args):
        n = len(args) // 2
        return m.func.jvp(step, args[:n], args[n:])[1]

    def hessian_vector(*args):  # grad of <grad(loss), v>, with v the second half of args
        n = len(args) // 2
        grad = m.func.grad(loss, argnums=tuple(range(n)))
        return m.func.grad(lambda *a: sum((g * v).sum() for g, v in zip(grad(*a), args[n:])),
                           argnums=tuple(range(n)))(*args[:n])

    def grad_tangents(*args):  # jvp of grad(loss) along the second half of args
        n = len(args) // 2
        grad = m.func.grad(loss, argnums=tuple(range(n)))
        return m.func.jvp(grad, args[:n], args[n:])[1]

    def tangents_of_tangents(*args):  # jvp along the second half of args of the tangents
        n = len(args) // 2              # (jvp) of step along cos(3 x)
        return m.func.jvp(lambda *a: m.func.jvp(step, a, tuple(m.cos(3 * t) for t in a))[1],
                          args[:n], args[n:])[1]

    def grad_of_tangents(*args):  # grad of a loss over the tangents (jvp) along cos(3 x)
        def tangent_loss(*a):
            tangents = m.func.jvp(step, a, tuple(m.cos(3 * t) for t in a))[1]
            return sum((t.sin() * (0.3 + 0.1 * k)).sum() for k, t in enumerate(tangents)
                       if t.is_floating_point())
        return m.func.grad(tangent_loss, argnums=tuple(range(len(args))))(*args)

    def grad_of_vmapped_grads(*args):  # grad of <vmap(grad(loss)), cos(3 x)>, whole batch
        argnums = tuple(range(len(args)))
        per_example = m.func.vmap(m.func.grad(loss, argnums=argnums))
        return m.func.grad(lambda *a: sum((g * m.cos(3 * x)).sum() for g, x in zip(
            per_example(*a), a)), argnums=argnums)(*args)

    def vmapped_loss(*args):  # the loss over the vmapped program's tensors, whole batch
        return sum((t.sin() * (0.3 + 0.1 * k)).sum() for k, t in enumerate(
            m.func.vmap(step)(*args)) if t.is_floating_point())

    def backward_of_vmapped(*args):  # its gradients by backward(), the leaves' .grad
        leaves = [a.clone().requires_grad_() for a in args]
        vmapped_loss(*leaves).backward()
        return [m.zeros_like(a) if a.grad is None else a.grad for a in leaves]

    def chained(*args):  # CHAIN_OF(seed)'s transforms of the program, outermost first
        fn = lambda *a: tuple(t for t in step(*a) if t.is_floating_point())  # noqa: E731
        for kind in reversed(chain_of(program.seed)):
            fn = _transformed(m, kind, fn)
        return fn(*args)

    pf._reset_modes()
    args = [m.tensor(batches[n], dtype=m.float64) for n in leaves]
    if grad and not args:
        return [], None
    fn = step
    if grad == "grad":
        fn = m.func.grad(loss, argnums=tuple(range(len(args))))
    elif grad in ("grad_of_jvp", "vmap_grad_of_jvp"):
        fn = grad_of_tangents
    elif grad == "grad_of_vmap_grad":
        fn = grad_of_vmapped_grads
    elif grad == "grad_of_vmap":
        fn = m.func.grad(vmapped_loss, argnums=tuple(range(len(args))))
    elif grad == "backward_of_vmap":
        fn = backward_of_vmapped
    elif grad == "chain":
        fn = chained
    elif grad in ("jvp", "hvp", "jvp_of_grad", "vmap_hvp", "vmap_jvp_of_grad", "jvp_of_jvp",
                  "vmap_jvp_of_jvp"):
        fn = {"jvp": tangents, "hvp": hessian_vector, "jvp_of_grad": grad_tangents,
              "vmap_hvp": hessian_vector, "vmap_jvp_of_grad": grad_tangents,
              "jvp_of_jvp": tangents_of_tangents, "vmap_jvp_of_jvp": tangents_of_tangents}[grad]
        args += [m.tensor(np.cos(3 * batches[n]), dtype=m.float64) for n in leaves]
    plain = grad in ("hvp", "jvp_of_grad", "jvp_of_jvp", "grad_of_jvp")
    if plain:  # (no vmap: the first example)
        args = [a[0] for a in args]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            out = m.func.vmap(fn)(*args) if args and not plain and \
                grad not in _WHOLE_BATCH else fn(*args)
        except Exception as e:  # noqa: BLE001 - an outcome to compare
            return None, e
        finally:
            pf._reset_modes()
    labels = [f"d{n}" for n in leaves] if grad in _PER_LEAF else step.bound
    if grad == "chain":
        labels = [f"out{i}" for i in range(len(out))]
    # (force: a chain of transforms can hand back torch's ZeroTensor, which numpy() refuses)
    return list(zip(labels, (np.asarray(t.detach().numpy(force=True)) for t in out))), None


def _differ(program, upto, batches, grad, oracle=None):
    """None when both frameworks agree on `program.steps[:upto]`, else (what, detail); torch
    runs `oracle` (the same program written another way) when given."""
    (ot, et), (of, ef) = (run(m, p, upto, batches, grad)
                          for m, p in ((torch, oracle or program), (flow, program)))
    if (et is None) != (ef is None):
        return pf._raise_what(et, ef, "")
    if et is not None:
        return None
    if [n for n, _ in ot] != [n for n, _ in of]:
        return "binding", f"tensors {[n for n, _ in of]} vs torch {[n for n, _ in ot]}"
    for (n, a), (_, b) in zip(ot, of):
        if a.shape != b.shape:
            return "shape", f"{n}: shape {b.shape} vs torch {a.shape}"
        if not np.array_equal(np.isnan(a), np.isnan(b)) or not np.allclose(
                b, a, rtol=pf.RTOL, atol=pf.ATOL, equal_nan=True):
            return "values", f"{n}: flowgrad {b.tolist()} vs torch {a.tolist()}"
    return None


def check(seed, grad=False):
    """None when the vmapped program of `seed` (with `grad`: its per-example gradients) runs
    alike in both frameworks, else a report at the shortest prefix that differs."""
    program = generate(seed)
    batches = _batches(program)
    n = len(program.steps)
    found = _differ(program, n, batches, grad)
    if found is None:
        return None
    lo, hi = 0, n  # the difference shows at hi steps, not at lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        d = _differ(program, mid, batches, grad)
        if d is None:
            lo = mid
        else:
            hi, found = mid, d
    if (grad in ("jvp", "jvp_of_grad", "vmap_jvp_of_grad", "jvp_of_jvp", "grad_of_jvp",
                 "vmap_jvp_of_jvp", "vmap_grad_of_jvp") or grad == "chain" and
            set("jf") & set(chain_of(seed))) and found[0] == "values":
        # torch's tangent of an aliased write or a copy_ may not be the derivative
        # (TORCH_ALIASED): its oracle is the program with those reading clones
        oracle = forward_fuzz.unaliased(program, hi)
        if oracle != program:
            found = _differ(program, hi, batches, grad, oracle)
            if found is None:
                return None
    program.steps = program.steps[:hi]
    what = {"grad": "the per-example gradients (vmap of grad) of sum(sin(t) * c) over its "
                    "tensors", "jvp": "the tangents of its tensors (vmap of jvp)",
            "hvp": "grad(grad) of that loss against cos(3 x), example 0, not vmapped",
            "jvp_of_grad": "jvp(grad) of that loss along cos(3 x), example 0, not vmapped",
            "vmap_hvp": "grad(grad) of that loss against cos(3 x), vmapped",
            "vmap_jvp_of_grad": "jvp(grad) of that loss along cos(3 x), vmapped",
            "jvp_of_jvp": "jvp along cos(3 x) of the tangents of its tensors along cos(3 x), "
                          "example 0, not vmapped",
            "grad_of_jvp": "grad of sum(sin(t) * c) over the tangents of its tensors along "
                           "cos(3 x), example 0, not vmapped",
            "vmap_jvp_of_jvp": "jvp of jvp as above, vmapped",
            "vmap_grad_of_jvp": "grad of jvp as above, vmapped",
            "grad_of_vmap_grad": "grad of <vmap of grad of that loss, cos(3 x)>, the whole "
                                 "batch",
            "grad_of_vmap": "grad of that loss over the vmapped tensors, the whole batch",
            "backward_of_vmap": "backward() of that loss over the vmapped tensors: the "
                                "leaves' .grad",
            "chain": f"the chain {chain_of(seed)} (CHAINS), the whole batch"}.get(
        grad, "its tensors")
    return f"{found[0]}: {found[1]}\n" + program.source(mark=hi - 1, note=found[0]).replace(
        pf.HEADER, pf.HEADER + f"  # vmapped over the x leaves, batch {BATCH}: {what}")


# check(seed) under each transform: the per-example gradients (vmap of grad), tangents
# (vmap of jvp), grad(grad) and jvp(grad) of the example-0 program and those under vmap,
# jvp(jvp) and grad(jvp), plain and vmapped
CHECKS = {"values": check, **{mode: functools.partial(check, grad=mode) for mode in (
    "grad", "jvp", "hvp", "jvp_of_grad", "vmap_hvp", "vmap_jvp_of_grad", "jvp_of_jvp",
    "grad_of_jvp", "vmap_jvp_of_jvp", "vmap_grad_of_jvp", "grad_of_vmap_grad", "grad_of_vmap",
    "backward_of_vmap", "chain")}}


if __name__ == "__main__":
    mode = "values"
    if "--mode" in sys.argv:  # (the other options are fuzz_common's)
        i = sys.argv.index("--mode")
        mode = sys.argv[i + 1]
        del sys.argv[i:i + 2]
    sys.exit(fuzz_common.report_main(__doc__, lambda seed: generate(seed).source(),
                                     CHECKS[mode]))
