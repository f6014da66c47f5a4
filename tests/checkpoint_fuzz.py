"""Differential fuzzing of torch.utils.checkpoint: random checkpointed programs in torch and
in flowgrad.

A seed draws one program: a function built from a pool of steps (sin, tanh, exp, a product
with a captured parameter or with a second argument, an in-place op on an intermediate, an
in-place op on exp's saved output, dropout, detach, a `no_grad` block, a BatchNorm layer whose
running statistics change, a write into a captured tensor, a nested checkpoint), arguments that
are tensors requiring grad or not, a number and None, outputs that are one tensor, a tuple, a
tuple with a number or None, or nested, some of them unused by the loss. It is called through
`checkpoint` (reentrant or not, every flag: preserve_rng_state, determinism_check, debug,
context_fn, early_stop, keyword arguments; use_reentrant sometimes not passed) or
`checkpoint_sequential`, maybe under saved-tensor hooks or `set_checkpoint_early_stop(False)`,
then differentiated by backward, autograd.grad, backward twice (retain_graph) or double
backward. The outcome must be torch's: the outputs, every leaf's gradient (None or not), how
often the function ran, the module buffers and captured tensors after, the warnings given, and
the exception's class when one is raised. A program with dropout (whose masks the two
frameworks draw differently) is compared by whether each array equals the same program run
without the checkpoint.

    .venv/bin/python tests/checkpoint_fuzz.py --seeds 0:500      # summary
    .venv/bin/python tests/checkpoint_fuzz.py --show 17          # one program and its verdict
"""
from __future__ import annotations

import contextlib
import random
import warnings

import fuzz_common
import numpy as np
import torch
import torch.utils.checkpoint  # noqa: F401 - m.utils.checkpoint below

import flowgrad as flow
import flowgrad.utils.checkpoint  # noqa: F401

STEPS = ["sin", "tanh", "exp", "mul_w", "mul_b", "inplace", "exp_inplace", "dropout",
         "detach", "no_grad", "bn", "mutate", "nested"]
OUTPUTS = ["single", "tuple", "number", "none", "nested", "list"]
BACKWARDS = ["backward", "grad", "twice", "double", "inputs"]
SHAPE = (4, 3)


