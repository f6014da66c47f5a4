"""Every keyword torch accepts, flowgrad accepts: walks flow.*, Tensor methods and F.* that
torch also has (and the Python-level functions of linalg, special, fft, autograd, nn.init and
nn.utils, and the constructors of nn, optim, lr_scheduler and utils.data classes), and compares
parameter names with torch's.

torch's names come from, in order: inspect.signature of Python-defined torch functions; the
native schemas the Python argument parser binds keywords with (torch._C's
_jit_get_schemas_for_operator: `self` is `input` for functions, TorchScript-only overloads
and `out=` arguments left out); the lambdas of torch.overrides.get_testing_overrides() where
neither exists. (The lambdas alone misname some: torch.where(x=, y=) and topk(descending=)
are refused by torch itself.)
"""
import inspect
import io
import warnings

import pytest
import torch

import flowgrad as flow
import flowgrad.nn.functional as F

# flowgrad supports none of these: no out= tensors, layouts, pinned memory or named tensors
UNSUPPORTED = {"out", "layout", "pin_memory", "names"}

# Mismatches flowgrad keeps (each with why), or that a change elsewhere is fixing: the
# walk reports them and the test below xfails them.
KNOWN = {
    # torch.result_type(scalar=, tensor=) is the (Scalar, Tensor) overload's spelling
    "flow.result_type": {"scalar"},
}
_OVERRIDES = torch.overrides.get_testing_overrides()
_KEPT_KINDS = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def _python_names(fn, method):
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    if any(p.kind == p.VAR_KEYWORD for p in params):
        return None  # takes anything: nothing to compare
    names = [p.name for p in params if p.kind in _KEPT_KINDS]
    return set(names[1:] if method else names)


# TorchScript's own overloads (tensor(t: float), normal's functional form), not Python's
_SCRIPT_ONLY = {"bool", "int", "float", "complex", "functional"}


# overloads torch binds for its functions only: the Tensor methods refuse their keywords
# (`x.mm(y, out_dtype=...)` is a TypeError in torch; test_function_only_overloads shows it)
_FUNCTION_ONLY = {("mm", "dtype"), ("bmm", "dtype"), ("addmm", "dtype"), ("baddbmm", "dtype")}


def _schema_names(name, method):
    """Keyword names of the aten::name overloads Python binds; None without a schema."""
    schemas = torch._C._jit_get_schemas_for_operator(f"aten::{name}")
    if not schemas:
        return None
    names = set()
    for schema in schemas:
        args = schema.arguments
        types = [str(a.type) for a in args]
        overload = schema.overload_name
        if any("Dimname" in t for t in types) or overload in _SCRIPT_ONLY:
            continue  # named-tensor overloads, TorchScript's scalar forms
        if overload.endswith("out"):
            continue  # out= variants (normal.out has a `self` the function lacks)
        if method and (name, overload) in _FUNCTION_ONLY:
            continue
        if not any("Tensor" in t for t in types) and not any(a.name == "device" for a in args):
            continue  # TorchScript's int/float/str overloads
        if args and types[0].startswith("List[") and args[0].name in ("a", "self"):
            continue  # TorchScript's list overloads (eq(a, b) of lists, sort(reverse=))
        for a in args:
            if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write:
                continue  # out= tensors
            if a.name == "self":
                if not method:
                    names.add("input")
            else:
                names.add(a.name)
    return names


def torch_keywords(obj, name, method):
    """The keyword names torch's `obj` accepts, or None when they cannot be known."""
    names = _python_names(obj, method)
    if names is None and not hasattr(obj, "__code__"):
        names = _schema_names(name, method)
        if names is None and obj in _OVERRIDES:
            names = _python_names(_OVERRIDES[obj], method)
    return None if names is None else names - UNSUPPORTED


def flow_keywords(fn):
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind == p.VAR_KEYWORD for p in params):
        return None
    return {p.name for p in params if p.kind in _KEPT_KINDS}


# namespaces compared where torch's function is written in Python (a native schema is named
# after the aten op, not this spelling: linalg.norm is aten::linalg_norm), and those whose
# classes' constructors are compared (nn.Linear(bias=), optim.SGD(foreach=), ...)
_PYTHON_SPACES = [("linalg", flow.linalg, torch.linalg), ("special", flow.special, torch.special),
                  ("fft", flow.fft, torch.fft), ("autograd", flow.autograd, torch.autograd),
                  ("nn.init", flow.nn.init, torch.nn.init),
                  ("nn.utils", flow.nn.utils, torch.nn.utils)]
