"""nn.Module's state-dict protocol and API corners, each run in torch and in flowgrad: the
same result (dtype names compared without the framework's prefix) or the same exception
class. One line per case; each case is a function of the framework `m`."""
import warnings
from collections import OrderedDict

import pytest
import torch

import flowgrad as flow


def _extra(m):
    class E(m.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = m.nn.Linear(2, 1)
            self.v = 1

        def get_extra_state(self):
            return {"v": self.v}

        def set_extra_state(self, state):
            self.v = state["v"] * 10
    return E()


def extra_state_round_trip(m):
    outer = m.nn.Sequential(_extra(m))
    sd = outer.state_dict()
    outer.load_state_dict(sd)
    return list(sd), outer[0].v


def extra_state_missing_is_strict(m):
    return _extra(m).load_state_dict({"lin.weight": m.ones(1, 2), "lin.bias": m.ones(1)})


def state_dict_hooks(m):
    net, calls = m.nn.Sequential(m.nn.Linear(2, 2)), []
    net[0].register_state_dict_pre_hook(lambda mod, prefix, keep: calls.append(("pre", prefix)))

    def post(mod, sd, prefix, meta):
        calls.append(("post", prefix, meta["version"]))
        sd[prefix + "extra"] = m.zeros(1)
    net[0].register_state_dict_post_hook(post)
    return list(net.state_dict(prefix="top.")), calls


def old_state_dict_hook(m):
    lin = m.nn.Linear(2, 2)
    lin._register_state_dict_hook(lambda mod, sd, prefix, meta: sd.pop(prefix + "bias") and None)
    return list(lin.state_dict())


def state_dict_metadata(m):
    sd = m.nn.Sequential(m.nn.Linear(2, 2), m.nn.BatchNorm1d(2)).state_dict()
    return sorted(sd._metadata.items())


def load_pre_hook_renames(m):
    net = m.nn.Sequential(m.nn.Linear(2, 1))

    def rename(mod, sd, prefix, meta, strict, missing, unexpected, errors):
        if prefix + "b" in sd:
            sd[prefix + "bias"] = sd.pop(prefix + "b")
    net[0].register_load_state_dict_pre_hook(rename)
    given = OrderedDict([("0.weight", m.ones(1, 2)), ("0.b", m.full((1,), 3.0))])
    keys = net.load_state_dict(given)
    return str(keys), net[0].bias.tolist(), list(given)  # the caller's dict is not changed


def old_load_pre_hook(m):
    lin = m.nn.Linear(2, 1)
    lin._register_load_state_dict_pre_hook(
        lambda sd, prefix, *rest: sd.setdefault(prefix + "bias", m.zeros(1)) and None)
    return str(lin.load_state_dict({"weight": m.ones(1, 2)}))


def load_post_hook_clears_missing(m):
    lin, seen = m.nn.Linear(2, 1), []

    def post(mod, keys):
        seen.append((list(keys.missing_keys), list(keys.unexpected_keys)))
        keys.missing_keys.clear()
    lin.register_load_state_dict_post_hook(post)
    result = lin.load_state_dict({"weight": m.ones(1, 2)})
    return str(result), seen, lin.weight.tolist()


def load_post_hook_returning(m):
    lin = m.nn.Linear(2, 1)
    lin.register_load_state_dict_post_hook(lambda mod, keys: 1)
    return lin.load_state_dict({"weight": m.ones(1, 2), "bias": m.ones(1)})


def assign_shares_storage(m):
    lin, w = m.nn.Linear(2, 2), m.full((2, 2), 3.0)
    lin.load_state_dict({"weight": w, "bias": m.ones(2)}, assign=True)
    w.add_(1)
    return lin.weight.tolist(), type(lin.weight).__name__, lin.weight.requires_grad


def sequential_times(m):
    seq = m.nn.Sequential(m.nn.ReLU(), m.nn.Tanh())
    twice, thrice = seq * 2, 3 * seq
    seq *= 2
    return ([type(x).__name__ for x in twice], twice[0] is twice[2], len(thrice),
            list(seq._modules))


def sequential_times_zero(m):
    return m.nn.Sequential(m.nn.ReLU()) * 0


def set_submodule(m):
    net = m.nn.Sequential(m.nn.Sequential(m.nn.ReLU()))
    net.set_submodule("0.0", m.nn.Tanh())
    net.set_submodule("0.new", m.nn.Sigmoid())
    return [type(x).__name__ for x in net[0]]


def set_submodule_strict_missing(m):
    return m.nn.Sequential(m.nn.ReLU()).set_submodule("new", m.nn.Tanh(), strict=True)


def to_complex(m):
    lin = m.nn.Linear(2, 2)
    lin.register_buffer("c", m.ones(2, dtype=m.complex64))
    lin.register_buffer("i", m.tensor([1, 2]))
    lin.to(m.float64)
    first = [str(t.dtype) for t in (lin.weight, lin.c, lin.i)]
    lin.to(m.complex64)
    return first, [str(t.dtype) for t in (lin.weight, lin.c, lin.i)]


def always_call_forward_hook(m):
    lin, calls = m.nn.Linear(2, 2), []
    lin.register_forward_hook(lambda mod, args, out: calls.append(out), always_call=True)
    lin.register_forward_hook(lambda mod, args, out: calls.append("plain"))
    lin.register_forward_pre_hook(lambda mod, args: 1 / 0)
    try:
        lin(m.ones(1, 2))
    except ZeroDivisionError:
        calls.append("raised")
    return calls


CASES = [extra_state_round_trip, extra_state_missing_is_strict, state_dict_hooks,
         old_state_dict_hook, state_dict_metadata, load_pre_hook_renames, old_load_pre_hook,
         load_post_hook_clears_missing, load_post_hook_returning, assign_shares_storage,
         sequential_times, sequential_times_zero, set_submodule, set_submodule_strict_missing,
         to_complex, always_call_forward_hook]


def _outcome(m, case):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            result = case(m)
        except Exception as e:  # noqa: BLE001 - the exception's class is the outcome
            return type(e).__name__
    return repr(result).replace("torch.", "").replace("flowgrad.", "")


@pytest.mark.parametrize("case", CASES, ids=[c.__name__ for c in CASES])
def test_module_api_as_torch(case):
    assert _outcome(flow, case) == _outcome(torch, case)


def _batchnorm_without_count(m, versions):
    bn = m.nn.BatchNorm1d(2)
    bn.num_batches_tracked.fill_(5)
    sd = bn.state_dict()
    del sd["num_batches_tracked"]
    if not versions:
        sd = dict(sd)  # no _metadata: an old checkpoint
    try:
        return str(bn.load_state_dict(sd)), bn.num_batches_tracked.item()
    except RuntimeError as e:
        return type(e).__name__


@pytest.mark.parametrize("versions", [True, False])
def test_batchnorm_state_dict_versions_as_torch(versions):
    """Version 2 added num_batches_tracked: a dict without versions (an older checkpoint)
    keeps the module's count; one of version 2 missing it is strict's missing key."""
    assert _batchnorm_without_count(flow, versions) == _batchnorm_without_count(torch, versions)