class Program:
    """One checkpointed program, drawn from a seed."""

    def __init__(self, seed):
        r = random.Random(seed)
        self.seed = seed
        self.sequential = r.random() < 0.2
        self.steps = [r.choice(STEPS) for _ in range(r.randint(1, 4))]
        self.reentrant = r.choice([True, False, False, None])
        hooks = self.reentrant is False  # (the others mostly refuse what follows)
        # b: None when not passed (checkpoint_sequential passes one argument)
        self.b_grad = None if self.sequential else r.choice([True, False, None])
        self.extra = not self.sequential and r.random() < 0.4  # a number and None
        self.kwarg = not self.sequential and r.random() < (0.3 if hooks else 0.05)
        self.outputs = "single" if self.sequential else r.choice(OUTPUTS)
        self.used = r.choice(["all", "first", "last"])
        self.backward = r.choice(BACKWARDS if hooks else ["backward", "twice"] + BACKWARDS)
        self.flags = {}
        if r.random() < 0.4:
            self.flags["preserve_rng_state"] = r.random() < 0.5
        if not self.sequential:
            if r.random() < 0.2:
                self.flags["determinism_check"] = r.choice(["default", "none"])
            if r.random() < 0.2:
                # (debug=False only: torch's debug=True logs through a LoggingTensorMode in a
                # generator context its second recomputation cannot enter again,
                # AttributeError, and which leaves torch's dispatch mode stack unbalanced in
                # some runs under pytest: later programs' `tensor * 2` raise TypeError. Its
                # one effect in flowgrad, the error message, test_checkpoint_semantics tests)
                self.flags["debug"] = False
            if r.random() < (0.25 if hooks else 0.05):
                self.flags["context_fn"] = "logged"
            if r.random() < 0.1 and self.reentrant is False:
                self.flags["early_stop"] = False
        self.x_grad = r.random() < 0.9
        self.hooks = r.random() < 0.2
        self.no_early_stop = r.random() < 0.15
        self.nested_reentrant = r.random() < 0.5
        self.segments = r.randint(1, 3)
        self.modules = self.sequential and r.random() < 0.5
        self.dropout = "dropout" in self.steps
        if self.dropout:  # (compared with the plain run, which refuses exp_inplace)
            self.steps = ["exp" if k == "exp_inplace" else k for k in self.steps]
        self.out_of_place = False

    def describe(self):
        return (f"{'sequential' if self.sequential else 'checkpoint'} steps={self.steps} "
                f"use_reentrant={self.reentrant} b_grad={self.b_grad} extra={self.extra} "
                f"kwarg={self.kwarg} outputs={self.outputs} used={self.used} "
                f"backward={self.backward} flags={self.flags} x_grad={self.x_grad} "
                f"hooks={self.hooks} no_early_stop={self.no_early_stop} "
                f"nested_reentrant={self.nested_reentrant} segments={self.segments} "
                f"modules={self.modules}")

    # ---- one run -----------------------------------------------------------------------

    def run(self, m, checkpointed=True):
        """{what: array, None or number} after the program, under module `m`; raises what
        the program raises."""
        rng = np.random.default_rng(self.seed)
        cp = m.utils.checkpoint
        x = m.tensor(rng.standard_normal(SHAPE), requires_grad=self.x_grad)
        b = m.tensor(rng.standard_normal(SHAPE) + 2, requires_grad=bool(self.b_grad))
        w = m.tensor(rng.standard_normal(SHAPE[1]), requires_grad=True)
        bn = m.nn.BatchNorm1d(SHAPE[1]).double()
        captured = m.zeros(SHAPE[1], dtype=m.float64)
        calls, events, self.linear = [0], [], []
        m.manual_seed(self.seed)

        def step(kind, h, bb):
            if kind == "sin":
                return h.sin()
            if kind == "tanh":
                return h.tanh()
            if kind == "exp":
                return (h * 0.3).exp()
            if kind == "mul_w":
                return h * w
            if kind == "mul_b":
                return h * bb if bb is not None else h * 2
            if kind == "inplace":
                h = h * 1.0
                h.mul_(1.5).add_(w)
                return h
            if kind == "exp_inplace":  # exp saves its output: the write breaks backward
                h = (h * 0.3).exp()
                if self.out_of_place:  # (the program's meaning, to judge torch's gradient)
                    return h + 1
                h.add_(1)
                return h
            if kind == "dropout":
                return m.nn.functional.dropout(h, 0.5, training=True)
            if kind == "detach":
                return h.detach() * w + h
            if kind == "no_grad":
                with m.no_grad():
                    c = h * 2
                return h + c
            if kind == "bn":
                return bn(h)
            if kind == "mutate":
                with m.no_grad():
                    captured.add_(h.sum(0))
                return h.cos()
            # "nested"
            def inner(t):
                return t.sin() * w
            if not checkpointed:
                return inner(h)
            return cp.checkpoint(inner, h, use_reentrant=self.nested_reentrant)

        def fn(a, *rest, scale=1.0):
            calls[0] += 1
            bb = rest[0] if self.b_grad is not None else None
            if self.extra:
                k, none = rest[-2:]
                assert none is None
                a = a * k
            h = a * scale
            for kind in self.steps:
                h = step(kind, h, bb)
            return self._outputs(h)

        args = [x] + ([b] if self.b_grad is not None else []) + ([2, None] if self.extra else [])
        kwargs = {"scale": 0.5} if self.kwarg else {}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            # (NumPy's overflow warnings, which flowgrad's own filter hides)
            warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"flowgrad\.")
            with contextlib.ExitStack() as stack:
                if self.hooks:
                    stack.enter_context(m.autograd.graph.saved_tensors_hooks(
                        lambda t: (events.append("pack"), t)[1],
                        lambda t: (events.append("unpack"), t)[1]))
                if self.no_early_stop:
                    stack.enter_context(cp.set_checkpoint_early_stop(False))
                out = self._call(m, cp, fn, args, kwargs, events, checkpointed)
            loss = self._loss(out)
            grads = self._differentiate(m, loss, x, b, w, bn)
        result = {"calls": calls[0], "events": _runs(events),
                  "warnings": sorted({_warning_kind(w) for w in caught}),
                  "running_mean": bn.running_mean.numpy().copy(),
                  "running_var": bn.running_var.numpy().copy(),
                  "num_batches_tracked": int(bn.num_batches_tracked),
                  "captured": captured.numpy().copy()}
        for i, t in enumerate(_flat(out)):
            result[f"output {i}"] = t.detach().numpy().copy() if hasattr(t, "detach") else t
        result.update(grads)
        return result

    def _outputs(self, h):
        if self.outputs == "single":
            return h
        if self.outputs == "tuple":
            return h, h.cos()
        if self.outputs == "number":
            return h, 3
        if self.outputs == "none":
            return None, h
        if self.outputs == "nested":
            return (h, h.cos()), h * 2
        return [h, h.exp()]  # "list"

    def _call(self, m, cp, fn, args, kwargs, events, checkpointed):
        flags = dict(self.flags)
        if flags.get("context_fn") == "logged":
            def context_fn():
                events.append("context_fn")
                return _LoggingContext(events, "forward"), _LoggingContext(events, "recompute")
            flags["context_fn"] = context_fn
        if self.reentrant is not None:
            flags["use_reentrant"] = self.reentrant
        if self.sequential:
            functions = [(lambda t: t.sin()), (lambda t: fn(t))] + \
                [(lambda t: t * 1.5)] * (self.segments - 1)
            if self.modules:  # an nn.Sequential: a Linear, the function, a Tanh, ...
                linear = m.nn.Linear(SHAPE[1], SHAPE[1]).double()
                self.linear.append(linear)
                with m.no_grad():
                    linear.weight.copy_(m.tensor(np.linspace(-1, 1, SHAPE[1] ** 2).reshape(
                        SHAPE[1], SHAPE[1])))
                    linear.bias.fill_(0.25)
                functions = m.nn.Sequential(linear, _Wrapped(m, fn), m.nn.Tanh(),
                                            *[m.nn.Tanh() for _ in range(self.segments - 1)])
            if not checkpointed:
                for f in functions:
                    args[0] = f(args[0])
                return args[0]
            extra = {k: v for k, v in flags.items() if k in ("preserve_rng_state",
                                                             "use_reentrant")}
            return cp.checkpoint_sequential(functions, self.segments, args[0], **extra)
        if not checkpointed:
            return fn(*args, **kwargs)
        return cp.checkpoint(fn, *args, **flags, **kwargs)

    def _loss(self, out):
        tensors = [t for t in _flat(out) if hasattr(t, "requires_grad")]
        if self.used == "first":
            tensors = tensors[:1]
        elif self.used == "last":
            tensors = tensors[-1:]
        loss = sum((t * t).sum() for t in tensors)
        return loss

    def _differentiate(self, m, loss, x, b, w, bn):
        leaves = {"x": x, "b": b, "w": w, "bn.weight": bn.weight, "bn.bias": bn.bias}
        for lin in self.linear:  # (checkpoint_sequential's nn.Sequential)
            leaves.update({"linear.weight": lin.weight, "linear.bias": lin.bias})
        wanted = [k for k, t in leaves.items() if t.requires_grad]
        kind = self.backward
        out = {}
        if kind == "grad":
            grads = m.autograd.grad(loss, [leaves[k] for k in wanted], allow_unused=True)
            return {f"grad {k}": _arr(g) for k, g in zip(wanted, grads)}
        if kind == "double":
            grads = m.autograd.grad(loss, [leaves[k] for k in wanted], allow_unused=True,
                                    create_graph=True)
            out = {f"grad {k}": _arr(g) for k, g in zip(wanted, grads)}
            second = sum((g * g).sum() for g in grads if g is not None and g.requires_grad)
            if hasattr(second, "backward"):
                second.backward()
        elif kind == "twice":
            loss.backward(retain_graph=True)
            loss.backward()
        elif kind == "inputs":
            loss.backward(inputs=[x] if x.requires_grad else [w])
        else:
            loss.backward()
        out.update({f".grad {k}": _arr(t.grad) for k, t in leaves.items()})
        return out


