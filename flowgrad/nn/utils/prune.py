"""Pruning, as torch.nn.utils.prune: a parameter `name` of a module is re-expressed as
`name_orig` (the trained parameter) times `name_mask` (a buffer of zeros and ones), recomputed
by a forward pre-hook before every call, so the pruned entries stay zero while `name_orig`
trains. Pruning again on the same parameter refines the mask (a `PruningContainer` keeps the
methods in order); `remove` makes the pruning permanent.

>>> import flowgrad as flow
>>> from flowgrad.nn.utils import prune
>>> m = flow.nn.Linear(4, 2)
>>> with flow.no_grad():
...     _ = m.weight.copy_(flow.arange(8.0).reshape(2, 4) - 3.5)
>>> _ = prune.l1_unstructured(m, "weight", amount=0.5)
>>> m.weight_mask
tensor([[1., 1., 0., 0.],
        [0., 0., 1., 1.]])
>>> sorted(name for name, _ in m.named_parameters())
['bias', 'weight_orig']
>>> _ = prune.remove(m, "weight")
>>> m.weight
Parameter containing:
tensor([[-3.5000, -2.5000, -0.0000, -0.0000],
        [ 0.0000,  0.0000,  2.5000,  3.5000]], requires_grad=True)
"""
from __future__ import annotations

import numbers
from abc import ABC, abstractmethod
from collections.abc import Iterable

from ...torch_format import loadable

__all__ = ["BasePruningMethod", "PruningContainer", "Identity", "RandomUnstructured",
           "L1Unstructured", "RandomStructured", "LnStructured", "CustomFromMask", "identity",
           "random_unstructured", "l1_unstructured", "random_structured", "ln_structured",
           "global_unstructured", "custom_from_mask", "remove", "is_pruned"]


def _flow():
    import flowgrad

    return flowgrad


@loadable  # (load(weights_only=False) rebuilds it)
class BasePruningMethod(ABC):
    """A pruning recipe: `compute_mask(t, default_mask)` says which entries of the importance
    scores `t` to keep (ones) on top of an earlier mask; `apply(module, name, ...)` installs
    it on a module's parameter. Its instances are the modules' forward pre-hooks."""

    _tensor_name: str | None = None
    PRUNING_TYPE = "unstructured"

    def __call__(self, module, inputs):
        setattr(module, self._tensor_name, self.apply_mask(module))

    @abstractmethod
    def compute_mask(self, t, default_mask):
        """The new mask: `default_mask` with the entries this method prunes set to zero."""

    def apply_mask(self, module):
        """`name_orig * name_mask` of `module` (the pruned parameter's value)."""
        if self._tensor_name is None:
            raise AssertionError(f"Module {module} has to be pruned")
        mask = getattr(module, self._tensor_name + "_mask")
        orig = getattr(module, self._tensor_name + "_orig")
        return mask.to(dtype=orig.dtype) * orig

    @classmethod
    def apply(cls, module, name, *args, importance_scores=None, **kwargs):
        """Prune `module.<name>` with `cls(*args, **kwargs)`, on top of any pruning it had:
        `name_orig`, `name_mask` and the pre-hook are set up (or refined) and the method
        returned. `importance_scores` (the parameter's shape) rank the entries instead of
        the parameter's values."""
        method = _combined_with_earlier(cls, module, name, *args, **kwargs)
        orig = getattr(module, name)
        if importance_scores is None:
            importance_scores = orig
        elif importance_scores.shape != orig.shape:
            raise AssertionError(f"importance_scores should have the same shape as parameter "
                                 f"{name} of {module}, got {importance_scores.shape} vs "
                                 f"{orig.shape}")
        first = not isinstance(method, PruningContainer)
        if first:  # the parameter becomes name_orig; name becomes a plain attribute
            module.register_parameter(name + "_orig", orig)
            del module._parameters[name]
            default_mask = _flow().ones_like(orig)
        else:
            default_mask = getattr(module, name + "_mask").detach().clone(
                memory_format=_flow().contiguous_format)
        try:
            mask = method.compute_mask(importance_scores, default_mask=default_mask)
            module.register_buffer(name + "_mask", mask)
            setattr(module, name, method.apply_mask(module))
            module.register_forward_pre_hook(method)
        except Exception:
            if first:  # back as it was
                module.register_parameter(name, module._parameters.pop(name + "_orig"))
            raise
        return method

    def prune(self, t, default_mask=None, importance_scores=None):
        """`t` times the mask this method computes (from `importance_scores`, or `t`)."""
        if importance_scores is None:
            importance_scores = t
        elif importance_scores.shape != t.shape:
            raise AssertionError(f"importance_scores should have the same shape as tensor t, "
                                 f"got {importance_scores.shape} vs {t.shape}")
        if default_mask is None:
            default_mask = _flow().ones_like(t)
        return t * self.compute_mask(importance_scores, default_mask=default_mask)

    def remove(self, module):
        """Make the pruning permanent: `name` becomes a parameter again, holding the masked
        values; `name_orig` and `name_mask` go."""
        if self._tensor_name is None:
            raise AssertionError(f"Module {module} has to be pruned before pruning can be "
                                 f"removed")
        name = self._tensor_name
        weight = self.apply_mask(module)
        if hasattr(module, name):
            delattr(module, name)
        orig = module._parameters.pop(name + "_orig")
        orig.data = weight.data
        del module._buffers[name + "_mask"]
        setattr(module, name, orig)


