"""One array boundary: tensors hold any registered device's arrays and nothing converts them.

A thin NumPy subclass stands in for another device's memory (as CuPy's arrays would), with a
module that forwards to NumPy and hands back that subclass; a training step run on it must keep
every parameter, activation and gradient there and match the plain NumPy run.
"""
import ast
import functools
import pathlib
import types

import numpy as np
import pytest

import flowgrad as flow
from flowgrad import nn
from flowgrad.device import ARRAY_MODULES, broadcast_view, register_device, unregister_device
from flowgrad.nn import functional as F


class FakeDeviceArray(np.ndarray):
    """Memory of the stand-in device 'fake'. Like a GPU array library's, its functions
    refuse host (plain NumPy) arrays mixed in, so a path that leaks to the CPU fails."""

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        _refuse_host(inputs + tuple(kwargs.get("out", ())), ufunc.__name__)
        inputs = tuple(np.asarray(a) if type(a) is FakeDeviceArray else a for a in inputs)
        if "out" in kwargs:
            kwargs["out"] = tuple(np.asarray(a) for a in kwargs["out"])
        result = getattr(ufunc, method)(*inputs, **kwargs)
        if type(result) is tuple:
            return tuple(_on_fake(r, scalars=True) for r in result)
        return _on_fake(result, scalars=True)  # a device's reductions give 0-d arrays


def _refuse_host(args, name):
    for a in args:
        if type(a) is np.ndarray and a.ndim:
            raise TypeError(f"fake device: {name} got a host array of shape {a.shape}")
        if type(a) in (list, tuple):
            _refuse_host(a, name)


def _plain(value):
    if type(value) is FakeDeviceArray:
        return value.view(np.ndarray)
    if type(value) in (list, tuple):
        return type(value)(_plain(v) for v in value)
    return value


def _on_fake(value, scalars=False):
    if type(value) is np.ndarray or scalars and isinstance(value, np.generic):
        return np.asarray(value).view(FakeDeviceArray)
    if isinstance(value, tuple):  # (NumPy's linalg results are named tuples)
        items = [_on_fake(v, scalars) for v in value]
        return type(value)._make(items) if hasattr(value, "_make") else tuple(items)
    return value


class FakeModule:
    """NumPy's namespace whose functions return FakeDeviceArray, as a device's module returns
    its own arrays (types, dtypes and ufuncs pass through: ufuncs keep the subclass)."""

    ndarray = FakeDeviceArray  # as cupy.ndarray is CuPy's

    def __init__(self, module):
        self._module = module

    @functools.lru_cache(maxsize=None)  # noqa: B019 - one wrapper per name, module lives on
    def __getattr__(self, name):
        attr = getattr(self._module, name)
        if isinstance(attr, types.ModuleType):
            return FakeModule(attr)
        if not callable(attr) or isinstance(attr, (type, np.ufunc)):
            return attr

        @functools.wraps(attr)
        def on_device(*args, **kwargs):
            _refuse_host(args, name)  # then NumPy computes on plain views, as a device would
            args = [_plain(a) for a in args]
            return _on_fake(attr(*args, **{k: _plain(v) for k, v in kwargs.items()}))
        return on_device

    def asarray(self, a, dtype=None, **kwargs):
        if type(a) is FakeDeviceArray and (dtype is None or a.dtype == dtype):
            return a
        return np.asarray(a, dtype, **kwargs).view(FakeDeviceArray)


FAKE_NP = FakeModule(np)


@pytest.fixture
def fake():
    dev = register_device("fake", FakeDeviceArray, FAKE_NP, to_host=np.asarray)
    try:
        yield dev
    finally:
        unregister_device("fake")
    assert FakeDeviceArray not in ARRAY_MODULES


def _on(device, t):
    return type(t._data) is (FakeDeviceArray if device != "cpu" else np.ndarray)


OPTIMIZERS = {
    "sgd": lambda ps: flow.optim.SGD(ps, lr=0.1, momentum=0.9),
    "adam": lambda ps: flow.optim.Adam(ps, lr=0.01, amsgrad=True),
    "rmsprop": lambda ps: flow.optim.RMSprop(ps, lr=0.01, momentum=0.5, centered=True),
}