def _Wrapped(m, fn):  # noqa: N802 - a module class per framework
    class Wrapped(m.nn.Module):
        def forward(self, t):
            return fn(t)
    return Wrapped()


def _runs(events):
    """The events, each run of packs or unpacks as one (how many tensors an op saves is its
    own business)."""
    return [e for i, e in enumerate(events) if i == 0 or e not in ("pack", "unpack")
            or events[i - 1] != e]


def _arr(t):
    return None if t is None else t.detach().numpy().copy()


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [u for o in out for u in _flat(o)]
    return [out]


class _LoggingContext:
    """A context (entered again at each recomputation) that logs its entries and exits."""

    def __init__(self, events, name):
        self.events, self.name = events, name

    def __enter__(self):
        self.events.append(f"enter {self.name}")

    def __exit__(self, *exc):
        self.events.append(f"exit {self.name}")


def _warning_kind(w):
    text = str(w.message)
    for key in ("use_reentrant", "None of the inputs have requires_grad"):
        if key in text:
            return key
    return f"{w.category.__name__}: {text[:80]}"


def _outcome(prog, m, checkpointed=True):
    try:
        return prog.run(m, checkpointed), None
    except Exception as e:  # noqa: BLE001 - its class is compared with torch's
        return None, e


# differences we keep, each with the reason; `known(prog, torch's result, flowgrad's error,
# verdict)` says whether it is the one here
KNOWN = {
    "torch reads a saved tensor written in place without a word where saved-tensor hooks "
    "(its checkpoint's, or the user's) hold it: a gradient of other values than the forward "
    "used. flowgrad raises (checked: torch's gradient is not the out-of-place program's)":
        lambda prog, want, error, verdict: error is not None and "in-place" in str(error)
        and _torch_wrong_after_write(prog, want),
    "dropout keeps its mask as the op's aux, not a saved tensor: nothing makes a checkpoint "
    "of dropout alone recompute, and backward uses the forward's mask where torch's "
    "recomputation without preserve_rng_state draws another":
        lambda prog, want, error, verdict: prog.dropout and verdict is not None and (
            verdict.startswith("calls:") or prog.flags.get("preserve_rng_state") is False),
}


