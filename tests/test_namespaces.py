"""torch's namespaces that scripts import, answered on the CPU, against torch: backends,
accelerator, mps/xpu, cuda memory calls, jit, onnx, hub, multiprocessing, threads, typed
tensor classes, memory formats, and flow.compile (compiled steps equal eager ones)."""
import warnings

import numpy as np
import pytest
import torch

import flowgrad as flow


@pytest.mark.parametrize("expr", [
    "m.backends.cudnn.is_available()", "m.backends.cudnn.version()",
    "m.backends.mps.is_available()", "m.backends.mps.is_built()",
    "m.backends.cuda.is_built()", "m.backends.mkldnn.is_available() and False",
    "m.accelerator.is_available()", "m.accelerator.current_accelerator()",
    "m.xpu.is_available()", "m.mps.is_available()", "m.xpu.device_count()",
    "m.cuda.memory_allocated()", "m.cuda.max_memory_allocated()", "m.cuda.empty_cache()",
    "m.cuda.is_bf16_supported()", "m.jit.is_scripting()", "m.jit.is_tracing()",
    "m.onnx.is_in_onnx_export()", "m.compiler.is_compiling()",
    "(m.ones(2).is_cuda, m.ones(2).is_xpu, m.ones(2).is_mps, m.ones(2).is_meta)",
])
def test_cpu_answers_match_torch(expr):
    assert eval(expr, {"m": flow}) == eval(expr, {"m": torch})


def test_backend_flags_are_recorded():
    for mod, name, value in [(flow.backends.cudnn, "benchmark", True),
                             (flow.backends.cudnn, "deterministic", True),
                             (flow.backends.cuda.matmul, "allow_tf32", True),
                             (flow.backends.opt_einsum, "strategy", "greedy")]:
        old = getattr(mod, name)
        setattr(mod, name, value)
        assert getattr(mod, name) == value
        setattr(mod, name, old)
    import flowgrad.backends.cudnn as cudnn  # the spelling scripts use

    assert cudnn is flow.backends.cudnn
    with flow.backends.cuda.sdp_kernel(enable_flash=False):
        assert not flow.backends.cuda.flash_sdp_enabled()
    assert flow.backends.cuda.flash_sdp_enabled()


def test_accelerator_index_raises_as_torch():
    with pytest.raises(RuntimeError, match="Cannot access accelerator device when none"):
        flow.accelerator.current_device_index()


def test_num_threads_sets_the_blas_pool():
    from threadpoolctl import threadpool_info

    before = flow.get_num_threads()
    try:
        flow.set_num_threads(1)
        assert flow.get_num_threads() == 1
        assert all(p["num_threads"] == 1 for p in threadpool_info() if p["user_api"] == "blas")
    finally:
        flow.set_num_threads(before)
    assert flow.get_num_threads() == before
    from flowgrad import blas
    if blas.BACKEND == "mkl":  # beside MKL's pool the other BLAS pools stay at one thread
        # a per-thread count left in this thread (as another library sharing MKL may set)
        # does not hide the count asked for
        blas._LIB.MKL_Set_Num_Threads_Local(1)
        flow.set_num_threads(2)
        pools = [p for p in threadpool_info() if p["user_api"] == "blas"]
        assert [p["num_threads"] for p in pools if p["internal_api"] == "mkl"] == [2]
        assert all(p["num_threads"] == 1 for p in pools if p["internal_api"] != "mkl")
        flow.set_num_threads(before)
    with pytest.raises(RuntimeError, match="set_num_threads expects a positive integer"):
        flow.set_num_threads(0)
    flow.set_num_interop_threads(2)
    assert flow.get_num_interop_threads() == 2


def test_jit_returns_the_callable_and_notes_once():
    import flowgrad.jit as jit

    jit._noted[0] = False
    model = flow.nn.Linear(2, 2)
    with pytest.warns(UserWarning, match="TorchScript is not available"):
        assert jit.script(model) is model
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert jit.trace(len, (1,)) is len  # the note came once already

    @jit.ignore
    def f(x):
        return x + 1

    @jit.unused
    def g(x):
        return x

    assert f(1) == 2 and g(3) == 3 and jit.ignore(drop=True)(f) is f
    assert jit.Final is __import__("typing").Final
    with pytest.raises(NotImplementedError, match="state_dict"):
        jit.save(model, "m.pt")


