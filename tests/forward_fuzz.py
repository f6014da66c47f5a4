"""Differential fuzzing of forward-mode AD PROGRAMS: flowgrad against torch, in float64.

The programs are program_fuzz.py's (views, in-place writes, out-of-place ops, `.data` writes,
steps under `no_grad`), generated the same way (each step chosen while running it in torch),
without its backward steps, over leaves that are mostly dual tensors:
`x1 = fwAD.make_dual(m.tensor(...), m.tensor(...))`, all inside one `fwAD.dual_level()`.
After every step both frameworks must agree on raise / no-raise and, for every live pool
tensor, on its primal (values, shape, requires_grad) and its tangent (`unpack_dual(t).tangent`:
None against a tensor is a difference, as are its values). So an in-place write through a
view must carry the written tangent into the base, a write under no_grad must still carry it
(no_grad does not stop forward AD), and a `.data` write must leave the tangent alone.

    .venv/bin/python tests/forward_fuzz.py --seeds 0:2000      # summary + first differences
    .venv/bin/python tests/forward_fuzz.py --show 17           # one program and its verdict
"""
from __future__ import annotations

import re
import sys
import warnings
from dataclasses import replace

import fuzz_common
import numpy as np
import program_fuzz as pf
import torch

import flowgrad as flow

HEADER = "import torch as m  # or: import flowgrad as m\nfwAD = m.autograd.forward_ad"
DUAL_SHARE = 0.75  # of the leaves: the rest are plain tensors, operands without a tangent
BUILDERS = [(4, pf.b_leaf), (30, pf.b_view), (33, pf.b_inplace), (16, pf.b_op),
            (4, pf.b_data)]


class _DualGen(pf._Gen):
    """program_fuzz's generator, its leaves made dual (most of them), inside a dual level."""

    def __init__(self, seed):
        super().__init__(seed)
        self.ns = _namespace(torch)

    def _replay(self):
        self.ns = _namespace(torch)
        pf._reset_modes()
        for s in self.steps:
            pf._exec(s.code, self.ns)

    def leaf(self, grad=None):
        shape = self.rng.choice(pf.LEAF_SHAPES)
        v = np.round(self.vals.uniform(-2, 2, shape), 2)
        v = np.where(np.abs(v) < 0.05, 0.55, v)
        grad = self.rng.random() < 0.25 if grad is None else grad
        n = self.fresh("x")
        rg = ", requires_grad=True" if grad else ""
        primal = f"m.tensor({_literal(v)}, dtype=m.float64{rg})"
        if self.rng.random() < DUAL_SHARE:
            tangent = np.round(self.vals.uniform(-2, 2, shape), 2)
            code = f"{n} = fwAD.make_dual({primal}, m.tensor({_literal(tangent)}, " \
                   f"dtype=m.float64))"
        else:
            code = f"{n} = {primal}"
        self.commit("leaf", code, (n,))


def _literal(v):
    return pf._r(v) if v.ndim == 0 else repr(v.tolist())


def _namespace(m):
    return {"m": m, "fwAD": m.autograd.forward_ad}