_CLASS_SPACES = [("nn", flow.nn, torch.nn), ("optim", flow.optim, torch.optim),
                 ("lr_scheduler", flow.optim.lr_scheduler, torch.optim.lr_scheduler),
                 ("data", flow.utils.data, torch.utils.data)]


def _pairs():
    spaces = [("flow", flow, torch, False), ("Tensor", flow.Tensor, torch.Tensor, True),
              ("F", F, torch.nn.functional, False)]
    for label, ours, theirs, method in spaces:
        for name in sorted(dir(ours)):
            if name.startswith("_"):
                continue
            fn, ref = getattr(ours, name), getattr(theirs, name, None)
            if ref is None or not callable(fn) or isinstance(fn, type) or isinstance(ref, type):
                continue
            yield f"{label}.{name}", name, fn, ref, method
    for label, ours, theirs in _PYTHON_SPACES:
        for name in sorted(dir(ours)):
            fn, ref = getattr(ours, name), getattr(theirs, name, None)
            if not name.startswith("_") and callable(fn) and inspect.isfunction(ref):
                yield f"{label}.{name}", name, fn, ref, False
    for label, ours, theirs in _CLASS_SPACES:
        for name in sorted(dir(ours)):
            cls, ref = getattr(ours, name), getattr(theirs, name, None)
            if not name.startswith("_") and isinstance(cls, type) and isinstance(ref, type):
                yield f"{label}.{name}", name, cls.__init__, ref.__init__, True


def _missing():
    """{'flow.flip': {'dims'}, ...}: torch's keywords each flowgrad function refuses."""
    out = {}
    for label, name, fn, ref, method in _pairs():
        ours = flow_keywords(fn)
        theirs = torch_keywords(ref, name, method)
        if ours is not None and theirs:
            missing = theirs - ours
            if missing:
                out[label] = missing
    return out


MISSING = _missing()


def test_the_walk_compares_many_functions():
    compared = sum(1 for label, name, fn, ref, method in _pairs()
                   if flow_keywords(fn) is not None and torch_keywords(ref, name, method))
    assert compared > 300, compared


def test_every_torch_keyword_is_accepted():
    unexpected = {k: sorted(v) for k, v in MISSING.items() if k not in KNOWN}
    assert not unexpected, f"flowgrad refuses keywords torch accepts: {unexpected}"


@pytest.mark.parametrize("label", sorted(KNOWN))
def test_known_mismatches_in_files_owned_elsewhere(label):
    space, name = label.split(".")
    ours = getattr({"flow": flow, "Tensor": flow.Tensor, "F": F}[space], name)
    assert flow_keywords(ours) is not None  # the entry names a function the walk compares
    assert MISSING.get(label, set()) <= KNOWN[label], MISSING.get(label)
    if not MISSING.get(label):
        return  # fixed where it is defined: the entry can go from KNOWN
    pytest.xfail(f"{label} refuses torch's {sorted(MISSING[label])}: see its KNOWN entry")


def test_the_schema_source_agrees_with_torch_itself():
    x = torch.ones(2, 3)
    assert torch.flip(x, dims=(0,)).shape == (2, 3)  # a name the walk requires
    assert "dims" in torch_keywords(torch.flip, "flip", False)
    assert torch_keywords(torch.where, "where", False) >= {"condition", "input", "other"}
    assert "descending" not in torch_keywords(torch.topk, "topk", False)
    with pytest.raises(TypeError):
        torch.topk(x, 1, descending=True)  # the override lambda's name, refused by torch


def test_keywords_work_when_called():
    x = flow.arange(6.0).reshape(2, 3)
    assert flow.flip(x, dims=(0,)).tolist() == [[3.0, 4.0, 5.0], [0.0, 1.0, 2.0]]
    assert x.flip(dims=[1]).tolist() == [[2.0, 1.0, 0.0], [5.0, 4.0, 3.0]]
    assert x.flip(0, 1).tolist() == [[5.0, 4.0, 3.0], [2.0, 1.0, 0.0]]
    assert flow.zeros(size=(2, 2)).shape == (2, 2)
    assert x.repeat(repeats=(1, 2)).shape == (2, 6)
    assert flow.dot(flow.ones(2), tensor=flow.ones(2)).item() == 2.0
    assert flow.mm(x, x.T, out_dtype=flow.float64).dtype is flow.float64
    assert flow.dropout(x, p=0.5, train=False).tolist() == x.tolist()
    assert flow.det(input=flow.eye(2)).item() == 1.0
    assert F.one_hot(input=flow.tensor([1]), num_classes=2).tolist() == [[0, 1]]
    assert flow.bernoulli(input=flow.ones(2)).tolist() == [1.0, 1.0]
    with pytest.raises(TypeError, match="both positionally and as a keyword"):
        flow.flip(x, 0, dims=(0,))


