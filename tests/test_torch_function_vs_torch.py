"""Tensor subclasses and the `__torch_function__` protocol (flowgrad/overrides.py) against
torch: each case is a snippet run unchanged by torch and by flowgrad (torch mapped to
flowgrad by the programs' import shim); `out` must hold the same result types (by class
name), values, dtypes and shapes, and both must raise or neither."""
import json
import subprocess
import sys

import numpy as np
import pytest
from test_torch_programs import exec_program

import flowgrad

PRELUDE = ("import numpy as np\nimport torch\nimport torch.nn as nn\n"
           "import torch.nn.functional as F\n")

CASES = {
    # results take the subclass's type through functions, methods, operators, properties
    "result_types": """
class My(torch.Tensor): pass
x = torch.ones(2, 3, requires_grad=True)
t = (x * 2).as_subclass(My)
p = torch.ones(2, 3)
r = {
 'add': t + 1, 'radd': 1 + t, 'rsub': 2 - t, 'plain_add': p + t, 'plain_mul': p * t,
 'mm': t @ p.T, 'rmm': p @ t.T, 'exp': t.exp(), 'fexp': torch.exp(t), 'sum': t.sum(),
 'getitem': t[0], 'T': t.T, 'clone': t.clone(), 'detach': t.detach(), 'view': t.view(6),
 'reshape': torch.reshape(t, (3, 2)), 'stack': torch.stack([p, t]), 'cat': torch.cat([t, p]),
 'where': torch.where(t > 1, t, p), 'relu': F.relu(t), 'linear': F.linear(t, torch.ones(4, 3)),
 'softmax': t.softmax(-1), 'neg': -t, 'abs': abs(t), 'gt': t > 1, 'eq': t == p, 'pow': t ** 2,
 'rpow': 2 ** t, 'data': t.data, 'real': t.real, 'mT': t.mT, 'to': t.to(torch.float64),
 'float': t.float(), 'unsqueeze': t.unsqueeze(0), 'new_ones': t.new_ones(2),
 'zeros_like': torch.zeros_like(t), 'einsum': torch.einsum('ij,ij->i', t, p),
 'matmul': torch.matmul(p, t.T), 'plain_method': p.add(t), 'mean_dim': t.mean(dim=0),
 'norm': torch.linalg.norm(t), 'chunk': t.chunk(2, 1)[0], 'out_sum': torch.sum(t, 0),
}
out = [sorted((k, type(v).__name__) for k, v in r.items()), [v for _, v in sorted(r.items())]]
out.append([type(a).__name__ for a in t.unbind()] + [type(a).__name__ for a in t.split(1)])
mx = t.max(0)
out.append([type(mx).__name__, type(mx.values).__name__, type(mx.indices).__name__])
out.append([type(a).__name__ for a in t] + [type(a).__name__ for a in reversed(t)])
out.append([type(t.shape).__name__, type(t.tolist()).__name__, type(t.sum().item()).__name__])
""",
    "comparing_with_other_objects": """
class My(torch.Tensor): pass
t = torch.ones(2).as_subclass(My)
out = [t == None, t != None, t == "a", None == t, "a" != t, t == 1, type(t == 1).__name__]
""",
    "mode_compares_with_other_objects": """
from torch.overrides import BaseTorchFunctionMode
x = torch.ones(2)
with BaseTorchFunctionMode():
    out = [x == None, x != None, None == x, x == 1, nn.Parameter(torch.zeros(1)).requires_grad]
""",
    "gradients_through_subclass": """
class My(torch.Tensor): pass
x = torch.arange(6.).reshape(2, 3).requires_grad_()
t = x.as_subclass(My)
w = torch.linspace(-1, 1, 12).reshape(4, 3).requires_grad_()
y = F.linear(t.tanh(), w) * t.sum()
loss = (y ** 2).mean()
loss.backward()
g, = torch.autograd.grad((t.exp() * w[0]).sum(), x, create_graph=True)
h, = torch.autograd.grad(g.sum(), x)
out = [type(loss).__name__, loss, x.grad, w.grad, type(x.grad).__name__, type(g).__name__, g, h,
       t.is_leaf, t.requires_grad]
""",
    "module_on_subclass_input": """
class My(torch.Tensor): pass
m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
with torch.no_grad():
    for i, p in enumerate(m.parameters()):
        p.copy_(torch.linspace(-1, 1, p.numel()).reshape(p.shape) * (i + 1))
x = torch.arange(6.).reshape(2, 3).as_subclass(My)
y = m(x)
loss = F.cross_entropy(y, torch.tensor([0, 1]))
loss.backward()
out = [type(y).__name__, type(loss).__name__, y, m[0].weight.grad, type(m[0].weight).__name__,
       type(m[0].weight * 2).__name__]
""",
    "functions_the_override_sees": """
with torch.autocast("cpu"):  # (flowgrad wraps the functions autocast casts for, once)
    pass
calls = []
class Log(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        calls.append(func)
        return super().__torch_function__(func, types, args, kwargs)
t = torch.arange(3.).as_subclass(Log)
a = torch.add(t, 1); b = t.mul(2); c = F.relu(t); d = torch.cat([t, t])
seen = [func in calls for func in (torch.add, torch.Tensor.mul, F.relu, torch.cat)]
calls.clear(); e = t + 1; f = 2 * t; g = t - 1; h = t @ t; k = -t; m = t / 2; n = t > 1
seen.append([func in calls for func in (torch.Tensor.add, torch.Tensor.mul, torch.Tensor.sub,
                                          torch.Tensor.matmul, torch.Tensor.neg,
                                          torch.Tensor.div, torch.Tensor.gt)])
calls.clear(); torch.ones(3) @ t
seen.append(calls == [torch.Tensor.matmul])
out = [seen, a, b, c, d, e, f, g, h, k, m, n]
""",
    "override_gets_args_and_kwargs": """
seen = []
class Spy(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        seen.append((len(args), sorted((kwargs or {}).keys()), [t.__name__ for t in types]))
        return super().__torch_function__(func, types, args, kwargs)
t = torch.arange(6.).reshape(2, 3).as_subclass(Spy)
r = torch.sum(t, dim=1, keepdim=True); s = t.sum(1); u = torch.clamp(t, min=1.0)
out = [str(seen), r, s, u]
""",
    "tensor_like_handled_functions": """
HANDLED = {}
class Scalar:
    def __init__(self, n, value): self._n = n; self._value = value
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func not in HANDLED: return NotImplemented
        return HANDLED[func](*args, **(kwargs or {}))
HANDLED[torch.mean] = lambda inp: float(inp._value) / inp._n
HANDLED[torch.add] = lambda a, b: 'added'
out = [torch.mean(Scalar(5, 2)), torch.add(Scalar(1, 1), 2), torch.add(torch.ones(1), Scalar(1, 1))]
""",
    "tensor_like_unhandled_raises": """
class Scalar:
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return NotImplemented
out = torch.exp(Scalar())
""",
    "disable_subclass": """
class My(torch.Tensor): pass
t = torch.ones(2).as_subclass(My)
with torch._C.DisableTorchFunctionSubclass():
    a = t + 1; b = torch.exp(t); c = t.sum()
out = [type(a).__name__, type(b).__name__, type(c).__name__, type(t + 1).__name__]
""",
    "overrides_helpers": """
from torch.overrides import (has_torch_function, handle_torch_function, is_tensor_like,
                             has_torch_function_unary, has_torch_function_variadic)
class My(torch.Tensor): pass
def double(x):
    if has_torch_function_unary(x): return handle_torch_function(double, (x,), x)
    return x * 2
t = torch.ones(2).as_subclass(My)
out = [has_torch_function((t,)), has_torch_function((torch.ones(1),)),
       has_torch_function((torch.nn.Parameter(torch.ones(1)),)), has_torch_function_variadic(1, t),
       is_tensor_like(t), is_tensor_like(3), type(double(t)).__name__,
       type(double(torch.ones(1))).__name__, double(t)]
""",
    "parameter_subclass_by_make_subclass": """
class Params4(torch.nn.Parameter):
    def __new__(cls, data=None, requires_grad=True, quant='nf4'):
        self = torch.Tensor._make_subclass(cls, data, requires_grad)
        self.quant = quant
        return self
p = Params4(torch.ones(2, 2))
m = nn.Linear(2, 2); m.weight = p
y = m(torch.ones(1, 2)); y.sum().backward()
torch.optim.SGD(m.parameters(), lr=0.5).step()
out = [type(m.weight).__name__, m.weight.quant, p.grad, type(y).__name__, type(p * 2).__name__,
       [n for n, _ in m.named_parameters()], m.weight, p.is_leaf]
""",
    "make_subclass_shares_storage": """
class Tagged(torch.Tensor):
    @staticmethod
    def __new__(cls, data, tag):
        r = torch.Tensor._make_subclass(cls, data, False)
        r.tag = tag
        return r
d = torch.ones(3)
t = Tagged(d, 'x')
d[0] = 7
u = t * 3
out = [type(t).__name__, t.tag, t, u, type(u).__name__, hasattr(u, 'tag'), t.requires_grad]
""",
    "methods_of_the_subclass": """
class Scaled(torch.Tensor):
    def double(self): return self * 2
    def __repr__(self): return 'Scaled(' + str(self.tolist()) + ')'
t = torch.ones(2).as_subclass(Scaled)
u = t.double().double()
out = [type(u).__name__, u, repr(u)]
""",
    "in_place_on_subclass": """
class My(torch.Tensor): pass
x = torch.ones(3, requires_grad=True)
t = (x * 1).as_subclass(My)
t.mul_(3); t[0] = 5; t += 1
t.sum().backward()
out = [type(t).__name__, t, x.grad]
""",
    "subclass_order": """
class A(torch.Tensor): pass
class B(A): pass
class C(torch.Tensor): pass
a = torch.ones(2).as_subclass(A); b = torch.ones(2).as_subclass(B)
out = [type(a + b).__name__, type(b + a).__name__, type(torch.add(a, b)).__name__,
       type(torch.stack([a, b])).__name__]
""",
    "unrelated_subclasses_raise": """
class A(torch.Tensor): pass
class C(torch.Tensor): pass
out = torch.ones(2).as_subclass(A) + torch.ones(2).as_subclass(C)
""",
    "override_unwrapping_its_args": """
class Wrapped(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        def unwrap(a): return a.as_subclass(torch.Tensor) if isinstance(a, Wrapped) else a
        return func(*[unwrap(a) for a in args], **(kwargs or {}))
x = torch.arange(3.).as_subclass(Wrapped)
y = x * 2 + torch.exp(x)
out = [type(y).__name__, y]
""",
    "override_changing_results": """
class Clipped(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        r = super().__torch_function__(func, types, args, kwargs)
        if isinstance(r, torch.Tensor) and r.is_floating_point():
            with torch._C.DisableTorchFunctionSubclass():
                r = r.clamp(-1, 1).as_subclass(cls)
        return r
x = torch.tensor([-3., 0.5, 4.], requires_grad=True)
y = (x.as_subclass(Clipped) * 2).exp()
y.sum().backward()
out = [type(y).__name__, y, x.grad]
""",
    "parameter_of_a_subclass": """
class My(torch.Tensor): pass
t = torch.ones(2).as_subclass(My)
p = nn.Parameter(t)
m = nn.Module(); m.w = p
out = [type(p).__name__, isinstance(p, nn.Parameter), isinstance(t, nn.Parameter),
       isinstance(torch.ones(1), nn.Parameter), type(p * 2).__name__, p.requires_grad,
       [n for n, _ in m.named_parameters()]]
""",
    "collate_keeps_the_type": """
class My(torch.Tensor): pass
from torch.utils.data import default_collate
b = default_collate([torch.ones(2).as_subclass(My), torch.zeros(2).as_subclass(My)])
out = [type(b).__name__, b]
""",
    "hooks_and_no_grad": """
class My(torch.Tensor): pass
x = torch.arange(3.).requires_grad_()
t = (x * 2).as_subclass(My)
seen = []
t.register_hook(lambda g: seen.append(type(g).__name__))
with torch.no_grad():
    n = t * 2
(t ** 2).sum().backward()
out = [type(n).__name__, n.requires_grad, x.grad, seen]
""",
    # TorchFunctionMode: every call goes to the innermost mode, plain tensors and factories too
    "mode_logs": """
from torch.overrides import TorchFunctionMode
seen = []
class Log(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        seen.append(func)
        return func(*args, **(kwargs or {}))
x = torch.arange(3.)
with Log():
    a = torch.ones(3); b = x + a; c = x.exp(); d = torch.exp(x); e = F.relu(x)
    f = x[0]; g = x.sum(); h = x.T
checks = [torch.ones in seen, torch.Tensor.add in seen, torch.Tensor.exp in seen,
          torch.exp in seen, F.relu in seen, torch.Tensor.__getitem__ in seen,
          torch.Tensor.sum in seen]
y = x + 1
out = [checks, a, b, c, d, e, f, g, h, type(b).__name__, y]
""",
    "mode_changes_results": """
from torch.overrides import TorchFunctionMode
class Double(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        r = func(*args, **(kwargs or {}))
        if func is torch.Tensor.add or func is torch.add:
            return r * 2
        return r
x = torch.arange(3.)
with Double():
    a = x + 1; b = torch.add(x, 1); c = x.mul(2)
out = [a, b, c, x + 1]
""",
    "mode_nested": """
from torch.overrides import TorchFunctionMode
order = []
class M(TorchFunctionMode):
    def __init__(self, tag): self.tag = tag
    def __torch_function__(self, func, types, args=(), kwargs=None):
        order.append(self.tag)
        return func(*args, **(kwargs or {}))
x = torch.ones(2)
with M('outer'):
    with M('inner'):
        y = torch.exp(x)
out = [order, y]
""",
    "mode_with_subclass": """
from torch.overrides import TorchFunctionMode
seen = []
class Log(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        seen.append([t.__name__ for t in types])
        return func(*args, **(kwargs or {}))
class My(torch.Tensor): pass
t = torch.ones(2).as_subclass(My)
with Log():
    r = torch.exp(t)
out = [seen, type(r).__name__, r]
""",
    "mode_training_step": """
from torch.overrides import TorchFunctionMode
n = [0]
class Count(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        n[0] += 1
        return func(*args, **(kwargs or {}))
m = nn.Linear(3, 2)
with torch.no_grad():
    m.weight.copy_(torch.arange(6.).reshape(2, 3)); m.bias.fill_(0.5)
x = torch.arange(6.).reshape(2, 3)
with Count():
    loss = F.mse_loss(m(x), torch.zeros(2, 2))
loss.backward()
out = [loss, m.weight.grad, n[0] > 0]
""",
    "base_mode": """
from torch.overrides import BaseTorchFunctionMode
with BaseTorchFunctionMode():
    y = torch.ones(2) * 3
out = [y]
""",
    "mode_get_current": """
from torch.overrides import (TorchFunctionMode, _get_current_function_mode,
                             _get_current_function_mode_stack)
class M(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))
m = M()
with m:
    a = _get_current_function_mode() is m; b = len(_get_current_function_mode_stack())
out = [a, b, _get_current_function_mode() is None]
""",
}