def generate(seed):
    """The program of `seed` (a deterministic function of the seed and torch's behaviour)."""
    g = _DualGen(seed)
    pf._reset_modes()
    with torch.autograd.forward_ad.dual_level(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pf.grow(g, BUILDERS, first_grad=False)
    pf._reset_modes()
    return pf.Program(seed, g.steps)


def _tangent(m, t):
    try:
        return m.autograd.forward_ad.unpack_dual(t).tangent
    except Exception as e:  # noqa: BLE001 - reading it may raise (a stale multi-output view)
        return e


def _same_tangent(a, b, label):
    ta, tb = _tangent(torch, a), _tangent(flow, b)
    if isinstance(ta, Exception) or isinstance(tb, Exception):
        if isinstance(ta, Exception) and isinstance(tb, Exception):
            return None
        side = "torch" if isinstance(ta, Exception) else "flowgrad"
        return f"reading a tangent raises only in {side}", label
    if (ta is None) != (tb is None):
        return "tangent None vs tensor", (f"{label}: flowgrad {pf._show(tb)} vs torch "
                                          f"{pf._show(ta)}")
    if ta is None:
        return None
    d = pf._same_tensor(ta.detach(), tb.detach(), f"{label} tangent")
    # (not requires_grad: torch's tangent requires grad where its formula multiplied a
    # materialized zero tangent by a primal that does, t * 1.5 of a view of a leaf)
    return ("tangent " + d[0], d[1]) if d else None


def _compare(names, nt, nf):
    for n in names:
        a, b = nt.get(n), nf.get(n)
        d = pf._same_binding(a, b, n)
        if d:
            return d
        if isinstance(a, torch.Tensor):
            d = _same_tangent(a, b, n)
            if d:
                return d
    return None


def execute(program, upto=None, oracle=None):
    """Run `program.steps[:upto]` in both frameworks inside a dual level (torch runs `oracle`,
    the same program written another way, when given); the first difference, as a
    `program_fuzz.Verdict`."""
    steps = program.steps if upto is None else program.steps[:upto]
    torch_steps = (oracle or program).steps
    nt, nf = _namespace(torch), _namespace(flow)
    names = []
    pf._reset_modes()
    with torch.autograd.forward_ad.dual_level(), flow.autograd.forward_ad.dual_level(), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            for i, s in enumerate(steps):
                et, ef = pf._exec(torch_steps[i].code, nt), pf._exec(s.code, nf)
                names += [o for o in s.outs if o not in names]
                if (et is None) != (ef is None):
                    return pf.Verdict(False, i, *pf._raise_what(et, ef, ""), steps_run=i + 1)
                d = _compare(names, nt, nf)
                if d:
                    return pf.Verdict(False, i, *d, steps_run=i + 1)
                if et is not None:  # both raised: the program ends here
                    return pf.Verdict(True, steps_run=i + 1)
        finally:
            pf._reset_modes()
    return pf.Verdict(True, steps_run=len(steps))


TORCH_ALIASED = ("an in-place op whose operand shares memory with the tensor it writes "
                 "(x.mul_(x), x.add_(x[0])): torch's in-place tangent formula reads the "
                 "operand's tangent after updating the target's (x.mul_(x) gives 3 x dx, not "
                 "2 x dx); and t.copy_(x) into a t without a tangent: torch's t takes x's "
                 "tangent itself, which a later in-place write to x changes. flowgrad's are "
                 "the derivative")


def aliased_write(program, step):
    """Whether step `step` writes in place into a tensor that one of its operands shares
    memory with (checked in torch, the oracle, by running the program up to it)."""
    return bool(_aliased_operands(program, step))


def _aliased_operands(program, step):
    """The names step `step` reads that share memory with the tensor it writes in place (in
    torch, by running the program up to it): [] when it is no such write."""
    code = program.steps[step].code
    names = re.findall(r"\b([xt]\d+)\b", code.split(":", 1)[-1] if code.startswith("with")
                       else code)
    if "inplace" not in program.steps[step].kind or len(names) < 2:
        return []
    ns = _namespace(torch)
    with torch.autograd.forward_ad.dual_level(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for s in program.steps[:step]:
            pf._exec(s.code, ns)
        target = ns.get(names[0])
        pf._reset_modes()
        if not isinstance(target, torch.Tensor):
            return []
        ptr = target.untyped_storage().data_ptr()
        return sorted({n for n in names[1:] if isinstance(ns.get(n), torch.Tensor) and
                       ns[n].untyped_storage().data_ptr() == ptr})


def unaliased(program, upto):
    """torch's oracle for tangents (TORCH_ALIASED): a copy of `program` where, among its first
    `upto` steps, each aliased in-place write (`aliased_write`) reads a clone of the operands
    sharing its memory, and each copy_ copies from a clone. The same values and derivatives,
    and torch's tangents are the derivative."""
    steps = list(program.steps)
    for i in range(upto):
        code = steps[i].code
        head, sep, body = code.partition(": ") if code.startswith("with") else ("", "", code)
        target = re.search(r"\b[xt]\d+\b", body)
        # (a copy of itself, t.copy_(t), stays: torch's writes nothing, its tangent is right,
        # and a clone copied into an expand would raise)
        if target and body == f"{target.group()}.copy_({target.group()})":
            continue
        operands = set(_aliased_operands(program, i)) | set(re.findall(r"\.copy_\(([xt]\d+)\)",
                                                                       code))
        if not operands:
            continue
        rest = re.sub(r"\b(" + "|".join(sorted(operands)) + r")\b", r"\1.clone()",
                      body[target.end():])
        steps[i] = replace(steps[i], code=head + sep + body[:target.end()] + rest)
    return replace(program, steps=steps)


def check(seed, known=True):
    """None when the program of `seed` runs alike in both frameworks, else a report. Where
    tangents differ, torch runs the program with its aliased writes and copy_ sources reading
    clones (`unaliased`: its tangents there are not the derivative, TORCH_ALIASED), unless
    `known` is False."""
    program = generate(seed)
    verdict = execute(program)
    if known and verdict.what == "tangent values":  # (torch's may not be the derivative)
        oracle = unaliased(program, len(program.steps))
        if oracle != program:
            verdict = execute(program, oracle=oracle)
        # a clone that the oracle copies into an expand raises in torch where the very tensor
        # did not (torch's copy_ of a tensor onto itself writes nothing): that step as written
        while not verdict.ok and verdict.what == "raise only in torch" and \
                oracle.steps[verdict.step] != program.steps[verdict.step]:
            steps = list(oracle.steps)
            steps[verdict.step] = program.steps[verdict.step]
            oracle = replace(oracle, steps=steps)
            verdict = execute(program, oracle=oracle)
    if verdict.ok:
        return None
    mark = verdict.step if isinstance(verdict.step, int) else None
    source = program.source(mark=mark, note=verdict.what).replace(pf.HEADER, HEADER)
    return f"{verdict.what}: {verdict.detail}\n{source}"


def source(seed):
    return generate(seed).source().replace(pf.HEADER, HEADER)


if __name__ == "__main__":
    sys.exit(fuzz_common.report_main(__doc__, source, check))