def _train_step(device, optimizer="sgd"):
    """Linear -> ReLU -> Linear, cross_entropy, backward, optimizer step (twice); the tensors
    it made."""
    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).to(device)
    opt = OPTIMIZERS[optimizer](model.parameters())
    x = flow.randn(5, 4, device=device)
    y = flow.tensor([0, 2, 1, 1, 0], device=device)
    seen = [x, y]
    for _ in range(2):  # the second step reads the momentum buffers made by the first
        hidden = model[1](model[0](x))
        logits = model[2](hidden)
        loss = flow.nn.functional.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        seen += [hidden, logits, loss]
    seen += [p for p in model.parameters()] + [p.grad for p in model.parameters()]
    # the optimizer's state, but its step counts: 0-d CPU tensors, as torch's
    seen += [v for s in opt.state.values() for k, v in sorted(s.items())
             if isinstance(v, flow.Tensor) and k != "step"]
    return seen


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
def test_a_training_step_stays_on_a_registered_device(fake, optimizer):
    on_fake = _train_step(fake, optimizer)
    on_cpu = _train_step("cpu", optimizer)
    assert len(on_fake) == len(on_cpu) >= 20
    off = [i for i, t in enumerate(on_fake) if not _on(fake, t)]
    assert not off, f"tensors that left the device: {off} of {len(on_fake)}"
    assert all(_on("cpu", t) for t in on_cpu)
    for a, b in zip(on_fake, on_cpu):
        np.testing.assert_allclose(np.asarray(a._data), b._data, rtol=1e-6, atol=1e-7)


# ops whose paths once made host arrays: an output the loss does not use (the engine's zero
# grad), host random draws (dropout), factories of a tensor's own (new_zeros)
PATHS = {
    "unused output": lambda x: (x.chunk(2)[0] ** 2).sum(),
    "dropout": lambda x: flow.nn.functional.dropout(x, 0.5).sum(),
    "bernoulli": lambda x: (x * flow.bernoulli(x.detach().sigmoid())).sum(),
    "new_zeros": lambda x: (x + x.new_zeros(x.shape)).sum(),
    "index": lambda x: x[flow.tensor([0, 2], device=x.device)].sum(),
    "layer_norm": lambda x: flow.nn.functional.layer_norm(x, (3,)).sum(),
    "max(dim)": lambda x: x.max(0).values.sum(),
    # rules and composites that build constants (identity matrices, index grids, weights)
    "det": lambda x: flow.linalg.det(x[:3]),
    "svd": lambda x: flow.linalg.svd(x)[1].sum(),
    "einsum": lambda x: flow.einsum("ij,kj->ik", x, x).sum() + flow.einsum("ii->i", x[:3]).sum(),
    "avg_pool": lambda x: F.avg_pool1d(x[None], 2).sum(),
    "adaptive_pool": lambda x: F.adaptive_avg_pool1d(x[None], 2).sum(),
    "interpolate": lambda x: F.interpolate(x[None], scale_factor=2, mode="linear").sum(),
    "grid_sample": lambda x: F.grid_sample(x[None, None], x.new_zeros(1, 2, 2, 2)).sum(),
    "pad": lambda x: F.pad(x[None], (2, 2), mode="reflect").sum(),
    "lstm": lambda x: nn.LSTM(3, 2).to(x.device)(x[:, None])[0].sum(),
    "one_hot": lambda x: (x[:, 0] * F.one_hot(x.new_tensor([0, 2, 1, 0]).long(), 4)[0]).sum(),
    "to_dense": lambda x: (x * flow.eye(4, 3, device=x.device).to_sparse().to_dense()).sum(),
    "fractional_pool": lambda x: F.fractional_max_pool2d(x[None, None], 2, output_size=2).sum(),
    "pad_sequence": lambda x: nn.utils.rnn.pad_sequence([x[0], x[1, :2]]).sum(),
    "jacrev": lambda x: flow.func.jacrev(lambda t: t.sin())(x[0]).sum(),
    "orthogonal": lambda x: (nn.utils.parametrizations.orthogonal(
        nn.Linear(3, 3).to(x.device)).weight * x[:3]).sum(),
}


