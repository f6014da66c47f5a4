"""torch.fake_quantize_per_tensor_affine / fake_quantize_per_channel_affine against torch:
values and straight-through gradients to the bit in float64, float32 and float16 (torch's
kernels take the per-tensor product in float32 and the per-channel one in the input's dtype),
int and float zero points, and torch's errors."""
import numpy as np
import pytest
import torch

import flowgrad as flow

CASES = [
    ("fake_quantize_per_tensor_affine", (0.1, 3, -8, 7)),
    ("fake_quantize_per_tensor_affine", (0.37, -2, -128, 127)),
    ("fake_quantize_per_channel_affine", (np.array([0.1, 0.2, 0.05, 0.3], np.float32),
                                          np.array([0, 1, -2, 7], np.int32), 0, -8, 7)),
    ("fake_quantize_per_channel_affine", (np.array([0.1, 0.2, 0.05, 0.3, 0.7], np.float32),
                                          np.array([0.5, 1.2, -2, 7, 0], np.float16), 1, 0, 15)),
]


@pytest.mark.parametrize("dt", [np.float64, np.float32, np.float16])
@pytest.mark.parametrize("fn,args", CASES)
def test_fake_quantize_matches_torch_bitwise(fn, args, dt):
    xn = np.random.default_rng(0).standard_normal((4, 5)).astype(dt) * 3
    xn.flat[:3] = [0.05, 0.15, -0.25]  # ties: rounded half to even
    results = []
    for lib in (torch, flow):
        x = lib.tensor(xn, requires_grad=True)
        y = getattr(lib, fn)(x, *[lib.tensor(a) if isinstance(a, np.ndarray) else a
                                  for a in args])
        (y * lib.arange(20.0).view(4, 5).to(y.dtype)).sum().backward()
        results.append((y.detach().numpy(), x.grad.numpy(), str(y.dtype).split(".")[1]))
    (a, ga, da), (b, gb, db) = results
    assert da == db
    np.testing.assert_array_equal(b, a)
    np.testing.assert_array_equal(gb, ga)


def test_fake_quantize_errors_as_torch():
    x = flow.ones(2, 3, dtype=flow.float64)
    s, z = flow.tensor([0.1, 0.2], dtype=flow.float32), flow.tensor([0, 1], dtype=flow.int32)
    with pytest.raises(RuntimeError, match="zero_point. must be between"):
        flow.fake_quantize_per_tensor_affine(x, 0.1, 30, -8, 7)
    with pytest.raises(RuntimeError, match="quant_min. should be less than"):
        flow.fake_quantize_per_tensor_affine(x, 0.1, 0, 8, 7)
    with pytest.raises(NotImplementedError, match="int64"):
        flow.fake_quantize_per_tensor_affine(x.long(), 0.1, 0, -8, 7)
    with pytest.raises(RuntimeError, match="Scale must be Float"):
        flow.fake_quantize_per_channel_affine(x, s.double(), z, 0, -8, 7)
    with pytest.raises(RuntimeError, match="Zero-point must be Int32"):
        flow.fake_quantize_per_channel_affine(x, s, z.long(), 0, -8, 7)
    with pytest.raises(RuntimeError, match="axis. must be between"):
        flow.fake_quantize_per_channel_affine(x, s, z, -2, -8, 7)
