"""PyTorch's checkpoint format: files torch.save wrote load in flowgrad (without torch, through
the weights-only unpickler), files flowgrad writes load in torch.load(weights_only=True), for
every dtype; whole modules need weights_only=False, with torch's error otherwise."""
import io
import pickle
import subprocess
import sys
import zipfile
from collections import OrderedDict

import ml_dtypes
import numpy as np
import pytest
import torch

import flowgrad as flow

DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8",
          "uint8", "bool", "complex64", "complex128"]


def _values(name, shape=(2, 3)):
    a = np.arange(-3, int(np.prod(shape)) - 3).reshape(shape)
    if name == "bool":
        return a % 2 == 0
    if name == "uint8":
        return (a + 3).astype(np.uint8)
    if name.startswith("complex"):
        return (a * 0.75 + 0.5j * a[::-1]).astype(name)
    return (a * 0.75 if name.startswith(("float", "bfloat")) else a).astype(
        ml_dtypes.bfloat16 if name == "bfloat16" else name)


def _torch_numpy(t):
    return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16) if t.dtype == torch.bfloat16 \
        else t.numpy()


def _flow_tensor(a):
    return flow.tensor(a) if a.dtype != ml_dtypes.bfloat16 else flow.Tensor._wrap(a.copy())


def _torch_tensor(a):
    if a.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(a.copy())


@pytest.mark.parametrize("name", DTYPES)
def test_torch_to_flowgrad_every_dtype(tmp_path, name):
    a = _values(name)
    path = tmp_path / "t.pt"
    torch.save({"x": _torch_tensor(a), "col": _torch_tensor(a)[:, 1],
                "dtype": getattr(torch, name)}, path)
    out = flow.load(path)
    assert out["x"].dtype is getattr(flow, name) and out["dtype"] is getattr(flow, name)
    assert out["x"]._data.tobytes() == a.tobytes()
    np.testing.assert_array_equal(out["col"]._data, a[:, 1])


@pytest.mark.parametrize("name", DTYPES)
def test_flowgrad_to_torch_every_dtype(tmp_path, name):
    a = _values(name, (3, 4))
    x = _flow_tensor(a)
    path = tmp_path / "f.pt"
    flow.save({"x": x, "t": x.t(), "row": x[1], "dtype": x.dtype}, path)
    out = torch.load(path, weights_only=True)
    assert out["x"].dtype == getattr(torch, name) == out["dtype"]
    assert _torch_numpy(out["x"]).tobytes() == a.tobytes()
    np.testing.assert_array_equal(_torch_numpy(out["t"]), a.T)
    np.testing.assert_array_equal(_torch_numpy(out["row"]), a[1])
    # views of one tensor share one storage in torch too
    assert out["row"].untyped_storage().data_ptr() == out["x"].untyped_storage().data_ptr()


def test_state_dicts_round_trip_both_ways(tmp_path):
    torch.manual_seed(0)  # (the global stream depends on which tests ran before in the worker)
    tm = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    opt = torch.optim.Adam(tm.parameters())
    tm(torch.randn(5, 3)).sum().backward()
    opt.step()
    torch.save({"model": tm.state_dict(), "optim": opt.state_dict(), "epoch": 3,
                "loss": 0.25, "name": "run", "flags": {1, 2}, "raw": b"\x00\xff",
                "size": torch.Size([2, 3]), "device": torch.device("cpu")}, tmp_path / "a.pth")
    ck = flow.load(tmp_path / "a.pth")
    fm = flow.nn.Sequential(flow.nn.Linear(3, 4), flow.nn.BatchNorm1d(4))
    fm.load_state_dict(ck["model"])
    assert isinstance(ck["model"], OrderedDict)
    assert (ck["epoch"], ck["loss"], ck["name"], ck["flags"], ck["raw"]) == \
        (3, 0.25, "run", {1, 2}, b"\x00\xff")
    assert ck["size"] == flow.Size([2, 3]) and ck["device"] == flow.device("cpu")
    assert ck["optim"]["state"][0]["exp_avg"].shape == (4, 3)
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    tm.eval()
    fm.eval()
    np.testing.assert_allclose(fm(flow.tensor(x)).detach().numpy(),
                               tm(torch.from_numpy(x)).detach().numpy(), rtol=1e-6, atol=1e-6)
    flow.save({"model": fm.state_dict(), "epoch": 4}, tmp_path / "b.pt")
    back = torch.load(tmp_path / "b.pt", weights_only=True)
    tm.load_state_dict(back["model"])
    assert back["epoch"] == 4