def test_onnx_and_hub_raise_clearly():
    with pytest.raises(NotImplementedError, match="no ONNX exporter"):
        flow.onnx.export(flow.nn.Linear(1, 1), (flow.ones(1),), "m.onnx")
    with pytest.raises(NotImplementedError, match="flowgrad.hub.load is not available"):
        flow.hub.load("pytorch/vision", "resnet18", pretrained=True)


def _worker(rank, queue, scale):
    queue.put((rank, (flow.ones(2) * scale * rank).tolist()))


def _failing(rank):
    raise ValueError(f"rank {rank} failed")


def test_multiprocessing_spawn_and_queue():
    mp = flow.multiprocessing
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    mp.spawn(_worker, args=(queue, 3.0), nprocs=2, start_method="fork")
    assert sorted(queue.get(timeout=10) for _ in range(2)) == [(0, [0.0, 0.0]), (1, [3.0, 3.0])]
    with pytest.raises(mp.ProcessRaisedException, match="ValueError: rank 0 failed"):
        mp.spawn(_failing, nprocs=1, start_method="fork")


@pytest.mark.parametrize("name", ["FloatTensor", "DoubleTensor", "HalfTensor",
                                  "BFloat16Tensor", "LongTensor", "IntTensor", "ShortTensor",
                                  "CharTensor", "ByteTensor", "BoolTensor"])
def test_typed_tensor_classes_match_torch(name):
    data = [[1.5, -2.0, 0.0], [3.0, 4.25, 1.0]] if name not in ("ByteTensor",) else \
        [[1.5, 2.0, 0.0], [3.0, 4.25, 1.0]]
    f, t = getattr(flow, name)(data), getattr(torch, name)(data)
    assert str(f.dtype).split(".")[1] == str(t.dtype).split(".")[1]
    np.testing.assert_array_equal(f.float().numpy(), t.float().numpy())
    assert getattr(flow, name)(2, 3).shape == getattr(torch, name)(2, 3).shape
    assert isinstance(f, getattr(flow, name)) and isinstance(f, flow.Tensor)
    other = "LongTensor" if name != "LongTensor" else "FloatTensor"
    assert not isinstance(f, getattr(flow, other))
    assert f.type() == t.type().replace("torch.", "flowgrad.")
    assert issubclass(getattr(flow, name), flow.Tensor)


def test_tensor_type_conversions():
    x = flow.tensor([1.7, -2.2])
    assert x.type("torch.LongTensor").tolist() == torch.tensor([1.7, -2.2]).type(
        "torch.LongTensor").tolist()
    assert x.type(flow.DoubleTensor).dtype is flow.float64
    assert x.type(flow.int32).dtype is flow.int32
    with pytest.raises(RuntimeError, match="no CUDA"):
        x.type("torch.cuda.FloatTensor")


def test_memory_formats_lay_the_memory_out():
    x = flow.ones(2, 3, 4, 5)
    assert not x.is_contiguous(memory_format=flow.channels_last)
    y = x.contiguous(memory_format=flow.channels_last)
    assert y.is_contiguous(memory_format=flow.channels_last) and not y.is_contiguous()
    assert y.stride() == (60, 1, 15, 3)
    z = x.to(memory_format=flow.channels_last)
    assert z.is_contiguous(memory_format=flow.channels_last)
    assert x.is_contiguous(memory_format=flow.contiguous_format)
    assert repr(flow.channels_last) == "flowgrad.channels_last"
    with pytest.raises(RuntimeError, match="required rank 4 tensor"):
        flow.ones(2, 3).contiguous(memory_format=flow.channels_last)


def _net(seed):
    flow.manual_seed(seed)
    return flow.nn.Sequential(flow.nn.Linear(4, 8), flow.nn.BatchNorm1d(8), flow.nn.ReLU(),
                              flow.nn.Dropout(0.3), flow.nn.Linear(8, 3))


def test_compile_trains_like_eager():
    eager, compiled_model = _net(0), _net(0)
    compiled = flow.compile(compiled_model)
    opts = [flow.optim.SGD(m.parameters(), lr=0.1) for m in (eager, compiled)]
    x, y = flow.randn(16, 4), flow.randint(0, 3, (16,))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no eager fallback
        for step in range(3):
            n = 16 if step < 2 else 10  # a last smaller batch: a second plan
            losses = []
            for model, opt in zip((eager, compiled), opts):
                flow.manual_seed(step)
                loss = flow.nn.functional.cross_entropy(model(x[:n]), y[:n])
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.item())
            assert losses[0] == losses[1]
    for a, b in zip(eager.state_dict().values(), compiled_model.state_dict().values()):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert list(compiled.state_dict())[0] == "_orig_mod.0.weight"
    eager.eval()
    compiled.eval()
    with flow.no_grad():
        np.testing.assert_array_equal(compiled(x).numpy(), eager(x).numpy())