def known(prog, want, error, verdict):
    """The reason of KNOWN that explains the verdict, or None."""
    return next((why for why, holds in KNOWN.items() if holds(prog, want, error, verdict)),
                None)


def _torch_wrong_after_write(prog, want):
    """Whether torch ran the program with in-place writes to another result than the same
    program written out of place."""
    if want is None or "exp_inplace" not in prog.steps:
        return False
    prog.out_of_place = True
    try:
        right, error = _outcome(prog, torch)
    finally:
        prog.out_of_place = False
    return error is None and any(
        isinstance(v, np.ndarray) and fuzz_common.first_difference(
            [(k, v, right.get(k))], rtol=1e-10) for k, v in want.items())


def check(seed):
    """None when flowgrad's program runs as torch's (or differs as KNOWN says), else a
    message."""
    prog = Program(seed)
    want, torch_error = _outcome(prog, torch)
    got, error = _outcome(prog, flow)
    verdict = _verdict(prog, want, torch_error, got, error)
    if verdict is not None and known(prog, want, error, verdict):
        return None
    return verdict


def _verdict(prog, want, torch_error, got, error):
    if torch_error is not None or error is not None:
        if torch_error is None:
            return f"flowgrad raised {type(error).__name__}: {error}"
        if error is None:
            return f"torch raised {type(torch_error).__name__}: {torch_error}; flowgrad ran"
        if type(error).__name__ != type(torch_error).__name__:
            return (f"flowgrad raised {type(error).__name__}: {error}; torch "
                    f"{type(torch_error).__name__}: {torch_error}")
        return None
    if sorted(got) != sorted(want):
        return f"results {sorted(got)}, torch {sorted(want)}"
    if prog.dropout:  # each array as whether it equals the program run without checkpoint
        plain_want, plain_torch_error = _outcome(prog, torch, checkpointed=False)
        plain_got, plain_error = _outcome(prog, flow, checkpointed=False)
        if (plain_want is None) != (plain_got is None) or plain_want is None and \
                type(plain_error) is not type(plain_torch_error):
            return (f"the plain run: torch {plain_torch_error!r}, flowgrad {plain_error!r}")
        if plain_want is None:  # both refuse it (no input requires grad without checkpoint):
            plain_want = plain_got = {}  # the arrays are compared by presence alone
        for k in want:
            if isinstance(want[k], np.ndarray):
                want[k] = _same(want[k], plain_want.get(k))
                got[k] = _same(got[k], plain_got.get(k))
    for k in want:
        a, b = got[k], want[k]
        if isinstance(b, np.ndarray) or isinstance(a, np.ndarray):
            msg = fuzz_common.first_difference([(k, a, b)], rtol=1e-10 * _kin_scale(k, b, want))
            if msg is None and (a is None) != (b is None):
                msg = f"{k}: flowgrad {a is not None}, torch {b is not None}"
            if msg:
                return msg
        elif a != b:
            return f"{k}: flowgrad {a!r}, torch {b!r}"
    return None


def _kin_scale(key, b, want):
    """1, or for a gradient whose truth `b` is zero at its siblings' scale (below 1e-12 of
    the largest gradient of the same kind: a sum that cancels, seed 9002778's bn.bias
    double-backward gradient, 1e-10 beside 4e6), that scale over b's own: one rounding of
    terms of the siblings' size is not a finding."""
    kind = key.split(" ")[0]
    if not isinstance(b, np.ndarray) or b.dtype.kind != "f" or kind not in ("grad", ".grad"):
        return 1.0
    kin = max(float(np.abs(np.nan_to_num(v, posinf=0.0, neginf=0.0)).max(initial=0.0))
              for k, v in want.items() if isinstance(v, np.ndarray) and v.dtype.kind == "f"
              and k.split(" ")[0] == kind)
    own = float(np.abs(np.nan_to_num(b, posinf=0.0, neginf=0.0)).max(initial=0.0))
    return kin / max(own, 1.0) if own <= 1e-12 * kin else 1.0


def _same(a, b):
    """Whether array `a` equals `b` (a dropout program's arrays, compared to its plain run)."""
    if a is None or b is None:
        return a is None and b is None
    return bool(a.shape == b.shape and np.allclose(a, b, rtol=1e-10, atol=1e-12))


def main():
    fuzz_common.main(__doc__, lambda seed: Program(seed).describe(), check, seeds="0:300")


if __name__ == "__main__":
    main()
