"""`torch.nn.modules.<family>` imports run with the import changed: every submodule of
torch.nn.modules has a flowgrad twin holding the public names torch keeps there, and the
private helpers custom layers import (`_BatchNorm`, `_ConvNd`, `_pair`, ...)."""
from __future__ import annotations

import importlib
import pkgutil
from collections import OrderedDict

import pytest
import torch.nn.modules

import flowgrad as flow

# what flowgrad does not have, and why
ABSENT = {
    "_functions": "torch's autograd Functions of SyncBatchNorm and CrossMapLRN2d (internal)",
    "linear_cross_entropy": "torch's module of nn.functional.linear_cross_entropy (the function "
                            "is there)",
    "linear_cross_entropy_options": "(its options)",
}
ABSENT_NAMES = {
    # process-wide hooks on every module call: not implemented (a check on each call)
    "module": {"register_module_forward_hook", "register_module_forward_pre_hook",
               "register_module_backward_hook", "register_module_full_backward_hook",
               "register_module_full_backward_pre_hook",
               "register_module_buffer_registration_hook",
               "register_module_module_registration_hook",
               "register_module_parameter_registration_hook"},
    "container": {"Container"},  # deprecated since torch 0.4
    "rnn": {"apply_permutation"},  # deprecated: tensor.index_select(dim, permutation)
}
PRIVATE = {
    "batchnorm": ["_BatchNorm", "_NormBase"], "instancenorm": ["_InstanceNorm"],
    "conv": ["_ConvNd"], "loss": ["_Loss", "_WeightedLoss"], "dropout": ["_DropoutNd"],
    "pooling": ["_MaxPoolNd", "_AvgPoolNd"], "module": ["_IncompatibleKeys", "_addindent"],
    "utils": ["_single", "_pair", "_triple", "_quadruple", "_ntuple", "_reverse_repeat_tuple",
              "_list_with_default"],
}
FAMILIES = sorted(m.name for m in pkgutil.iter_modules(torch.nn.modules.__path__))


@pytest.mark.parametrize("family", [f for f in FAMILIES if f not in ABSENT])
def test_family_module_has_torchs_names(family):
    theirs = importlib.import_module(f"torch.nn.modules.{family}")
    ours = importlib.import_module(f"flowgrad.nn.modules.{family}")
    public = [n for n in dir(theirs) if not n.startswith("_") and callable(getattr(theirs, n))
              and (getattr(getattr(theirs, n), "__module__", "") or "").startswith(
                  f"torch.nn.modules.{family}")]
    wanted = set(public + PRIVATE.get(family, [])) - ABSENT_NAMES.get(family, set()) - {"T"}
    assert not sorted(n for n in wanted if not hasattr(ours, n))


def test_private_bases_are_the_layers_bases():
    from flowgrad.nn.modules.batchnorm import _BatchNorm
    from flowgrad.nn.modules.utils import _pair, _quadruple

    assert isinstance(flow.nn.BatchNorm2d(3), _BatchNorm)
    assert isinstance(flow.nn.SyncBatchNorm(3), _BatchNorm)
    assert _pair(3) == (3, 3) and _quadruple((1, 2, 3, 4)) == (1, 2, 3, 4)


def test_consume_prefix_as_torch():
    from torch.nn.modules.utils import consume_prefix_in_state_dict_if_present as theirs

    from flowgrad.nn.modules.utils import consume_prefix_in_state_dict_if_present as ours

    dicts = []
    for consume in (theirs, ours):
        sd = OrderedDict([("module.w", 1), ("b", 2), ("module.x.y", 3), ("modulez", 4)])
        sd._metadata = OrderedDict([("", {}), ("module", {"v": 1}), ("module.x", {"v": 2})])
        consume(sd, "module.")
        dicts.append((list(sd.items()), list(sd._metadata.items())))
    assert dicts[0] == dicts[1]