# changes after a compiled call: torch.compile's guards recompile; so does flow.compile (the
# graph's StalePlanError), where its plan had ignored a hook added later, silently
CHANGES = {
    "forward hook": lambda m: m[0].register_forward_hook(lambda mod, i, out: out * 10),
    "double": lambda m: m.double(),
    "parameter replaced": lambda m: setattr(m[4], "weight", flow.nn.Parameter(
        flow.ones(3, 8, dtype=m[4].bias.dtype))),
    "eps setting": lambda m: setattr(m[1], "eps", 0.5),
    "frozen parameter": lambda m: m[0].weight.requires_grad_(False),
}


@pytest.mark.parametrize("change", CHANGES)
def test_compile_traces_anew_after_the_model_changes(change):
    eager, compiled_model = _net(0), _net(0)
    compiled = flow.compile(compiled_model)
    x = flow.randn(16, 4)
    for step in range(2):
        if step:
            CHANGES[change](eager)
            CHANGES[change](compiled_model)
            x = x.to(eager[0].weight.dtype)
        grads = []
        for model in (eager, compiled):
            flow.manual_seed(step)
            model.zero_grad()
            out = model(x)
            out.square().sum().backward()
            grads.append(out.detach().numpy())
        np.testing.assert_allclose(grads[1], grads[0], rtol=1e-6)
        for a, b in zip(eager.parameters(), compiled_model.parameters()):
            assert (a.grad is None) == (b.grad is None)
            if a.grad is not None:
                np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=1e-5,
                                           atol=1e-6)


def test_compile_falls_back_to_eager_with_a_warning():
    class DataDependent(flow.nn.Module):
        def forward(self, x):
            return x * 2 if x.sum().item() > 0 else x  # reading a value: not traceable

    model = flow.compile(DataDependent())
    with pytest.warns(UserWarning, match="running DataDependent eagerly"):
        assert model(flow.ones(2)).tolist() == [2.0, 2.0]
    assert model(-flow.ones(2)).tolist() == [-1.0, -1.0]
    with pytest.raises(RuntimeError, match="fullgraph=True"):
        flow.compile(DataDependent(), fullgraph=True)(flow.ones(2))


def test_compile_functions_and_decorator_form():
    @flow.compile(fullgraph=True)
    def f(x, w):
        return (x @ w).tanh().sum()

    x, w = flow.randn(3, 4), flow.randn(4, 2, requires_grad=True)
    f(x, w).backward()
    xt, wt = torch.from_numpy(x.numpy()), torch.from_numpy(w.detach().numpy()).requires_grad_()
    (xt @ wt).tanh().sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), wt.grad.numpy(), rtol=1e-5, atol=1e-6)


_CAPTURED = flow.nn.Linear(3, 2)  # (a global the compiled function below names)


def test_compile_of_a_function_follows_the_modules_and_tensors_it_captures():
    """flow.compile(fn) where fn reaches modules through its closure or globals (as torch
    users write loss functions): the compiled output required no grad (backward raised where
    eagerly the parameters got gradients) and a module changed after compiling (a dropout's
    p, a replaced parameter) kept its traced plan with no error. They are the compiled
    model's submodules now: gradients, and a trace anew on a change, as torch.compile."""
    drop = flow.nn.Dropout(0.0)
    w = flow.randn(2, requires_grad=True)

    def loss(x):
        return (drop(_CAPTURED(x)) * w).sum()

    compiled = flow.compile(loss)
    x = flow.randn(4, 3)
    for change in (None, "p", "weight", "global"):
        if change == "p":
            drop.p = 1.0
        elif change == "weight":
            _CAPTURED.weight = flow.nn.Parameter(flow.ones(2, 3))
        elif change == "global":
            globals()["_CAPTURED"] = flow.nn.Linear(3, 2)
        grads = []
        for fn in (loss, compiled):
            _CAPTURED.zero_grad()
            w.grad = None
            out = fn(x)
            out.backward()
            grads.append((out.item(), _CAPTURED.weight.grad.numpy().copy(), w.grad.numpy()))
        (a, ga, gwa), (b, gb, gwb) = grads
        assert a == pytest.approx(b, rel=1e-6, abs=1e-7), change
        np.testing.assert_allclose(gb, ga, rtol=1e-6, atol=1e-7, err_msg=change)
        np.testing.assert_allclose(gwb, gwa, rtol=1e-6, atol=1e-7, err_msg=change)