@pytest.mark.parametrize("name", sorted(PATHS))
def test_forward_and_backward_stay_on_the_device(fake, name):
    flow.manual_seed(0)
    x = flow.randn(4, 3, device="fake", requires_grad=True)
    y = PATHS[name](x)
    y.backward()
    assert _on(fake, y) and _on(fake, x.grad)


def test_to_moves_between_devices_and_the_gradient_comes_back(fake):
    x = flow.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = x.to("fake")
    assert _on(fake, y) and y.grad_fn.name() == "ToCopyBackward0"
    z = (y * y).sum().cpu()
    assert _on("cpu", z) and z.item() == 14.0
    (g,) = flow.autograd.grad(z, x, create_graph=True)
    assert _on("cpu", g) and g.tolist() == [2.0, -4.0, 6.0]
    g.sum().backward()  # the move is differentiable again
    assert x.grad.tolist() == [2.0, 2.0, 2.0]
    assert x.to("cpu") is x and y.to(fake) is y and x.to(fake, flow.float64).dtype is flow.float64


@pytest.mark.parametrize("fast_mode", [False, True])
def test_gradcheck_runs_on_the_device(fake, fast_mode):
    x = flow.randn(3, dtype=flow.float64, device="fake", requires_grad=True)
    assert flow.autograd.gradcheck(lambda t: (t * t).sin(), (x,), fast_mode=fast_mode,
                                   check_forward_ad=True, check_batched_grad=True)
    assert flow.autograd.gradgradcheck(lambda t: (t * t).sin(), (x,), fast_mode=fast_mode)


def test_host_reads_of_a_device_tensor(fake):
    x = flow.tensor([1.5, 2.0], device="fake")
    with pytest.raises(TypeError, match="can't convert fake device type tensor to numpy"):
        x.numpy()
    assert type(x.numpy(force=True)) is np.ndarray and type(np.asarray(x)) is np.ndarray
    assert repr(x) == "tensor([1.5000, 2.0000])" and x.tolist() == [1.5, 2.0]


def test_the_stand_in_device_refuses_host_arrays(fake):
    """What makes the training test a proof: mixing in a CPU array fails, as on a GPU."""
    with pytest.raises(TypeError, match="host array"):
        flow.ones(3, device="fake") + flow.ones(3)


def test_tensors_record_their_device(fake):
    x = flow.ones(2, 3, device="fake")
    assert x.device == fake and str(x.device) == "fake" and not x.is_cpu
    assert flow.zeros_like(x).device == fake  # *_like keep the input's device, as torch's
    assert flow.zeros_like(x, device="cpu").device == flow.device("cpu")
    assert (x + 1).device == fake and x.sum().device == fake
    assert flow.tensor([1.0], device=fake).device == fake
    assert flow.arange(3, device="fake").device == fake
    assert flow.Tensor([1.0], device="fake").device == fake
    assert flow.hann_window(4, device="fake").device == fake
    assert flow.tensor(x).device == fake  # torch.tensor(t) copies on t's device
    assert all(p.device == fake for p in nn.Linear(2, 3, device="fake").parameters())
    assert flow.as_tensor(x) is x and flow.as_tensor(x, device="cpu").device == flow.device("cpu")
    assert flow.tensor([1.0]).device == flow.device("cpu")


def test_an_unregistered_device_raises_naming_the_call():
    with pytest.raises(RuntimeError, match=r"zeros\(\): device 'fake' is not available"):
        flow.zeros(2, device="fake")
    with pytest.raises(RuntimeError, match=r"randn\(\): device 'cuda' is not available"):
        flow.randn(2, device="cuda")


