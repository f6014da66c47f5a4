"""flowgrad.load never runs code a file names, with weights_only=False too (torch's unpickles
anything there): a function (os.system, eval, getattr, print) or a library class whose
constructor acts (subprocess.Popen, zipfile.ZipFile, functools.partial) is refused before it
is called, and nothing the file names is imported. What a user saves still loads: whole
modules and optimizers, objects of their own classes, named tuples, NumPy arrays, plain
containers."""
import collections
import functools
import io
import os
import pickle
import subprocess
import zipfile

import numpy as np
import pytest
import torch

import flowgrad as flow

Point = collections.namedtuple("Point", "x y")


class Config:
    def __init__(self, depth):
        self.depth = depth


class _Reduces:
    """Pickles as `fn(*args)`."""

    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


def _as_checkpoint(obj, path):
    """A torch-format checkpoint whose pickle is `obj`'s (torch.save writes it)."""
    torch.save({"payload": obj}, path)
    return path


def _attacks(marker):
    from flowgrad.utils.benchmark import Timer
    from flowgrad.utils.tensorboard import SummaryWriter

    cmd = f"touch {marker}"
    return {
        # flowgrad's own classes that act when constructed: not data to a file
        "benchmark.Timer": _Reduces(Timer, "pass", "pass", f"open({str(marker)!r}, 'w')"),
        "SummaryWriter": _Reduces(SummaryWriter, str(marker)),
        "os.system": _Reduces(os.system, cmd),
        "eval": _Reduces(eval, f"__import__('os').system({cmd!r})"),
        "getattr": _Reduces(getattr, str, "format"),
        "subprocess.Popen": _Reduces(subprocess.Popen, ["touch", str(marker)]),
        "partial": _Reduces(functools.partial, os.system, cmd),
        "zipfile.ZipFile": _Reduces(zipfile.ZipFile, str(marker), "w"),
        "print": _Reduces(print, "pwned"),
    }


@pytest.mark.parametrize("name", list(_attacks("x")))
@pytest.mark.parametrize("weights_only", [True, False])
def test_file_named_code_is_refused(tmp_path, name, weights_only):
    marker = tmp_path / "ran"
    path = _as_checkpoint(_attacks(marker)[name], tmp_path / "evil.pt")
    with pytest.raises(pickle.UnpicklingError):
        flow.load(path, weights_only=weights_only)
    assert not marker.exists()


def test_nothing_a_file_names_is_imported(tmp_path):
    path = tmp_path / "c.pt"
    with zipfile.ZipFile(path, "w") as z:  # a pickle naming a module nobody imported
        z.writestr("c/data.pkl", b"\x80\x02cnot_imported_module_xyz\nThing\nq\x00)\x81q\x01.")
        z.writestr("c/version", "3\n")
    with pytest.raises(pickle.UnpicklingError, match="not loaded; import the module"):
        flow.load(path, weights_only=False)


def test_only_nn_functional_functions_by_their_own_name_are_rebuilt(tmp_path):
    """A module's activation (F.relu) rebuilds; a dotted name reaching through one of its
    attributes (the unguarded function F.relu wraps) is refused as any other function."""
    for name, refused in (("relu", False), ("relu.__wrapped__", True)):
        path = tmp_path / "c.pt"
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("c/data.pkl", b"\x80\x04\x8c\x16flowgrad.nn.functional\x94\x8c"
                       + bytes([len(name)]) + name.encode() + b"\x94\x93\x94.")
            z.writestr("c/version", "3\n")
        if refused:
            with pytest.raises(pickle.UnpicklingError, match="does not rebuild"):
                flow.load(path, weights_only=False)
        else:
            assert flow.load(path, weights_only=False) is flow.nn.functional.relu


def test_what_users_save_still_loads(tmp_path):
    net = flow.nn.Sequential(flow.nn.Linear(2, 3), flow.nn.ReLU(), flow.nn.BatchNorm1d(3))
    opt = flow.optim.Adam(net.parameters(), lr=0.1)
    net(flow.ones(4, 2)).sum().backward()
    opt.step()
    flow.nn.utils.prune.l1_unstructured(net[0], "weight", amount=0.5)
    sched = flow.optim.lr_scheduler.StepLR(opt, 2)
    packed = flow.nn.utils.rnn.pack_sequence([flow.ones(3, 2), flow.ones(1, 2)])
    normal = flow.distributions.Normal(flow.zeros(2), flow.ones(2))
    state = {"model": net, "opt": opt, "cfg": Config(3), "point": Point(1, 2.5),
             "sched": sched, "packed": packed, "normal": normal,
             "array": np.arange(4.0), "scalar": np.float32(1.5), "dtype": np.dtype("int16"),
             "counts": collections.Counter("aab"), "tree": collections.defaultdict(list),
             "when": __import__("datetime").date(2026, 12, 5), "bytes": b"\x00\x01"}
    flow.save(state, tmp_path / "all.pt")
    got = flow.load(tmp_path / "all.pt", weights_only=False)
    x = flow.ones(2, 2)
    net.eval()
    got["model"].eval()
    assert got["model"](x).tolist() == net(x).tolist()
    assert type(got["opt"]) is flow.optim.Adam and got["opt"].state_dict()["state"].keys() == \
        opt.state_dict()["state"].keys()
    assert got["cfg"].depth == 3 and got["point"] == Point(1, 2.5)
    assert got["array"].tolist() == [0.0, 1.0, 2.0, 3.0] and got["scalar"] == np.float32(1.5)
    assert got["dtype"] == np.dtype("int16") and got["counts"] == collections.Counter("aab")
    assert got["when"].year == 2026 and got["bytes"] == b"\x00\x01"
    assert flow.nn.utils.prune.is_pruned(got["model"]) and got["sched"].step_size == 2
    assert got["packed"].batch_sizes.tolist() == packed.batch_sizes.tolist()
    assert got["normal"].log_prob(flow.zeros(2)).tolist() == normal.log_prob(
        flow.zeros(2)).tolist()
    with pytest.raises(pickle.UnpicklingError, match="weights_only"):
        flow.load(tmp_path / "all.pt")  # the default stays weights-only


def test_a_trusted_library_class_can_be_allowed(tmp_path):
    path = tmp_path / "frac.pt"
    buf = io.BytesIO()
    torch.save({"od": collections.OrderedDict(a=1), "cls": functools.partial}, buf)
    path.write_bytes(buf.getvalue())
    with pytest.raises(pickle.UnpicklingError, match="add_safe_globals"):
        flow.load(path, weights_only=False)
    with flow.serialization.safe_globals([functools.partial]):
        assert flow.load(path, weights_only=False)["cls"] is functools.partial