def _norm(v):
    if hasattr(v, "detach") and hasattr(v, "dtype"):
        return ("T", type(v).__name__, str(v.dtype).split(".")[-1], tuple(v.shape),
                np.array(v.detach().numpy()))
    if isinstance(v, (list, tuple)):
        return [_norm(x) for x in v]
    return v


def _run(source, shim):
    try:
        namespace = exec_program(PRELUDE + source, shim, "__case__")
    except Exception as error:  # noqa: BLE001 - raise/no-raise is part of the result
        return "raise", type(error).__name__
    return "ok", _norm(namespace["out"])


def _same(ours, theirs, path="out"):
    if isinstance(theirs, list):
        assert isinstance(ours, list) and len(ours) == len(theirs), path
        for i, (a, b) in enumerate(zip(ours, theirs)):
            _same(a, b, f"{path}[{i}]")
    elif isinstance(theirs, tuple) and theirs and theirs[0] == "T":
        assert ours[:4] == theirs[:4], (path, ours[:4], theirs[:4])
        np.testing.assert_allclose(ours[4], theirs[4], rtol=1e-6, atol=1e-7, err_msg=path)
    else:
        assert ours == theirs, (path, ours, theirs)


def assert_snippet_matches_torch(source):
    """Run `source` with torch and with flowgrad: the same raise/no-raise (and exception
    type), else the same `out`."""
    theirs = _run(source, shim=False)
    ours = _run(source, shim=True)
    assert ours[0] == theirs[0], (ours, theirs)
    if theirs[0] == "raise":
        assert ours[1] == theirs[1]
    else:
        _same(ours[1], theirs[1])


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("name", list(CASES))
def test_subclass_case_matches_torch(name):
    assert_snippet_matches_torch(CASES[name])