def _combined_with_earlier(cls, module, name, *args, **kwargs):
    """The method to install: a new `cls(...)`, inside a PruningContainer with the methods
    already pruning `module.<name>` (whose pre-hook is taken off)."""
    earlier = [(key, hook) for key, hook in module._forward_pre_hooks.items()
               if isinstance(hook, BasePruningMethod) and hook._tensor_name == name]
    if len(earlier) > 1:
        raise AssertionError(f"Avoid adding multiple pruning hooks to the same tensor {name} "
                             f"of module {module}. Use a PruningContainer.")
    method = cls(*args, **kwargs)
    method._tensor_name = name
    if not earlier:
        return method
    key, old = earlier[0]
    del module._forward_pre_hooks[key]
    if not isinstance(old, PruningContainer):
        old = PruningContainer(old)
    old.add_pruning_method(method)
    return old


class PruningContainer(BasePruningMethod):
    """The pruning methods applied in turn to one parameter: each new one computes its mask
    on what the earlier ones left (the entries, or the channels, not yet pruned)."""

    def __init__(self, *methods):
        self._pruning_methods = ()
        if len(methods) == 1:
            self._tensor_name = methods[0]._tensor_name
        for method in methods:
            self.add_pruning_method(method)

    def add_pruning_method(self, method):
        """Append `method` (acting on this container's parameter)."""
        if not isinstance(method, BasePruningMethod) and method is not None:
            raise TypeError(f"{type(method)} is not a BasePruningMethod subclass")
        if method is not None and self._tensor_name != method._tensor_name:
            raise ValueError(f"Can only add pruning methods acting on the parameter named "
                             f"'{self._tensor_name}' to PruningContainer {self}. Found "
                             f"'{method._tensor_name}'")
        self._pruning_methods += (method,)

    def __len__(self):
        return len(self._pruning_methods)

    def __iter__(self):
        return iter(self._pruning_methods)

    def __getitem__(self, idx):
        return self._pruning_methods[idx]

    def compute_mask(self, t, default_mask):
        """The last method's mask, computed on the part of `t` the mask so far keeps: the
        kept entries (unstructured), the channels with a kept entry (structured), or all of
        `t` (global), and written back into that part of the mask."""
        method = self._pruning_methods[-1]
        mask = default_mask.to(dtype=t.dtype)
        kind = method.PRUNING_TYPE
        if kind == "unstructured":
            part = default_mask == 1
        elif kind == "structured":
            if not hasattr(method, "dim"):
                raise AttributeError("Pruning methods of PRUNING_TYPE 'structured' need to "
                                     "have the attribute `dim` defined.")
            dim = method.dim + t.dim() if method.dim < 0 else method.dim
            if dim < 0:
                raise IndexError(f"Index is out of bounds for tensor of size {t.shape}")
            others = [d for d in range(t.dim()) if d != dim]
            part = [slice(None)] * t.dim()
            part[dim] = default_mask.sum(dim=others) != 0
            part = tuple(part)
        elif kind == "global":
            part = (slice(None),) * t.dim()
        else:
            raise ValueError(f"Unrecognized PRUNING_TYPE {kind}")
        mask[part] = method.compute_mask(t[part], default_mask=default_mask[part]).to(
            dtype=mask.dtype)
        return mask