def test_activation_and_writer_keywords_work_when_called():
    x = flow.tensor([-1.0, 2.0])
    for ours, theirs in ((flow, torch), (F, torch.nn.functional)):
        assert ours.threshold_(x.clone(), threshold=0.5, value=9.0).tolist() == \
            theirs.threshold_(torch.tensor([-1.0, 2.0]), threshold=0.5, value=9.0).tolist()
    got = F.elu_(flow.tensor([-1.0, 1.0]), alpha=1.5, scale=2.0, input_scale=0.5)
    want = torch.nn.functional.elu_(torch.tensor([-1.0, 1.0]), 1.5, scale=2.0, input_scale=0.5)
    assert got.tolist() == pytest.approx(want.tolist())
    for f in (F.softmax, F.log_softmax, F.softmin):
        kw = f(x, dim=0, _stacklevel=5)
        assert kw.tolist() == f(x, 0).tolist()
        assert f(x, 0, 3, flow.float64).dtype is flow.float64  # torch's positional order
        # (the third is _stacklevel, as torch's F.softmax reads it: a dtype there is ignored)
        want = getattr(torch.nn.functional, f.__name__)(torch.tensor([-1.0]), 0, torch.float64)
        assert f(x, 0, flow.float64).dtype is flow.float32 and want.dtype is torch.float32
    draws = [flow.rrelu(flow.full((4,), -1.0), 0.1, 0.3, True,
                        generator=flow.Generator().manual_seed(3)).tolist() for _ in range(2)]
    assert draws[0] == draws[1] and len(set(draws[0])) == 4
    inplace = F.rrelu_(flow.full((4,), -1.0), 0.1, 0.3, True, flow.Generator().manual_seed(3))
    assert inplace.tolist() == draws[0]
    y = flow.zeros(2)
    assert y.copy_(other=flow.ones(2)).tolist() == [1.0, 1.0]
    assert y.copy_(src=flow.zeros(2)).tolist() == [0.0, 0.0]  # the schema's name (torch: no)
    assert y.copy_(flow.ones(2), False).tolist() == [1.0, 1.0]
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'other'"):
        y.copy_()
    with pytest.raises(TypeError, match="takes the source once"):
        y.copy_(flow.ones(2), src=flow.ones(2))
    assert torch.zeros(2).copy_(other=torch.ones(2)).tolist() == [1.0, 1.0]
    assert all(-3.0 <= v < -2.0 for v in y.uniform_(**{"from": -3.0, "to": -2.0}).tolist())
    assert all(4.0 <= v < 5.0 for v in y.uniform_(4.0, 5.0).tolist())
    with pytest.raises(TypeError, match="unexpected keyword argument 'high'"):
        y.uniform_(high=2.0)