# ---- static: NumPy is called on tensor data only in kernels and at the boundary ------------
ROOT = pathlib.Path(flow.__file__).parent
# modules where arrays meet the host on purpose, each with why
BOUNDARY = {
    "device.py": "the registry of devices and their array modules itself",
    "tensor.py": "the tensor's own conversions to host values (numpy(), __array__, item)",
    "ops/creation.py": "host data (lists, NumPy arrays) and host-drawn samples become tensors",
    "ops/random_factories.py": "host-drawn samples become tensors (split from creation.py)",
    "ops/tensor_data.py": "host data (lists, NumPy arrays) read into arrays (from creation.py)",
    "printing.py": "formats values on the host",
    "serialization.py": "files hold host bytes",
    "torch_format.py": "files hold host bytes",
    "random.py": "generator states are host bytes (torch's too: a CPU ByteTensor)",
    "utils/data": "datasets and collate make host (CPU) batches, as torch's DataLoader",
    "utils/dlpack.py": "DLPack exchange shares host (CPU) memory with other libraries",
    "multiprocessing.py": "shared-memory storage is host memory other processes map",
    "distributed": "MPI sends and receives host buffers",
    "nn/parallel/distributed.py": "gradient buckets are MPI host buffers",
}
# (module, function): why a NumPy call on tensor data there is not a device leak
ALLOWED = {
    ("ops/index.py", "parse_index"): "index lists are Python data, read on the host",
    ("ops/tensor_extra.py", "_positions"): "positions computed from a region's shape (host "
    "ints), an index rather than tensor data",
    ("ops/loss_ctc.py", "_lengths"): "lengths are host integers (torch's CTC takes them as an "
    "IntArrayRef too)",
    ("ops/loss_ctc.py", "ctc_loss"): "targets are padded on the host from those lengths",
}
_META = {"shape", "dtype", "ndim", "size", "itemsize", "strides", "flags", "nbytes"}
# NumPy functions of dtypes, shapes and memory extents, not of values (the memory queries
# dispatch to a device's module through NumPy's __array_function__ protocol)
_NOT_DATA = {"dtype", "result_type", "promote_types", "can_cast", "iinfo", "finfo",
             "issubdtype", "broadcast_shapes", "isscalar", "ndindex", "may_share_memory",
             "shares_memory"}


def _numpy_function(call):
    parts, f = [], call.func
    while isinstance(f, ast.Attribute):
        parts.append(f.attr)
        f = f.value
    if isinstance(f, ast.Name) and f.id in ("np", "numpy") and parts:
        name = ".".join(reversed(parts))
        return None if parts[0] in _NOT_DATA else name
    return None


def _reads_data(expr, data_names):
    """Whether `expr` reads a tensor's array (`t._data`, not `t._data.shape`, nor
    `to_host(t._data)`: the explicit copy to the host) or a local name bound to one."""
    meta = {id(n.value) for n in ast.walk(expr)
            if isinstance(n, ast.Attribute) and n.attr in _META}
    meta.update(id(a) for n in ast.walk(expr) if isinstance(n, ast.Call)
                and getattr(n.func, "id", "") == "to_host" for a in n.args)
    return any(id(n) not in meta and (isinstance(n, ast.Attribute) and n.attr == "_data" or
                                      isinstance(n, ast.Name) and n.id in data_names)
               for n in ast.walk(expr))


_MOVES = {"new_array", "to_device", "new_zeros", "new_full", "new_empty"}


def _reads_host(expr, host_names):
    """Whether `expr` uses a NumPy-made local without moving it to a device first."""
    moved = {id(n) for c in ast.walk(expr) if isinstance(c, ast.Call)
             and getattr(c.func, "id", "") in _MOVES for a in c.args for n in ast.walk(a)}
    return any(isinstance(n, ast.Name) and n.id in host_names and id(n) not in moved
               for n in ast.walk(expr))