class Identity(BasePruningMethod):
    """Prunes nothing: the reparametrization with a mask of ones."""

    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t, default_mask):
        return default_mask

    @classmethod
    def apply(cls, module, name):
        return super().apply(module, name)


class _UnstructuredByRank(BasePruningMethod):
    """Prunes the `amount` entries (a count, or a fraction of the entries) ranked lowest."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount):
        _check_amount(amount)
        self.amount = amount

    def compute_mask(self, t, default_mask):
        count = _pruned_count(self.amount, t.numel())
        mask = default_mask.clone(memory_format=_flow().contiguous_format)
        if count:
            mask.view(-1)[self._lowest(t, count)] = 0
        return mask


class RandomUnstructured(_UnstructuredByRank):
    """Prunes `amount` entries drawn at random."""

    @staticmethod
    def _lowest(t, count):
        return _flow().topk(_flow().rand_like(t).view(-1), k=count).indices

    @classmethod
    def apply(cls, module, name, amount):
        return super().apply(module, name, amount=amount)


class L1Unstructured(_UnstructuredByRank):
    """Prunes the `amount` entries of smallest magnitude."""

    @staticmethod
    def _lowest(t, count):
        return _flow().topk(t.abs().view(-1), k=count, largest=False).indices

    @classmethod
    def apply(cls, module, name, amount, importance_scores=None):
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


class _Structured(BasePruningMethod):
    """Prunes `amount` whole channels (slices along `dim`)."""

    PRUNING_TYPE = "structured"

    def compute_mask(self, t, default_mask):
        if t.dim() <= 1:
            raise ValueError(f"Structured pruning can only be applied to multidimensional "
                             f"tensors. Found tensor of shape {t.shape} with {t.dim()} dims")
        if self.dim >= t.dim():
            raise IndexError(f"Invalid index {self.dim} for tensor of size {t.shape}")
        channels = t.shape[self.dim]
        count = _pruned_count(self.amount, channels)
        ranks = self._ranks(t)  # (before the count, as torch: a bad n raises for amount 0 too)
        if not count:
            return default_mask
        mask = _flow().zeros_like(t)
        kept = [slice(None)] * t.dim()
        kept[self.dim] = self._kept(ranks, channels, count)
        mask[tuple(kept)] = 1
        mask *= default_mask.to(dtype=mask.dtype)
        return mask


class RandomStructured(_Structured):
    """Prunes `amount` channels along `dim` drawn at random."""

    def __init__(self, amount, dim=-1):
        _check_amount(amount)
        self.amount, self.dim = amount, dim

    def _ranks(self, t):
        return None  # (drawn only when channels are pruned, as torch)

    def _kept(self, ranks, channels, count):
        draws = _flow().rand(channels)
        return draws > _flow().kthvalue(draws, k=count).values

    @classmethod
    def apply(cls, module, name, amount, dim=-1):
        return super().apply(module, name, amount=amount, dim=dim)


class LnStructured(_Structured):
    """Prunes the `amount` channels along `dim` of smallest L`n` norm."""

    def __init__(self, amount, n, dim=-1):
        _check_amount(amount)
        self.amount, self.n, self.dim = amount, n, dim

    def _ranks(self, t):
        """Each channel's L`n` norm."""
        dim = self.dim % t.dim()
        return _flow().norm(t, p=self.n, dim=[d for d in range(t.dim()) if d != dim])

    def _kept(self, norms, channels, count):
        return _flow().topk(norms, k=channels - count, largest=True).indices

    @classmethod
    def apply(cls, module, name, amount, n, dim, importance_scores=None):
        return super().apply(module, name, amount=amount, n=n, dim=dim,
                             importance_scores=importance_scores)