def test_parameters_and_requires_grad_survive(tmp_path):
    torch.save({"p": torch.nn.Parameter(torch.ones(2)), "g": torch.ones(2, requires_grad=True)},
               tmp_path / "p.pt")
    out = flow.load(tmp_path / "p.pt")
    assert isinstance(out["p"], flow.nn.Parameter) and out["p"].requires_grad
    assert out["g"].requires_grad and not isinstance(out["g"], flow.nn.Parameter)
    flow.save(out, tmp_path / "q.pt")
    back = torch.load(tmp_path / "q.pt", weights_only=True)
    assert isinstance(back["p"], torch.nn.Parameter) and back["g"].requires_grad


def test_format_argument_and_file_objects():
    buf = io.BytesIO()
    flow.save({"w": flow.ones(2)}, buf, format="torch")
    assert buf.getvalue()[:4] == b"PK\x03\x04"
    buf.seek(0)
    assert torch.load(buf, weights_only=True)["w"].tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match="format must be 'torch' or 'safetensors'"):
        flow.save({}, io.BytesIO(), format="pickle")


class _Config:  # a user class a checkpoint may hold
    def __init__(self, depth):
        self.depth = depth


def test_unknown_global_is_refused_naming_it(tmp_path):
    torch.save({"cfg": _Config(3)}, tmp_path / "c.pt")
    with pytest.raises(pickle.UnpicklingError, match=r"GLOBAL test_torch_checkpoints\._Config "
                       r"was not an allowed global by default"):
        flow.load(tmp_path / "c.pt")
    with flow.serialization.safe_globals([_Config]):
        assert flow.load(tmp_path / "c.pt")["cfg"].depth == 3
    with pytest.raises(pickle.UnpicklingError, match="_Config"):
        flow.load(tmp_path / "c.pt")  # the context manager's allowance ended
    flow.serialization.add_safe_globals([_Config])
    try:
        assert flow.load(tmp_path / "c.pt")["cfg"].depth == 3
    finally:
        flow.serialization.clear_safe_globals()
    assert flow.load(tmp_path / "c.pt", weights_only=False)["cfg"].depth == 3


def test_malicious_pickle_never_runs(tmp_path):
    class Boom:
        def __reduce__(self):
            return (print, ("pwned",))

    torch.save({"x": Boom()}, tmp_path / "m.pt")
    with pytest.raises(pickle.UnpicklingError, match="GLOBAL builtins.print"):
        flow.load(tmp_path / "m.pt")


def test_whole_module_needs_weights_only_false(tmp_path):
    net = flow.nn.Sequential(flow.nn.Linear(2, 3), flow.nn.ReLU())
    flow.save(net, tmp_path / "net.bin")  # a Module is written in torch's format, any suffix
    with pytest.raises(pickle.UnpicklingError, match="Re-running `flowgrad.load` with "
                       "`weights_only` set to `False` will likely succeed"):
        flow.load(tmp_path / "net.bin")
    loaded = flow.load(tmp_path / "net.bin", weights_only=False)
    x = flow.ones(1, 2)
    assert type(loaded) is flow.nn.Sequential
    assert loaded(x).tolist() == net(x).tolist()


def test_corrupt_files_raise_clearly(tmp_path):
    torch.save({"x": torch.arange(8.0)}, tmp_path / "a.pt")
    blob = (tmp_path / "a.pt").read_bytes()
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(blob)) as zin, zipfile.ZipFile(out, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            zout.writestr(info.filename, data[:8] if "/data/" in info.filename else data)
    (tmp_path / "short.pt").write_bytes(out.getvalue())
    with pytest.raises(pickle.UnpicklingError, match="holds 8 bytes, fewer than 8 float32"):
        flow.load(tmp_path / "short.pt")
    (tmp_path / "trunc.pt").write_bytes(blob[:100])
    with pytest.raises(RuntimeError, match="not a valid torch zip checkpoint"):
        flow.load(tmp_path / "trunc.pt")


def test_loads_without_torch_installed(tmp_path):
    torch.save({"w": torch.arange(4.0).reshape(2, 2), "step": 7}, tmp_path / "w.pt")
    code = ("import sys; sys.modules['torch'] = None\n"  # any `import torch` now fails
            "import flowgrad as flow\n"
            f"ck = flow.load({str(tmp_path / 'w.pt')!r})\n"
            "print(ck['w'].tolist(), ck['step'])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[[0.0, 1.0], [2.0, 3.0]] 7"
