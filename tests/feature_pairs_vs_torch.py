"""Feature pairs in a small training step: flowgrad against torch, values and gradients.

Each feature is one thing a training script does (checkpointing, autocast, hooks, weight_norm,
functional_call, anomaly mode, gradient accumulation, clipping, double backward, in-place
activations, schedulers, optimizers...); a combination runs two steps in torch and in flowgrad
from the same weights and batches and must give the same losses, gradients, parameters, or
raise in both. This probe found checkpoint recomputing outside the forward's autocast and
the reentrant checkpoint inside autograd.grad writing .grad.

    .venv/bin/python tests/feature_pairs_vs_torch.py          # every feature and pair
"""
import contextlib
import itertools
import warnings

import numpy as np
import torch
from graph_feature_pairs import build, optimizer_for  # the same model and optimizers
from vs_torch import magnitude

import flowgrad as flow

FEATURES = ["ckpt", "ckpt_re", "amp", "fwd_hook", "bwd_hook", "tensor_hook", "retain",
            "weight_norm", "functional_call", "anomaly", "pre_hook", "grad_accum", "clip",
            "double_bwd", "no_grad_eval", "detach_mid", "inplace_act", "sched", "zero_grad_none",
            "dropout_eval", "param_freeze", "spectral", "half_cast", "state_reload"]
NEW = ["adam", "bn", "ln", "saved_hooks", "param_hook", "post_acc_hook", "multi_loss",
       "amsgrad", "rmsprop", "nesterov", "foreach_false", "maximize"]
FEATURES = FEATURES + NEW

def run(m, feats, steps=2):
    model = build(m, feats=feats)
    out_log = []
    if "fwd_hook" in feats:
        model[0].register_forward_hook(lambda mod, i, o: o * 1.5)
    if "pre_hook" in feats:
        model[2].register_forward_pre_hook(lambda mod, i: (i[0] * 0.5,))
    if "bwd_hook" in feats:
        model[2].register_full_backward_hook(lambda mod, gi, go: (gi[0] * 2,))
    if "weight_norm" in feats:
        m.nn.utils.parametrizations.weight_norm(model[2])
    if "spectral" in feats:
        m.nn.utils.parametrizations.spectral_norm(model[4])
    if "param_freeze" in feats:
        model[0].weight.requires_grad_(False)
    params, opt, sch = optimizer_for(m, model, feats)
    rng = np.random.default_rng(1)
    for step in range(steps):
        x = m.tensor(rng.standard_normal((5, 6)).astype(np.float32), requires_grad=True)
        y = m.tensor(rng.integers(0, 3, 5))
        def fwd(inp):
            h = inp
            for i, layer in enumerate(model):
                if "ckpt" in feats and i == 2:
                    h = m.utils.checkpoint.checkpoint(layer, h, use_reentrant=False)
                elif "ckpt_re" in feats and i == 2:
                    h = m.utils.checkpoint.checkpoint(layer, h, use_reentrant=True)
                elif "functional_call" in feats and i == 4:
                    h = m.func.functional_call(layer, dict(layer.named_parameters()), (h,))
                elif "inplace_act" in feats and i in (1, 3):
                    h = h.tanh_() if not h.is_leaf else layer(h)
                else:
                    h = layer(h)
                if "tensor_hook" in feats and i == 1 and h.requires_grad:
                    h.register_hook(lambda g: g * 3)
                if "retain" in feats and i == 3 and h.requires_grad:
                    h.retain_grad()
                    fwd.kept = h
                if "detach_mid" in feats and i == 1:
                    h = h.detach() + h * 0.5
            return h
        if "saved_hooks" in feats:
            ctx = m.autograd.graph.saved_tensors_hooks(lambda t: t * 1, lambda t: t)
        elif "anomaly" in feats:
            ctx = m.autograd.detect_anomaly()
        else:
            ctx = contextlib.nullcontext()
        with ctx:
            if "amp" in feats:
                with m.autocast("cpu", dtype=m.bfloat16):
                    out = fwd(x)
                out = out.float()
            elif "half_cast" in feats:
                model.double()
                out = fwd(x.double()).float()
            else:
                out = fwd(x)
            loss = m.nn.functional.cross_entropy(out, y)
            if "double_bwd" in feats:
                g, = m.autograd.grad(loss, x, create_graph=True)
                loss = loss + (g ** 2).sum()
            if "multi_loss" in feats:
                out.pow(2).mean().backward(retain_graph=True)
            if "grad_accum" in feats:
                (loss / 2).backward(retain_graph=True)
                (loss / 2).backward()
            else:
                loss.backward()
        out_log.append(("loss", loss.item()))
        out_log.append(("xgrad", x.grad.numpy().copy()))
        if "retain" in feats:
            out_log.append(("retained", fwd.kept.grad.float().numpy().copy()))
        if "clip" in feats:
            n = m.nn.utils.clip_grad_norm_(params, 0.5)
            out_log.append(("norm", float(n)))
        out_log += [("grad", p.grad.float().numpy().copy() if p.grad is not None else None)
                    for p in params]
        opt.step()
        if sch:
            sch.step()
        opt.zero_grad(set_to_none="zero_grad_none" in feats)
        if "no_grad_eval" in feats or "dropout_eval" in feats:
            model.eval()
            with m.no_grad():
                dtype = next(model.parameters()).dtype
                out_log.append(("eval", model(x.detach().to(dtype)).float().numpy().copy()))
            model.train()
        if "state_reload" in feats:
            sd = {k: v.clone() for k, v in model.state_dict().items()}
            model.load_state_dict(sd)
            osd = opt.state_dict()
            opt.load_state_dict(osd)
    out_log += [("param", p.detach().float().numpy().copy()) for p in model.parameters()]
    return out_log

