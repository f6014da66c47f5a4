"""Training utilities used as torch users use them (module state dicts, optimizer state,
data), compared with torch in the same process."""
from __future__ import annotations

import numpy as np
import pytest

import flowgrad as flow

torch = pytest.importorskip("torch")


def _renaming_module(lib):
    """A module whose `_load_from_state_dict` renames an old key before calling super, the
    usual way torch code migrates old checkpoints."""
    class Renaming(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = lib.nn.Parameter(lib.ones(2))

        def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict,
                                  missing_keys, unexpected_keys, error_msgs):
            if prefix + "old_w" in state_dict:
                state_dict[prefix + "w"] = state_dict.pop(prefix + "old_w")
            super()._load_from_state_dict(state_dict, prefix, local_metadata, strict,
                                          missing_keys, unexpected_keys, error_msgs)
    return Renaming


@pytest.mark.parametrize("strict", [True, False])
def test_load_from_state_dict_override_renames_keys(strict):
    results = []
    for lib in (torch, flow):
        m = lib.nn.Sequential(lib.nn.Linear(2, 2), _renaming_module(lib)())
        sd = {k: v for k, v in m.state_dict().items() if not k.endswith("w")}
        sd["1.old_w"] = lib.tensor([3.0, 4.0])
        keys = m.load_state_dict(sd, strict=strict)
        results.append((m[1].w.detach().numpy().copy(), keys.missing_keys,
                        keys.unexpected_keys, "1.old_w" in sd))
    (tw, tmiss, tunexp, tkept), (fw, fmiss, funexp, fkept) = results
    np.testing.assert_array_equal(fw, tw)
    assert (fmiss, funexp, fkept) == (tmiss, tunexp, tkept)


def test_load_from_state_dict_override_reports_missing_keys():
    errors = []
    for lib in (torch, flow):
        class Reporting(lib.nn.Linear):
            def _load_from_state_dict(self, state_dict, prefix, *args):
                args[2].append(prefix + "needed")  # missing_keys
                super()._load_from_state_dict(state_dict, prefix, *args)
        m = Reporting(2, 2)
        keys = m.load_state_dict(m.state_dict(), strict=False)
        errors.append(keys.missing_keys)
        with pytest.raises(RuntimeError, match="needed"):
            m.load_state_dict(m.state_dict())
    assert errors[0] == errors[1] == ["needed"]


def test_load_pre_hook_gets_strict_true_as_torch():
    seen = []
    for lib in (torch, flow):
        m = lib.nn.Linear(2, 2)
        m.register_load_state_dict_pre_hook(lambda mod, sd, prefix, meta, strict, *rest:
                                            seen.append(strict))
        m.load_state_dict(m.state_dict(), strict=False)
    assert seen == [True, True]