def _offenders(path, rel):
    found = []

    def visit_function(fn):
        params = fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
        if any(a.arg == "xp" for a in params):
            return  # a kernel (or its helper): computes with the module it is given
        data_names, host_names = set(), set()
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign):
                names = {n.id for t in node.targets for n in ast.walk(t)
                         if isinstance(n, ast.Name)}
                if _reads_data(node.value, set()):
                    data_names |= names
                if any(isinstance(n, ast.Call) and _numpy_function(n)
                       for n in ast.walk(node.value)):
                    host_names |= names  # made by NumPy: host memory
        for node in ast.walk(fn):
            if not isinstance(node, ast.Call):
                continue
            name = _numpy_function(node)
            args = node.args + [k.value for k in node.keywords]
            if name and any(_reads_data(a, data_names) for a in args):
                found.append((rel, fn.name, node.lineno, f"np.{name} on tensor data"))
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr == "_wrap" and node.args:
                made = [n for n in ast.walk(node.args[0])
                        if isinstance(n, ast.Call) and _numpy_function(n)]
                if made:
                    found.append((rel, fn.name, node.lineno,
                                  f"Tensor._wrap(np.{_numpy_function(made[0])}(...)): a "
                                  "CPU array; use device.new_zeros/new_full/new_array"))
                elif _reads_host(node.args[0], host_names):
                    found.append((rel, fn.name, node.lineno, "Tensor._wrap of an array NumPy "
                                  "made: a CPU array; move it with device.new_array(like, ...)"))

    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            visit_function(node)  # nested functions are seen again (set of findings below)
    return found


def test_numpy_touches_tensor_data_only_in_kernels_and_at_the_boundary():
    found = set()
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if any(rel == b or rel.startswith(b + "/") for b in BOUNDARY):
            continue
        found.update(f for f in _offenders(path, rel) if (f[0], f[1]) not in ALLOWED)
    assert not found, "NumPy calls on tensor data outside kernels (use the tensor's xp, " \
        "flowgrad.device.array_module, or a flowgrad op):\n" + "\n".join(
            f"  {rel}:{line} in {fn}(): {what}" for rel, fn, line, what in sorted(found))


def test_the_allowlist_names_real_offenders():
    """An entry whose function no longer calls NumPy on tensor data must go."""
    live = set()
    for rel, fn in ALLOWED:
        live.update((f[0], f[1]) for f in _offenders(ROOT / rel, rel) if f[1] == fn)
    assert live == set(ALLOWED), f"stale allowlist entries: {set(ALLOWED) - live}"


def _graph_steps(device):
    """Three SGD steps of Linear -> ReLU -> Linear compiled by nn.Graph (fusion and the update
    pass on): losses and final weights."""
    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).to(device)
    opt = flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    class Step(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(opt)

        def build(self, x, y):
            loss = F.cross_entropy(self.model(x) * 2.0 + 1.0, y)
            loss.backward()
            return loss

    step = Step()
    x = flow.randn(5, 4, device=device)
    y = flow.tensor([0, 2, 1, 1, 0], device=device)
    losses = [step(x, y) for _ in range(3)]
    return losses, list(model.parameters())


def test_graph_plan_runs_on_the_device(fake):
    """nn.Graph's generated plan keeps arrays on the input's device: kernel results and the
    fused chains' constants are made with the plan's array module, not NumPy."""
    losses, params = _graph_steps("fake")
    ref_losses, ref_params = _graph_steps("cpu")
    assert all(_on("fake", t) for t in losses + params)
    for a, b in zip(losses + params, ref_losses + ref_params):
        np.testing.assert_allclose(np.asarray(a._data), b._data, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("src_shape, shape", [
    ((), (3, 2)), ((1,), (4,)), ((3,), (2, 3)), ((2, 1), (2, 5)), ((1, 3, 1), (2, 3, 4)),
    ((2, 3), (2, 3)), ((1,), (0,)), ((0,), (2, 0)), ((1, 1), (1, 1))])
def test_broadcast_view_is_numpys_broadcast_to(src_shape, shape):
    src = np.arange(int(np.prod(src_shape)), dtype=np.float32).reshape(src_shape)
    for array in (src, src[::-1] if src.ndim else src, src.astype(np.float64)):
        got, want = broadcast_view(array, shape), np.broadcast_to(array, shape)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
        assert not got.flags.writeable
        assert np.may_share_memory(got, array) == np.may_share_memory(want, array)


def test_broadcast_view_refuses_what_numpy_refuses():
    with pytest.raises(ValueError):
        broadcast_view(np.ones((2, 3)), (2, 4))
    with pytest.raises(ValueError):
        broadcast_view(np.ones((2, 3)), (3,))
