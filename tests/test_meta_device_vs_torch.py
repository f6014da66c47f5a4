"""The 'meta' device against torch's: tensors with a shape and a dtype and no values. Factories,
modules built in a `device("meta")` block, ops and their backward keep shapes, dtypes and the
device; `to_empty` gives storage; load_state_dict copies nothing (warned) unless assign=True;
reading a value raises (the exception type compared with torch's). Two choices differ from
torch, each tested as flowgrad's: an op mixing meta and CPU tensors gives a meta result
(torch raises), and flowgrad.save refuses a meta tensor (torch writes one without data)."""
import warnings

import numpy as np
import pytest
import torch

import flowgrad as flow


def _meta(m, *shape, **kw):
    return m.ones(*shape, device="meta", **kw)


CASES = {
    "factories": lambda m: [(t.device.type, tuple(t.shape), str(t.dtype).split(".")[-1])
                            for t in (m.empty(2, 3, device="meta"),
                                      m.zeros(4, dtype=m.int64, device="meta"),
                                      m.rand(2, device="meta"), m.arange(5, device="meta"),
                                      m.tensor([1.0, 2.0], device="meta"),
                                      m.full((2,), 3.0, device="meta"),
                                      m.empty_like(_meta(m, 3)),
                                      m.ones(2).to("meta"))],
    "is_meta": lambda m: (_meta(m, 2).is_meta, m.ones(2).is_meta),
    "repr": lambda m: [repr(t).replace("torch.", "").replace("flowgrad.", "")
                       for t in (_meta(m, 2, 3), m.zeros(2, dtype=m.int64, device="meta"),
                                 _meta(m, 2, requires_grad=True))],
    "ops": lambda m: [(t.device.type, tuple(t.shape), str(t.dtype).split(".")[-1])
                      for t in (_meta(m, 2, 3) @ _meta(m, 3, 4), _meta(m, 2, 3) > 0,
                                _meta(m, 2, 3).sum(1), m.cat([_meta(m, 2), _meta(m, 3)]),
                                _meta(m, 2, 3)[0], _meta(m, 2, 3)[:, 1:].clone(),
                                _meta(m, 2, 3).add_(1), m.nn.functional.softmax(
                                    _meta(m, 2, 3), -1), _meta(m, 4, 3).max(0).values)],
    "backward": lambda m: (lambda w: ((m.ones(4, 3, device="meta") @ w).relu().sum()
                                      .backward(), (w.grad.device.type,
                                                    tuple(w.grad.shape)))[1])(
        _meta(m, 3, 2, requires_grad=True)),
    "default_device": lambda m: (m.set_default_device("meta"), m.zeros(1).device.type,
                                 m.nn.Linear(2, 2).weight.device.type,
                                 m.set_default_device(None), m.zeros(1).device.type)[1:5:3],
}


def _module_on_meta(m):
    with m.device("meta"):
        net = m.nn.Sequential(m.nn.Linear(3, 4), m.nn.BatchNorm1d(4), m.nn.ReLU(),
                              m.nn.Linear(4, 2))
    before = sorted({t.device.type for t in [*net.parameters(), *net.buffers()]})
    shapes = {k: tuple(v.shape) for k, v in net.state_dict().items()}
    net.to_empty(device="cpu")
    after = sorted({t.device.type for t in [*net.parameters(), *net.buffers()]})
    state = {k: m.tensor(np.linspace(-1, 1, int(np.prod(s))).reshape(s))
             for k, s in shapes.items() if k != "1.num_batches_tracked"}
    net.load_state_dict(state, strict=False)
    out = net.eval()(m.ones(2, 3)).detach().numpy()
    return before, after, shapes, type(net[0].weight).__name__, net[0].weight.requires_grad, out


def _load_into_meta(m):
    with m.device("meta"):
        lin = m.nn.Linear(2, 2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lin.load_state_dict({"weight": m.ones(2, 2), "bias": m.zeros(2)})
    noop = (lin.weight.device.type, [str(w.message).split(":")[0] for w in caught])
    lin.load_state_dict({"weight": m.ones(2, 2), "bias": m.zeros(2)}, assign=True)
    return noop, lin.weight.device.type, lin(m.ones(1, 2)).tolist(), type(lin.weight).__name__


def _generator_untouched(m):
    """Draws on meta (and the inits of a module built there) draw nothing."""
    m.manual_seed(0)
    first = m.rand(3).numpy()
    m.manual_seed(0)
    m.rand(100, device="meta"), m.randn(2, device="meta")
    m.randint(0, 5, (3,), device="meta"), m.randperm(4, device="meta")
    with m.device("meta"):
        m.nn.Linear(8, 8)
    return bool((m.rand(3).numpy() == first).all())


CASES["generator_untouched"] = _generator_untouched
CASES["module_on_meta"] = _module_on_meta
CASES["load_into_meta"] = _load_into_meta


def _same(a, b):
    if isinstance(a, np.ndarray):
        np.testing.assert_allclose(a, b, rtol=1e-6)
        return
    if isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
        return
    assert a == b


@pytest.mark.parametrize("name", list(CASES))
def test_meta_as_torch(name):
    try:
        _same(CASES[name](flow), CASES[name](torch))
    finally:
        flow.set_default_device(None)
        torch.set_default_device(None)  # (torch's "cpu" would leave a device mode on)


READS = {
    "item": lambda m: _meta(m, ()).item(),
    "bool": lambda m: bool(_meta(m, ())),
    "float": lambda m: float(_meta(m, ())),
    "tolist": lambda m: _meta(m, 2).tolist(),
    "numpy": lambda m: _meta(m, 2).numpy(),
    "to_cpu": lambda m: _meta(m, 2).to("cpu"),
    "module_to_cpu": lambda m: m.nn.Linear(2, 2, device="meta").to("cpu"),
    "equal": lambda m: m.equal(_meta(m, 2), _meta(m, 2)),
}


@pytest.mark.parametrize("name", list(READS))
def test_reading_a_value_raises_as_torch(name):
    errors = []
    for m in (torch, flow):
        with pytest.raises(Exception) as info:
            READS[name](m)
        errors.append(info.type)
    assert issubclass(errors[1], errors[0]) or errors[1] is errors[0]


def test_flowgrads_choices_where_torch_differs(tmp_path):
    mixed = flow.ones(2, device="meta") + flow.ones(2)
    assert mixed.is_meta  # (torch: "Tensor on device cpu is not on the expected device meta")
    with pytest.raises(NotImplementedError, match="no data"):
        flow.save(flow.ones(2, device="meta"), tmp_path / "meta.safetensors")


def test_a_big_layer_on_meta_takes_no_memory():
    import tracemalloc

    tracemalloc.start()
    with flow.device("meta"):
        layer = flow.nn.Linear(4096, 4096)  # 64 MiB of float32 on the CPU
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert layer.weight.is_meta and peak < 8 * 2 ** 20
