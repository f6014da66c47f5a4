"""Names torch code imports for its own use, against torch's: autograd.Variable (legacy),
utils.hooks (RemovableHandle over a user's own dicts, unserializable_hook,
warn_if_has_hooks), and the type aliases of torch.types, torch.nn.common_types and
torch.optim.optimizer that custom layers and optimizers annotate with."""
import importlib
import pickle
import typing
import warnings
from collections import OrderedDict

import numpy as np
import pytest
import torch
import torch.nn.common_types
import torch.optim.optimizer
import torch.types
import torch.utils.hooks

import flowgrad as flow
import flowgrad.nn.common_types
import flowgrad.types
import flowgrad.utils.hooks


def _variable_cases(m):
    V = m.autograd.Variable
    x = m.ones(2)
    v = V(x, requires_grad=True)
    w = m.ones(2, requires_grad=True) * 3
    vw = V(w)
    with m.no_grad():
        v.add_(1)  # the same storage: x sees the write
    return [v is x, v.requires_grad, x.requires_grad, x.tolist(), V(x * 2).requires_grad,
            vw is w, vw.grad_fn is None, vw.requires_grad, isinstance(x, V),
            isinstance(1, V), isinstance(v, m.Tensor)]


def test_variable_as_torch():
    assert _variable_cases(flow) == _variable_cases(torch)
    for m in (torch, flow):
        with pytest.raises(TypeError, match="Variable data has to be a tensor"):
            m.autograd.Variable([1, 2])
        with pytest.warns(UserWarning, match="volatile was removed"):
            assert not m.autograd.Variable(m.ones(1), volatile=True).requires_grad


def _handle_cases(mod):
    hooks, extra, extra2 = OrderedDict(), OrderedDict(), OrderedDict()  # (weakly held)
    a = mod.RemovableHandle(hooks)
    b = mod.RemovableHandle(hooks, extra_dict=extra)
    c = mod.RemovableHandle(hooks, extra_dict=[extra, extra2])
    for h in (a, b, c):
        hooks[h.id] = print
    extra[b.id] = extra[c.id] = extra2[c.id] = True
    ids = [b.id - a.id, c.id - b.id]
    b.remove()
    after_b = (len(hooks), len(extra))
    with c:
        pass
    after_c = (len(hooks), len(extra), len(extra2))
    c.remove()  # twice: nothing left to remove
    copy = pickle.loads(pickle.dumps(a))  # (with its dict, copied alongside)
    copy.remove()
    alive = len(hooks)
    d = mod.RemovableHandle(OrderedDict())  # held weakly: gone, and remove() is fine
    d.remove()
    return ids, after_b, after_c, alive, copy.id == a.id


def test_removable_handle_as_torch():
    assert _handle_cases(flow.utils.hooks) == _handle_cases(torch.utils.hooks)


def test_unserializable_hook_and_warn_if_has_hooks_as_torch():
    for m in (torch, flow):
        x = m.ones(2, requires_grad=True)
        x.register_hook(lambda g: g)
        with pytest.warns(UserWarning, match="will not be serialized"):
            m.utils.hooks.warn_if_has_hooks(x)
        y = m.ones(2, requires_grad=True)
        y.register_hook(m.utils.hooks.unserializable_hook(lambda g: g))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            m.utils.hooks.warn_if_has_hooks(y)


COMMON_TYPES = ["_scalar_or_tuple_any_t", "_scalar_or_tuple_1_t", "_scalar_or_tuple_2_t",
                "_scalar_or_tuple_3_t", "_scalar_or_tuple_4_t", "_scalar_or_tuple_5_t",
                "_scalar_or_tuple_6_t", "_size_any_t", "_size_1_t", "_size_2_t", "_size_3_t",
                "_size_4_t", "_size_5_t", "_size_6_t", "_size_any_opt_t", "_size_2_opt_t",
                "_size_3_opt_t", "_ratio_2_t", "_ratio_3_t", "_ratio_any_t", "_tensor_list_t",
                "_maybe_indices_t"]
# (IntLikeType and the like are int | SymInt in torch: plain int here, without symbolic ints)
TYPES = ["Number", "Device", "FileLike", "_bool", "_complex", "_float", "_int", "_str",
         "_bytes", "_dtype", "_device", "_size", "_TensorOrTensors", "_TensorOrOptionalTensors"]


def _hints(module, names):
    """Each alias used in an annotation, resolved by typing as a checker would."""
    out = {}
    for name in names:
        def f(x):
            return x
        f.__annotations__ = {"x": name}
        out[name] = typing.get_type_hints(f, vars(module))["x"]
    return out