def test_plain_tensors_never_call_the_protocol():
    """A plain tensor's results stay plain and the engine runs the rules with the protocol
    off: a subclass's override is not called during backward (torch's C++ backward)."""
    calls = []

    class Counted(flowgrad.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            calls.append(func)
            return super().__torch_function__(func, types, args, kwargs)

    x = flowgrad.arange(3.0, requires_grad=True)
    t = x.as_subclass(Counted)
    y = (t.exp() * 2).sum()
    assert type(flowgrad.ones(2) + 1) is flowgrad.Tensor
    n = len(calls)
    y.backward()  # (autograd.backward itself dispatches, as torch's; its rules do not)
    assert [f.__name__ for f in calls[n:]] == ["backward"]
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp(np.arange(3.0)), rtol=1e-6)


_CHECKPOINT_SCRIPT = '''
import json, sys
lib = sys.argv[1]
torch = __import__(lib)

class My(torch.Tensor):
    pass

class Tagged(torch.Tensor):
    @staticmethod
    def __new__(cls, data, tag):
        r = torch.Tensor._make_subclass(cls, data, False)
        r.tag = tag
        return r

def describe(path):
    r = torch.load(path, weights_only=False)
    return {k: [type(v).__name__, v.tolist(), getattr(v, "tag", None)] for k, v in r.items()}

if sys.argv[2] == "write":
    torch.save({"t": torch.arange(3.0).as_subclass(My), "g": Tagged(torch.ones(2), "hi"),
                "p": torch.zeros(1)}, sys.argv[3])
else:
    print(json.dumps(describe(sys.argv[3])))
'''