def compare(a, b, tol):
    if len(a) != len(b):
        return f"length {len(a)} vs {len(b)}"
    for (ka, va), (kb, vb) in zip(a, b):
        if ka != kb:
            return f"key {ka} vs {kb}"
        if va is None or vb is None:
            if (va is None) != (vb is None):
                return f"{ka}: None mismatch {va is None} vs {vb is None}"
            continue
        va, vb = np.asarray(va, dtype=np.float64), np.asarray(vb, dtype=np.float64)
        if va.shape != vb.shape:
            return f"{ka}: shape {va.shape} vs {vb.shape}"
        if not np.allclose(va, vb, rtol=tol, atol=tol * magnitude(vb), equal_nan=True):
            return f"{ka}: max diff {np.abs(va - vb).max():.3g} (scale {magnitude(vb):.3g})"
    return None

# flowgrad computes these where torch refuses: an in-place write on the output of a module
# with a full backward hook (torch's BackwardHookFunction view); flowgrad's gradients there
# are the hook's (checked against the out-of-place step in tests/test_nn_module.py)
PERMISSIVE = {frozenset(("bwd_hook", "inplace_act"))}


def differ(feats):
    """None when torch and flowgrad agree on `feats` (or both raise), else what differs."""
    tol = 3e-2 if "amp" in feats else 1e-4
    outcomes = []
    for lib in (torch, flow):
        try:
            with warnings.catch_warnings():  # (deprecations, autocast notes: not compared)
                warnings.simplefilter("ignore")
                outcomes.append(run(lib, feats))
        except Exception as e:  # noqa: BLE001 - a raise is an outcome to compare
            outcomes.append(f"{type(e).__name__}: {str(e)[:80]}")
    t, f = outcomes
    if isinstance(t, str) or isinstance(f, str):
        if isinstance(t, str) == isinstance(f, str):
            return None
        return f"torch: {t if isinstance(t, str) else 'ok'} | flowgrad: " \
               f"{f if isinstance(f, str) else 'ok'}"
    return compare(f, t, tol)


if __name__ == "__main__":
    combos = [(f,) for f in FEATURES] + list(itertools.combinations(FEATURES, 2))
    bad = 0
    for feats in combos:
        d = differ(feats)
        if d and not any(p <= set(feats) for p in PERMISSIVE):
            bad += 1
            print(feats, d)
    print("combos", len(combos), "differ", bad)
