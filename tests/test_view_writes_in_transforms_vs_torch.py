"""Writes into views inside func transforms (vmap above all), against torch.func.

Three gaps found by vmap_fuzz (278837: grad and vmap_jvp_of_grad; 2350: vmap_jvp_of_grad;
800048: grad):
- `v[i] = value` on a view v is torch's `v[i].copy_(value)`: the base is rebased and v is
  regenerated from it when next read, so after `base.detach_()` v leads nowhere. Under vmap
  flowgrad wrote v itself, so v kept a history to `value`: per-example gradients came out
  wrong with no error.
- Under vmap(jvp(grad)), a no_grad write through a view made under no_grad made the batched
  tangent rule regenerate that view (and raise, as a no_grad view must when it is written
  with grad enabled), where eager regenerates a view only to record an op.
- An unrecorded (no_grad) write through a view under vmap, jvp or the tracer marked the view
  up to date; eager and torch leave it stale, so its next read regenerates it from the base
  (after `base.detach_()`: no history). Under vmap(grad) it kept its old history: wrong
  per-example gradients, no error.
- Under vmap, an op's saved output written into a tensor in place (tanh_) stayed the op's
  own array: a later write to the tensor was neither read by backward nor caught by the
  version check (vmap_fuzz grad 803638, and the known 986, 1539, 2530).
Each row is one f under seven transforms; values and raise/no-raise must be torch's."""
import numpy as np
import pytest
import torch

import flowgrad as flow


def _int_index_then_base_detached(m, x):
    t = x * x + 1.0
    v = t.reshape(-1)
    v[0] = x[1] * 3.0
    t.detach_()
    return (v.sin() * 0.5).sum() + x.sin().sum()


def _narrowing_slice_then_base_detached(m, x):
    t = (x * 2.0).unsqueeze(0).expand(2, 2).clone()
    v = t[:, 0:2]
    v[0:1] = x.unsqueeze(0)
    t.detach_()
    return (v * v).sum() + x.cos().sum()


def _int_index_base_kept(m, x):
    t = x * x + 1.0
    v = t.reshape(-1)
    v[1] = x[0] * 3.0
    return (v.sin() * 0.5).sum() + (t * t).sum()


def _ellipsis_index_then_base_detached(m, x):  # the whole view: v itself is written
    t = x * x + 1.0
    v = t.reshape(-1)
    v[...] = x * 3.0
    t.detach_()
    return (v.sin() * 0.5).sum() + x.sin().sum()


def _no_grad_augmented_assignment(m, x):  # vmap_fuzz 278837's vmap_jvp_of_grad
    t = x / (x * x + 1.0)
    with m.no_grad():
        t[...] += 0.75
    return (t.sin() * 0.3).sum() + x.sin().sum()


def _no_grad_write_through_a_no_grad_view(m, x):
    t = x.exp()
    with m.no_grad():
        v = t.unsqueeze(0).expand(2, 2).permute(1, 0)
        w = t[0:1]
        w.mul_(2.0)
    return (v * x.unsqueeze(1)).sum() + (t * t).sum()


def _no_grad_write_through_a_view_then_base_detached(m, x):  # vmap_fuzz grad 800048
    t = x * x
    v = t.unsqueeze(0)
    with m.no_grad():
        v.mul_(2.0)  # unrecorded: v is stale until read, then regenerated from t
    t.detach_()
    return (v.sin() * 0.5).sum() + (t * x).sum() + x.sin().sum()


def _saved_output_written_through_data(m, x):  # vmap_fuzz grad 803638
    t = x * x
    v = t[0:1]
    v.tanh_()  # saves its output: v's storage
    with m.no_grad():
        v.data.fill_(0.5)  # unseen by the version check: backward reads 0.5
    return t.sin().sum()


def _saved_output_written_after(m, x):  # torch's backward raises (seeds 986, 1539, 2530)
    t = x * x
    t.tanh_()
    t.mul_(2.0)
    return t.sum()


CASES = [_int_index_then_base_detached, _narrowing_slice_then_base_detached,
         _int_index_base_kept, _ellipsis_index_then_base_detached,
         _no_grad_augmented_assignment, _no_grad_write_through_a_no_grad_view,
         _no_grad_write_through_a_view_then_base_detached, _saved_output_written_through_data,
         _saved_output_written_after]
TRANSFORMS = ["grad", "vmap_grad", "jvp", "vmap_jvp", "grad_of_grad", "jvp_of_grad",
              "vmap_jvp_of_grad"]


def _run(m, body, transform):
    """(the transform's result as an array, None) or (None, the exception type)."""
    F = m.func

    def f(x):
        return body(m, x)

    def grad_of_grad(x, v):
        return F.grad(lambda x: (F.grad(f)(x) * v).sum())(x)

    def jvp_of_grad(x, v):
        return F.jvp(F.grad(f), (x,), (v,))[1]

    xs = m.tensor([[0.46, -0.3], [1.2, 0.7], [-0.8, 0.25]], dtype=m.float64)
    vs = m.cos(3 * xs)
    x, v = xs[0], vs[0]
    try:
        result = {
            "grad": lambda: F.grad(f)(x),
            "vmap_grad": lambda: F.vmap(F.grad(f))(xs),
            "jvp": lambda: F.jvp(f, (x,), (v,))[1],
            "vmap_jvp": lambda: F.vmap(lambda x, v: F.jvp(f, (x,), (v,))[1])(xs, vs),
            "grad_of_grad": lambda: grad_of_grad(x, v),
            "jvp_of_grad": lambda: jvp_of_grad(x, v),
            "vmap_jvp_of_grad": lambda: F.vmap(jvp_of_grad)(xs, vs),
        }[transform]()
    except Exception as error:  # noqa: BLE001 - an outcome to compare
        return None, type(error).__name__
    return np.asarray(result.detach().numpy()), None


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("body", CASES, ids=lambda f: f.__name__[1:])
def test_view_write_in_transform_matches_torch(body, transform):
    theirs, their_error = _run(torch, body, transform)
    ours, our_error = _run(flow, body, transform)
    assert (our_error is None) == (their_error is None), (our_error, their_error)
    if theirs is not None:
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)