def checkpoint_runner(tmp_path, source):
    """run(lib, mode, path): the checkpoint script `source` run in a fresh process with
    `lib` ("torch" or "flowgrad") as its torch, `mode` "write" or "read"; its stdout."""
    script = tmp_path / "ckpt.py"
    script.write_text(source)

    def run(lib, mode, path):
        done = subprocess.run([sys.executable, str(script), lib, mode, str(path)],
                              capture_output=True, text=True, timeout=300, check=True)
        return done.stdout
    return run


def test_checkpoints_keep_subclass_types_both_ways(tmp_path):
    """torch.save of subclass tensors (torch's _rebuild_from_type_v2) read by flowgrad, and
    flowgrad's written so, read by torch: the types and attributes come back on both sides."""
    run = checkpoint_runner(tmp_path, _CHECKPOINT_SCRIPT)
    expected = {"t": ["My", [0.0, 1.0, 2.0], None], "g": ["Tagged", [1.0, 1.0], "hi"],
                "p": ["Tensor", [0.0], None]}
    run("torch", "write", tmp_path / "a.pt")
    run("flowgrad", "write", tmp_path / "b.pt")
    assert json.loads(run("flowgrad", "read", tmp_path / "a.pt")) == expected
    assert json.loads(run("torch", "read", tmp_path / "b.pt")) == expected
    assert json.loads(run("flowgrad", "read", tmp_path / "b.pt")) == expected