def test_shape_split_and_save_keywords_work_when_called():
    calls = [
        lambda m, x: x.reshape(shape=(3, 2)), lambda m, x: m.reshape(x, shape=[6]),
        lambda m, x: x.reshape(3, 2), lambda m, x: x.reshape((2, 3)),
        lambda m, x: x.view(size=(3, 2)), lambda m, x: x.view(dtype=m.int32),
        lambda m, x: x.view(m.int32), lambda m, x: x.view(6),
        lambda m, x: x.permute(dims=(1, 0)), lambda m, x: m.permute(x, dims=[1, 0]),
        lambda m, x: x.permute(1, 0), lambda m, x: x[:1].expand(size=(4, 3)),
        lambda m, x: x[:1].expand(4, 3, implicit=True), lambda m, x: x[:1].expand((2, 3)),
        lambda m, x: m.expand_copy(x[:1], size=(2, 3), implicit=True),
        lambda m, x: m.expand_copy(x[:1], (2, 3)), lambda m, x: x.broadcast_to(size=(2, 2, 3)),
        lambda m, x: m.broadcast_to(x, size=(2, 2, 3)),
        lambda m, x: m.swapaxes(x, axis0=0, axis1=1), lambda m, x: x.swapaxes(axis0=1, axis1=0),
        lambda m, x: x.swapaxes(0, 1), lambda m, x: x.swapdims(dim0=0, dim1=1),
        lambda m, x: x.cpu(memory_format=m.preserve_format if m is torch else None),
    ]
    for call in calls:
        want = call(torch, torch.arange(6, dtype=torch.float32).reshape(2, 3))
        got = call(flow, flow.arange(6.0).reshape(2, 3))
        assert got.tolist() == want.tolist() and str(got.dtype)[-5:] == str(want.dtype)[-5:]
    pieces = [
        lambda m, x: m.tensor_split(x, sections=4), lambda m, x: x.tensor_split(indices=[1, 3]),
        lambda m, x: m.tensor_split(x, tensor_indices_or_sections=m.tensor(2)),
        lambda m, x: x.tensor_split(tensor_indices_or_sections=m.tensor([1, 4])),
        lambda m, x: m.tensor_split(x, 3, 0), lambda m, x: m.tensor_split(x, [2], dim=0),
        lambda m, x: m.hsplit(x, indices=[2]), lambda m, x: x.hsplit(sections=3),
        lambda m, x: x.hsplit(2), lambda m, x: x.reshape(3, 2).vsplit(indices=[1]),
        lambda m, x: m.vsplit(x.reshape(3, 2), sections=3),
        lambda m, x: x.reshape(1, 2, 3).dsplit(indices=[1]),
        lambda m, x: m.dsplit(x.reshape(1, 2, 3), 3), lambda m, x: x.split(split_size=4),
        lambda m, x: x.split([2, 4]), lambda m, x: m.split(x, split_size_or_sections=2),
    ]
    for call in pieces:
        want = call(torch, torch.arange(6))
        got = call(flow, flow.arange(6))
        assert [p.tolist() for p in got] == [p.tolist() for p in want]
    x = flow.arange(6)
    for bad in (lambda: x.reshape(2, 3, shape=(6,)), lambda: x.view(6, size=(6,)),
                lambda: x.view(size=(6,), dtype=flow.int32), lambda: x.permute(0, dims=(0,)),
                lambda: x.expand(6, size=(6,)), lambda: flow.tensor_split(x, 2, sections=2),
                lambda: flow.tensor_split(x), lambda: flow.tensor_split(x, sections=[1, 2]),
                lambda: flow.tensor_split(x, indices=2), lambda: flow.hsplit(x, 2, indices=[1]),
                lambda: flow.tensor_split(x, tensor_indices_or_sections=2)):
        with pytest.raises(TypeError):
            bad()
    buf = io.BytesIO()
    flow.save({"w": x}, buf, pickle_module=None, pickle_protocol=4,
              _use_new_zipfile_serialization=False, _disable_byteorder_record=True)
    buf.seek(0)
    assert flow.load(buf)["w"].tolist() == x.tolist()


@pytest.mark.parametrize("module", [torch, flow])
def test_hardtanh_deprecated_keywords(module):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        layer = module.nn.Hardtanh(min_value=-2.0, max_value=0.5)
    assert [w.category for w in caught] == [FutureWarning, FutureWarning]
    assert layer(module.tensor([-3.0, 0.0, 3.0])).tolist() == [-2.0, 0.0, 0.5]
    assert [n for n, _ in module.nn.SyncBatchNorm(3, bias=False).named_parameters()] == ["weight"]


@pytest.mark.parametrize("module", [torch, flow])
def test_autograd_deprecated_keywords(module):
    x = module.tensor([1.0, 2.0], requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module.autograd.backward((x * x).sum(), grad_variables=module.tensor(2.0))
        g, = module.autograd.grad((x * x).sum(), x, only_inputs=False)
    assert [w.category for w in caught] == [FutureWarning, FutureWarning]
    assert x.grad.tolist() == [4.0, 8.0] and g.tolist() == [2.0, 4.0]
    with pytest.raises(RuntimeError, match="grad_variables"):
        module.autograd.backward((x * x).sum(), x, grad_variables=x)


@pytest.mark.parametrize("module", [torch, flow])
def test_accelerator_error_classes_and_distributed_flag(module):
    assert issubclass(module.OutOfMemoryError, RuntimeError)
    assert issubclass(module.AcceleratorError, RuntimeError)
    assert module.is_distributed(module.ones(1)) is False
    try:
        raise module.OutOfMemoryError("x")
    except RuntimeError as error:
        assert str(error) == "x"


@pytest.mark.parametrize("name", sorted(n for n, _ in _FUNCTION_ONLY))
def test_function_only_overloads(name):
    """torch's methods refuse these overloads' out_dtype, positional or keyword, and so do
    flowgrad's (its in-place forms once read a third operand as the dtype)."""
    for lib in (torch, flow):
        a = lib.ones(2, 2, 2) if name in ("bmm", "baddbmm") else lib.ones(2, 2)
        args = (a,) if name in ("mm", "bmm") else (a, a)
        for call in (lambda: getattr(a, name)(*args, out_dtype=lib.float32),
                     lambda: getattr(a, name)(*args, lib.float32)):
            with pytest.raises(TypeError):
                call()
        if name in ("addmm", "baddbmm"):
            with pytest.raises(TypeError, match=f"{name}_"):
                getattr(a, name + "_")(a, a, a)