class CustomFromMask(BasePruningMethod):
    """Prunes where the given `mask` is zero."""

    PRUNING_TYPE = "global"

    def __init__(self, mask):
        self.mask = mask

    def compute_mask(self, t, default_mask):
        if default_mask.shape != self.mask.shape:
            raise AssertionError(f"default_mask shape {default_mask.shape} must match "
                                 f"self.mask shape {self.mask.shape}")
        return default_mask * self.mask.to(dtype=default_mask.dtype)

    @classmethod
    def apply(cls, module, name, mask):
        return super().apply(module, name, mask=mask)


def _check_amount(amount):
    if not isinstance(amount, numbers.Real):
        raise TypeError(f"Invalid type for amount: {amount}. Must be int or float.")
    integral = isinstance(amount, numbers.Integral)
    if integral and amount < 0 or not integral and not 0.0 <= float(amount) <= 1.0:
        raise ValueError(f"amount={amount} should either be a float in the range [0, 1] or a "
                         f"non-negative integer")


def _pruned_count(amount, size):
    """How many of `size` entries or channels `amount` prunes (a fraction rounds)."""
    if not isinstance(amount, numbers.Integral):
        return round(amount * size)
    if amount > size:
        raise ValueError(f"amount={amount} should be smaller than the number of parameters "
                         f"to prune={size}")
    return amount


def identity(module, name):
    """Reparametrize `module.<name>` with a mask of ones (prunes nothing); returns module."""
    Identity.apply(module, name)
    return module


def random_unstructured(module, name, amount):
    """Prune `amount` random entries of `module.<name>`; returns module."""
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module, name, amount, importance_scores=None):
    """Prune the `amount` entries of `module.<name>` of smallest magnitude (of
    `importance_scores` if given); returns module."""
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module, name, amount, dim):
    """Prune `amount` random channels along `dim` of `module.<name>`; returns module."""
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module, name, amount, n, dim, importance_scores=None):
    """Prune the `amount` channels along `dim` of `module.<name>` of smallest L`n` norm;
    returns module."""
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def global_unstructured(parameters, pruning_method, importance_scores=None, **kwargs):
    """Prune the (module, name) `parameters` together: `pruning_method(**kwargs)` (an
    unstructured one) ranks all their entries as one vector, so a fraction `amount` prunes
    that fraction of all of them, unevenly across parameters."""
    from .convert_parameters import parameters_to_vector

    if not isinstance(parameters, Iterable):
        raise TypeError("global_unstructured(): parameters is not an Iterable")
    importance_scores = {} if importance_scores is None else importance_scores
    if not isinstance(importance_scores, dict):
        raise TypeError("global_unstructured(): importance_scores must be of type dict")
    parameters = list(parameters)
    scores = parameters_to_vector([importance_scores.get((module, name), getattr(module, name))
                                   for module, name in parameters])
    masks = parameters_to_vector([getattr(module, name + "_mask")
                                  if hasattr(module, name + "_mask")
                                  else _flow().ones_like(getattr(module, name))
                                  for module, name in parameters])
    method = pruning_method(**kwargs)
    if method.PRUNING_TYPE != "unstructured":
        raise TypeError(f'Only "unstructured" PRUNING_TYPE supported for the `pruning_method`. '
                        f"Found method {pruning_method} of type {method.PRUNING_TYPE}")
    container = PruningContainer()
    container._tensor_name = method._tensor_name = "temp"
    container.add_pruning_method(method)
    final = container.compute_mask(scores, masks)
    start = 0
    for module, name in parameters:
        param = getattr(module, name)
        custom_from_mask(module, name, mask=final[start:start + param.numel()].view_as(param))
        start += param.numel()


def custom_from_mask(module, name, mask):
    """Prune `module.<name>` where `mask` is zero; returns module."""
    CustomFromMask.apply(module, name, mask)
    return module


def remove(module, name):
    """Make the pruning of `module.<name>` permanent (see BasePruningMethod.remove)."""
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"Parameter '{name}' of module {module} has to be pruned before pruning "
                     f"can be removed")


def is_pruned(module):
    """Whether `module` or a submodule has a pruning pre-hook."""
    return any(isinstance(hook, BasePruningMethod) for _, sub in module.named_modules()
               for hook in sub._forward_pre_hooks.values())