def test_flowgrad_own_subclasses_opt_out():
    """flowgrad's own Tensor subclasses (Parameter, Buffer, the typed classes, lazy
    placeholders, vmap's and nn.Graph's tensors) opt out of the protocol, so importing
    flowgrad leaves plain calls without a dispatch check (EVERY_CALL stays empty: one
    dispatching class would cost every public call ~0.5 us)."""
    import flowgrad.func.batched
    import flowgrad.graph.tracer  # noqa: F401 - defines ValueShaped

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    ours = [c for c in subclasses(flowgrad.Tensor) if c.__module__.startswith("flowgrad")]
    assert len(ours) >= 15
    dispatching = [c.__qualname__ for c in ours if flowgrad.overrides.has_torch_function_unary(
        object.__new__(c))]
    assert not dispatching, f"flowgrad classes that dispatch: {dispatching}"
    code = "import flowgrad, flowgrad.graph, flowgrad.func; print(flowgrad.errors.EVERY_CALL)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, check=True)
    assert done.stdout.strip() == "[]"


def test_a_mode_leaves_tensor_as_it_was():
    """Entering a mode puts dispatching methods on Tensor; leaving the last one puts the
    very same methods back, and a process without subclasses goes back to no dispatch
    check at all (in a fresh process: other tests define subclasses)."""
    code = (
        "import flowgrad\n"
        "from flowgrad.overrides import BaseTorchFunctionMode\n"
        "before = dict(vars(flowgrad.Tensor))\n"
        "with BaseTorchFunctionMode():\n"
        "    inside = flowgrad.errors.EVERY_CALL == [] or flowgrad.Tensor.exp is before['exp']\n"
        "    y = flowgrad.ones(2).exp()\n"
        "after = dict(vars(flowgrad.Tensor))\n"
        "changed = [k for k in before if after.get(k) is not before[k]]\n"
        "print(changed, flowgrad.errors.EVERY_CALL, inside)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, check=True)
    assert done.stdout.strip() == "[] [] True"


def test_switches_are_per_thread():
    """The protocol's switches are per thread, as torch's: the engine turning it off for a
    backward (or DisableTorchFunction) in one thread leaves another thread's calls
    dispatching."""
    import threading

    class Marked(flowgrad.Tensor):
        pass

    t = flowgrad.ones(2).as_subclass(Marked)
    seen = []
    with flowgrad._C.DisableTorchFunction():
        worker = threading.Thread(target=lambda: seen.append(type(t + 1)))
        worker.start()
        worker.join()
        here = type(t + 1)
    assert seen == [Marked] and here is flowgrad.Tensor
