"""torch's autograd.Function database through flowgrad (tests/autograd_function_db_vs_torch.py:
14 custom Functions with NumPy kernels, setup_context, save_for_forward, mark_dirty,
mark_non_differentiable, once_differentiable, jvp, vmap and generate_vmap_rule): outputs,
gradients, second-order gradients, func.jvp and func.vmap as torch's. The regression tests
after it are the fixes it led to, each on its own."""
import numpy as np
import pytest

pytest.importorskip("expecttest")  # torch's test internals import it

import autograd_function_db_vs_torch as harness  # noqa: E402
import torch  # noqa: E402

import flowgrad as flow  # noqa: E402

DB, MODULE = harness.function_db()
SCOPE = harness.flow_namespace(MODULE)


@pytest.mark.parametrize("info", DB, ids=[info.name for info in DB])
def test_function_matches_torch(info):
    findings = harness.probe(info, SCOPE)
    real = [f for f in findings if not f[2].startswith("skip")]
    assert not real, "\n".join(f"[{k}] {where}\n    {m[:300]}" for k, where, m in real[:6])


def test_numpy_of_a_tensor_that_requires_grad_under_no_grad():
    x = flow.ones(2, requires_grad=True)
    with flow.no_grad():
        assert x.numpy().tolist() == [1.0, 1.0]  # torch's check is grad mode and requires_grad
    with pytest.raises(RuntimeError, match="requires grad"):
        x.numpy()


class _NoJvp(flow.autograd.Function):
    @staticmethod
    def forward(x):
        return flow.tensor(np.sin(x.numpy()))  # leaves flowgrad's ops: no tangent to derive

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, g):
        return g


def test_a_function_without_jvp_raises_under_forward_ad_instead_of_a_zero_tangent():
    with pytest.raises(NotImplementedError, match="jvp"):
        flow.func.jvp(_NoJvp.apply, (flow.ones(2),), (flow.ones(2),))


class _Scale(flow.autograd.Function):
    @staticmethod
    def forward(x, y, factor=3.0):  # a default: setup_context sees it, as torch passes it
        return x * y * factor, "a non-tensor output"

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, y, factor = inputs
        ctx.save_for_backward(x, y)
        ctx.save_for_forward(x, y)
        ctx.factor = factor

    @staticmethod
    def backward(ctx, g, g_text):  # one grad per output: None for the string
        assert g_text is None
        x, y = ctx.saved_tensors
        return g * y * ctx.factor, g * x * ctx.factor, None  # (the default counts, as torch)

    @staticmethod
    def jvp(ctx, tx, ty, _):  # y has no tangent: zeros reach jvp, as in torch
        x, y = ctx.saved_tensors
        return (tx * y + ty * x) * ctx.factor, None


def test_setup_context_defaults_non_tensor_outputs_and_zero_tangents():
    x, y = flow.tensor([1.0, 2.0], requires_grad=True), flow.tensor([3.0, 4.0])
    out, text = _Scale.apply(x, y)
    assert text == "a non-tensor output" and out.tolist() == [9.0, 24.0]
    out.sum().backward()
    assert x.grad.tolist() == [9.0, 12.0]
    primal, tangent = flow.func.jvp(lambda v: _Scale.apply(v, y)[0], (x.detach(),),
                                    (flow.ones(2),))
    assert tangent.tolist() == [9.0, 12.0]
    with pytest.raises(RuntimeError, match="only tensors"):  # (the string output)
        flow.func.jvp(lambda v: _Scale.apply(v, y), (x.detach(),), (flow.ones(2),))


def test_take_along_dim_with_indices_computed_under_vmap():
    b = np.random.default_rng(0).standard_normal((3, 4, 5))
    out = [m.func.vmap(lambda x: m.take_along_dim(x, m.argsort(x, dim=1), dim=1))(m.tensor(b))
           for m in (torch, flow)]
    np.testing.assert_array_equal(out[1].numpy(), out[0].numpy())