@pytest.mark.parametrize("where, names", [("common_types", COMMON_TYPES), ("types", TYPES)])
def test_type_aliases_exist_and_resolve_as_torch(where, names):
    ours = flow.nn.common_types if where == "common_types" else flow.types
    theirs = torch.nn.common_types if where == "common_types" else torch.types
    ours_h, theirs_h = _hints(ours, names), _hints(theirs, names)
    for name in names:
        # the same shape of alias (Union members, tuple arities), torch's types mapped
        assert typing.get_origin(ours_h[name]) == typing.get_origin(theirs_h[name]), name
        assert len(typing.get_args(ours_h[name])) == len(typing.get_args(theirs_h[name])), name
    assert flow.types._Number == torch.types._Number == (int, float, bool)


def test_optimizer_annotations_exist():
    for m in ("torch", "flowgrad"):
        from_optim = vars(importlib.import_module(m + ".optim.optimizer"))
        assert typing.get_origin(from_optim["ParamsT"]) is not None
        assert typing.get_origin(from_optim["StateDict"]) is dict

    class Momentumless(flow.optim.Optimizer):  # a custom optimizer annotated as torch's
        def __init__(self, params: flow.optim.optimizer.ParamsT, lr: float = 0.1):
            super().__init__(params, {"lr": lr})

        def step(self, closure=None):
            for group in self.param_groups:
                for p in group["params"]:
                    p.data.add_(p.grad, alpha=-group["lr"])

    w = flow.ones(2, requires_grad=True)
    opt = Momentumless([w])
    (w * w).sum().backward()
    opt.step()
    np.testing.assert_allclose(w.detach().numpy(), [0.8, 0.8])


@pytest.mark.parametrize("path, names", [
    ("nn.utils.spectral_norm", ["SpectralNorm", "spectral_norm", "remove_spectral_norm"]),
    ("nn.utils.weight_norm", ["WeightNorm", "weight_norm", "remove_weight_norm"]),
    ("nn.utils.prune", ["BasePruningMethod", "l1_unstructured", "remove", "is_pruned"]),
])
def test_hook_based_reparametrization_modules_import_as_torch(path, names):
    """`from torch.nn.utils.spectral_norm import spectral_norm` (GAN code's spelling) and
    its siblings; the package attribute stays the function, as torch's."""
    for m in ("torch", "flowgrad"):
        module = importlib.import_module(f"{m}.{path}")
        assert all(callable(getattr(module, name)) for name in names)
    layer = flow.nn.Linear(3, 2)
    from flowgrad.nn.utils.spectral_norm import SpectralNorm, spectral_norm
    assert flow.nn.utils.spectral_norm is spectral_norm
    spectral_norm(layer)
    assert any(isinstance(h, SpectralNorm) for h in layer._forward_pre_hooks.values())


def _handles(name):
    m = importlib.import_module(name)
    optimizer = importlib.import_module(name + ".optim.optimizer")
    module = importlib.import_module(name + ".nn.modules.module")
    layer, x = m.nn.Linear(1, 1), m.ones(1, requires_grad=True)
    y = x * 2
    opt = m.optim.SGD(layer.parameters(), 0.1)
    return [layer.register_forward_hook(lambda *a: None, always_call=True, with_kwargs=True),
            layer.register_full_backward_hook(lambda *a: None),
            layer.register_state_dict_pre_hook(lambda *a: None),
            x.register_hook(lambda g: g), x.register_post_accumulate_grad_hook(lambda p: None),
            y.grad_fn.register_hook(lambda *a: None), y.grad_fn.register_prehook(lambda *a: None),
            m.autograd.graph.register_multi_grad_hook([x], lambda g: None),
            opt.register_step_pre_hook(lambda *a: None),
            opt.register_state_dict_post_hook(lambda *a: None),
            module.register_module_forward_hook(lambda *a: None, always_call=True),
            optimizer.register_optimizer_step_post_hook(lambda *a: None)], layer, x


@pytest.mark.parametrize("name", ["torch", "flowgrad"])
def test_every_hook_handle_is_a_utils_hooks_removable_handle(name):
    """As torch's: every registration returns a torch.utils.hooks.RemovableHandle (code
    checks isinstance), and removing each leaves no trace."""
    handle_class = importlib.import_module(name + ".utils.hooks").RemovableHandle
    handles, layer, x = _handles(name)
    assert all(isinstance(h, handle_class) for h in handles)
    for h in handles:
        h.remove()
    assert not (layer._forward_hooks or layer._forward_hooks_with_kwargs or
                layer._forward_hooks_always_called or layer._backward_hooks)
    (x * 3).sum().backward()
    assert x.grad.tolist() == [3.0]
