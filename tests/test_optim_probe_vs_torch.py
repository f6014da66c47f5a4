"""Optimizers, lr schedulers and nn.utils against torch, on the cases a differential probe
found wrong: 0-d tensor learning rates, complex parameters (stepped on their real views),
Adagrad's accumulator start, tensor lrs in schedulers, half-precision and complex gradient
clipping, parametrization checks, and torch's raise/no-raise behaviour."""
import warnings

import numpy as np
import pytest
import torch

import flowgrad as flow

SHAPES = [(3, 4), (5,), (2, 3, 2)]


def _trajectory(fw, name, kw, steps=6, complex_params=False, lr_tensor=None):
    rng = np.random.default_rng(0)
    if complex_params:
        ps = [fw.tensor(rng.standard_normal(s) + 1j * rng.standard_normal(s),
                        requires_grad=True) for s in SHAPES]
    else:
        ps = [fw.tensor(rng.standard_normal(s), requires_grad=True) for s in SHAPES]
    kw = dict(kw)
    if lr_tensor is not None:
        kw["lr"] = fw.tensor(lr_tensor)
    opt = getattr(fw.optim, name)(ps, **kw)
    out = []
    for _ in range(steps):
        for p in ps:
            g = rng.standard_normal(tuple(p.shape))
            if complex_params:
                g = g + 1j * rng.standard_normal(tuple(p.shape))
            p.grad = fw.tensor(g)
        opt.step()
        out.append([p.detach().numpy().copy() for p in ps])
    state = {k: {kk: vv.detach().numpy().copy() for kk, vv in v.items() if hasattr(vv, "numpy")}
             for k, v in opt.state_dict()["state"].items()}
    return out, state


def _assert_same(fw_result, torch_result, rtol=1e-7, atol=1e-9):
    (ours, ours_state), (theirs, their_state) = fw_result, torch_result
    for a, b in zip(ours, theirs):
        for x, y in zip(a, b):
            np.testing.assert_allclose(x, y, rtol=rtol, atol=atol)
    assert ours_state.keys() == their_state.keys()
    for k in ours_state:
        assert ours_state[k].keys() == their_state[k].keys()
        for kk in ours_state[k]:
            np.testing.assert_allclose(ours_state[k][kk], their_state[k][kk], rtol=rtol,
                                       atol=atol)


LR_TENSOR_CASES = [
    ("SGD", dict(momentum=0.9, nesterov=True, weight_decay=0.1), 0.1),
    ("Adam", dict(amsgrad=True, weight_decay=0.1), 0.01),
    ("AdamW", dict(maximize=True), 0.01),
    ("Adamax", dict(weight_decay=0.1), 0.01),
    ("NAdam", dict(decoupled_weight_decay=True, weight_decay=0.1), 0.01),
    ("RAdam", dict(betas=(0.9, 0.5)), 0.01),
    ("Adagrad", dict(lr_decay=0.1), 0.1),
    ("Adadelta", dict(rho=0.5), 0.3),
    ("RMSprop", dict(centered=True, momentum=0.5), 0.01),
    ("Adafactor", dict(), 0.5),
]


@pytest.mark.parametrize("name,kw,lr", LR_TENSOR_CASES, ids=[c[0] for c in LR_TENSOR_CASES])
@pytest.mark.parametrize("foreach", [None, False])
def test_lr_as_0d_tensor_steps_like_torch(name, kw, lr, foreach):
    # a 0-d tensor lr used to leave the parameters unchanged (ndarray += Tensor rebinds)
    kw = dict(kw, foreach=foreach)
    ours = _trajectory(flow, name, kw, lr_tensor=lr)
    theirs = _trajectory(torch, name, kw, lr_tensor=lr)
    # torch keeps the float32 lr tensor in its step-size arithmetic: float32 rounding
    _assert_same(ours, theirs, rtol=1e-5, atol=1e-6)
    start = np.random.default_rng(0).standard_normal(SHAPES[0])
    assert not np.allclose(ours[0][-1][0], start)


COMPLEX_CASES = [
    ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=0.1)),
    ("AdamW", dict(lr=0.01, maximize=True, betas=(0.7, 0.8))),
    ("Adamax", dict(lr=0.01, betas=(0.5, 0.6), eps=0.01)),
    ("NAdam", dict(lr=0.01, betas=(0.5, 0.6))),
    ("RAdam", dict(lr=0.01, betas=(0.9, 0.5))),
    ("Adagrad", dict(lr=0.1, lr_decay=0.2, initial_accumulator_value=0.3)),
    ("Adadelta", dict(lr=0.3)),
    ("RMSprop", dict(lr=0.01, centered=True, momentum=0.5, weight_decay=0.1)),
    ("Rprop", dict(lr=0.01, step_sizes=(1e-3, 0.02))),
]


@pytest.mark.parametrize("name,kw", COMPLEX_CASES, ids=[c[0] for c in COMPLEX_CASES])
@pytest.mark.parametrize("foreach", [None, False])
def test_complex_params_step_on_real_views_like_torch(name, kw, foreach):
    kw = dict(kw, foreach=foreach)
    _assert_same(_trajectory(flow, name, kw, complex_params=True),
                 _trajectory(torch, name, kw, complex_params=True))


def test_adafactor_refuses_complex_and_round_trips_its_state_dict():
    w = flow.zeros(2, 2, dtype=flow.complex64, requires_grad=True)
    w.grad = flow.ones(2, 2, dtype=flow.complex64)
    with pytest.raises(RuntimeError, match="does not support complex"):
        flow.optim.Adafactor([w]).step()
    # row_var / col_var are factors, not shaped like the parameter: loading must accept them
    ps = [flow.ones(3, 4, requires_grad=True), flow.ones(5, requires_grad=True)]
    opt = flow.optim.Adafactor(ps, lr=0.5)
    for p in ps:
        p.grad = flow.ones_like(p)
    opt.step()
    opt2 = flow.optim.Adafactor([flow.ones(3, 4, requires_grad=True),
                                 flow.ones(5, requires_grad=True)], lr=0.5)
    opt2.load_state_dict(opt.state_dict())
    assert tuple(opt2.state[opt2.param_groups[0]["params"][0]]["row_var"].shape) == (3, 1)
    with pytest.raises(ValueError, match=r"needs shape \(3, 1\)"):
        sd = opt.state_dict()
        sd["state"][0]["row_var"] = flow.zeros(3, 4)
        opt2.load_state_dict(sd)


def test_adagrad_accumulator_starts_from_the_constructor_value_as_torch():
    def run(fw):
        ps = [fw.tensor([1.0, 2.0], requires_grad=True), fw.tensor([1.0, 2.0],
                                                                 requires_grad=True)]
        opt = fw.optim.Adagrad([dict(params=[ps[0]], lr_decay=0.1),
                                dict(params=[ps[1]], initial_accumulator_value=0.5)], lr=0.1)
        extra = fw.tensor([3.0], requires_grad=True)
        opt.add_param_group(dict(params=[extra], initial_accumulator_value=2.0))
        for _ in range(3):
            for p in ps + [extra]:
                p.grad = fw.ones_like(p)
            opt.step()
        return [p.detach().numpy() for p in ps + [extra]]

    for a, b in zip(run(flow), run(torch)):
        np.testing.assert_allclose(a, b, rtol=1e-6)


@pytest.mark.parametrize("make,message", [
    (lambda fw, ps: fw.optim.Adam(ps, lr=fw.tensor(0.1), foreach=True), "lr as a Tensor"),
    (lambda fw, ps: fw.optim.AdamW(ps, lr=fw.tensor(0.1), foreach=True), "lr as a Tensor"),
    (lambda fw, ps: fw.optim.Adam(ps, betas=(0, 0.9)), "both floats or both Tensors"),
    (lambda fw, ps: fw.optim.Adam(ps, betas=(fw.tensor(0.5), 0.9)), "both floats or both"),
    (lambda fw, ps: fw.optim.Adam(ps, betas=(fw.tensor(0.5), fw.tensor(0.6)), foreach=True),
     r"betas\[0\] as a Tensor"),
    (lambda fw, ps: fw.optim.SGD(ps, lr=fw.tensor([0.1, 0.2])), "Tensor lr must be 1-element"),
])
def test_tensor_hyperparameter_errors_match_torch(make, message):
    with pytest.raises(ValueError, match=message):
        make(torch, [torch.zeros(2, requires_grad=True)])
    with pytest.raises(ValueError, match=message):
        make(flow, [flow.zeros(2, requires_grad=True)])


def test_adam_tensor_betas_step_like_torch():
    def run(fw):
        p = fw.zeros(3, requires_grad=True)
        opt = fw.optim.Adam([p], lr=0.1, betas=(fw.tensor(0.5), fw.tensor(0.6)))
        for i in range(3):
            p.grad = fw.tensor([1.0, -2.0, 3.0]) * (i + 1)
            opt.step()
        return p.detach().numpy()

    np.testing.assert_allclose(run(flow), run(torch), rtol=1e-5)


def _lbfgs(fw, kw, complex_params=False, reload=False):
    rng = np.random.default_rng(3)
    if complex_params:
        p = fw.tensor(rng.standard_normal(3) + 1j * rng.standard_normal(3), requires_grad=True)
        c = fw.tensor(rng.standard_normal(3) + 1j * rng.standard_normal(3))
    else:
        p = fw.tensor(rng.standard_normal(4), requires_grad=True)
        c = fw.tensor(rng.standard_normal(4))
    opt = fw.optim.LBFGS([p], **kw)

    def closure():
        opt.zero_grad()
        loss = ((p - c).abs() ** 2).sum() + (p.abs() ** 4).sum()
        loss.backward()
        return loss

    out = []
    for i in range(3):
        if reload and i == 2:
            q = fw.tensor(p.detach().numpy().copy(), requires_grad=True)
            opt2 = fw.optim.LBFGS([q], **kw)
            opt2.load_state_dict(opt.state_dict())
            p, opt = q, opt2
        out.append(float(opt.step(closure)))
        out.append(p.detach().numpy().copy())
    return out


@pytest.mark.parametrize("kw,complex_params,reload", [
    (dict(lr=torch.tensor(0.8), max_iter=4), False, False),
    (dict(lr=torch.tensor(0.8), max_iter=4, line_search_fn="strong_wolfe"), False, False),
    (dict(max_iter=5), True, False),
    (dict(max_iter=5, line_search_fn="strong_wolfe"), True, False),
    (dict(max_iter=3, history_size=3), False, True),
    (dict(max_iter=3, history_size=3, line_search_fn="strong_wolfe"), False, True),
])
def test_lbfgs_tensor_lr_complex_params_and_state_dict_like_torch(kw, complex_params, reload):
    ours_kw = {k: (flow.tensor(v.item()) if isinstance(v, torch.Tensor) else v)
               for k, v in kw.items()}
    ours = _lbfgs(flow, ours_kw, complex_params, reload)
    theirs = _lbfgs(torch, kw, complex_params, reload)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-8)


def _sched_run(fw, make, steps=8):
    ps = [fw.zeros(2, requires_grad=True), fw.zeros(3, requires_grad=True)]
    opt = fw.optim.SGD([{"params": [ps[0]]}, {"params": [ps[1]], "lr": fw.tensor(0.05)}],
                       lr=fw.tensor(0.1), momentum=0.9)
    lr_tensor = opt.param_groups[0]["lr"]
    sched = make(fw.optim.lr_scheduler, opt)
    out = []
    for _ in range(steps):
        opt.step()
        sched.step()
        out.append([float(x) for x in sched.get_last_lr()]
                   + [float(g["lr"]) for g in opt.param_groups])
    assert opt.param_groups[0]["lr"] is lr_tensor  # filled in place, as torch
    return out


@pytest.mark.parametrize("make", [
    lambda L, o: L.SequentialLR(o, [L.LinearLR(o, start_factor=0.1, total_iters=3),
                                    L.ExponentialLR(o, gamma=0.9)], milestones=[3]),
    lambda L, o: L.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=3),
    lambda L, o: L.OneCycleLR(o, max_lr=1.0, total_steps=10),
    lambda L, o: L.StepLR(o, step_size=2, gamma=0.5),
    lambda L, o: L.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=2),
])
def test_schedulers_fill_tensor_lrs_in_place_like_torch(make):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_allclose(_sched_run(flow, make), _sched_run(torch, make), rtol=1e-6)


def test_scheduler_subclass_closed_form_and_added_groups_like_torch():
    def run(fw):
        class Half(fw.optim.lr_scheduler.LRScheduler):
            def get_lr(self):
                return [g["lr"] for g in self.optimizer.param_groups]

            def _get_closed_form_lr(self):
                return [b * 0.5 ** self.last_epoch for b in self.base_lrs]

        opt = fw.optim.SGD([fw.zeros(1, requires_grad=True)], lr=1.0)
        sched = Half(opt)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sched.step(3)
        return sched.get_last_lr()

    assert run(flow) == run(torch) == [0.125]
    for fw in (torch, flow):
        opt = fw.optim.SGD([fw.zeros(1, requires_grad=True)], lr=0.1)
        sched = fw.optim.lr_scheduler.LambdaLR(opt, lambda e: 0.5)
        opt.add_param_group({"params": [fw.zeros(2, requires_grad=True)], "lr": 0.3})
        with pytest.raises(ValueError):
            sched.step()


@pytest.mark.parametrize("make", [
    lambda L, o: L.PolynomialLR(o, 5, 2.0),
    lambda L, o: L.CosineAnnealingWarmRestarts(o, 2, 2),
])
def test_torch_scheduler_state_dicts_load(make):
    topt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    ts = make(torch.optim.lr_scheduler, topt)
    fopt = flow.optim.SGD([flow.zeros(1, requires_grad=True)], lr=0.1)
    fs = make(flow.optim.lr_scheduler, fopt)
    for _ in range(3):
        topt.step()
        ts.step()
    fs.load_state_dict(ts.state_dict())
    fopt.param_groups[0]["lr"] = topt.param_groups[0]["lr"]
    for _ in range(4):
        topt.step()
        ts.step()
        fopt.step()
        fs.step()
        assert fs.get_last_lr() == pytest.approx(ts.get_last_lr(), rel=1e-12)


def _clip(fw, dtypes, values, **kw):
    ps = [fw.tensor(np.array(v), dtype=getattr(fw, d), requires_grad=True)
          for d, v in zip(dtypes, values)]
    for p, v in zip(ps, values):
        p.grad = fw.tensor(np.array(v), dtype=p.dtype)
    n = fw.nn.utils.clip_grad_norm_(ps, 1.0, **kw)
    return n, [p.grad for p in ps]


@pytest.mark.parametrize("dtypes,values,kw", [
    (["float16", "float64"], [[300.0, 400.0], [1.0]], {}),  # float16 squares overflow
    (["float16"], [[300.0, 400.0]], dict(norm_type=3.0)),
    (["complex64"], [[3 + 4j, 1j]], {}),  # the norm is real
    (["complex64", "float64"], [[3 + 4j, 1j], [2.0]], dict(norm_type="inf")),
])
def test_clip_grad_norm_half_and_complex_like_torch(dtypes, values, kw):
    n, grads = _clip(flow, dtypes, values, **kw)
    tn, tgrads = _clip(torch, dtypes, values, **kw)
    assert str(n.dtype).split(".")[-1] == str(tn.dtype).split(".")[-1]
    np.testing.assert_allclose(float(n), float(tn), rtol=1e-6)
    for g, tg in zip(grads, tgrads):
        assert str(g.dtype).split(".")[-1] == str(tg.dtype).split(".")[-1]
        np.testing.assert_array_equal(np.asarray(g.tolist()), np.asarray(tg.tolist()))


def test_get_total_norm_refuses_none_as_torch():
    with pytest.raises(RuntimeError):
        torch.nn.utils.get_total_norm([torch.ones(2), None])
    with pytest.raises(RuntimeError, match="tensor 1 is None"):
        flow.nn.utils.get_total_norm([flow.ones(2), None])


def test_vector_to_parameters_slices_the_first_dimension_as_torch():
    ours, theirs = [flow.zeros(2, 3)], [torch.zeros(2, 3)]
    flow.nn.utils.vector_to_parameters(flow.arange(6.0).reshape(2, 3), ours)
    torch.nn.utils.vector_to_parameters(torch.arange(6.0).reshape(2, 3), theirs)
    np.testing.assert_array_equal(ours[0].numpy(), theirs[0].numpy())


def test_packed_sequence_casts_and_stateless_functional_call():
    from flowgrad.nn.utils.rnn import pack_sequence
    pk = pack_sequence([flow.ones(2), flow.ones(1)])
    for name, dtype in [("half", flow.float16), ("long", flow.int64), ("int", flow.int32),
                        ("short", flow.int16), ("char", flow.int8), ("byte", flow.uint8)]:
        assert getattr(pk, name)().data.dtype == dtype
    m = flow.nn.Linear(2, 1)
    with pytest.warns(FutureWarning):
        y = flow.nn.utils.stateless.functional_call(
            m, {"weight": flow.ones(1, 2), "bias": flow.zeros(1)}, flow.ones(3, 2))
    assert y.tolist() == [[2.0], [2.0], [2.0]]


class _FirstRow(flow.nn.Module):
    def forward(self, x):
        return x[:1]


class _Double(flow.nn.Module):
    def forward(self, x):
        return x * 2


class _ToFloat64(flow.nn.Module):
    def forward(self, x):
        return x.double()


def test_parametrization_safety_checks_as_torch():
    P = flow.nn.utils.parametrize
    with pytest.raises(ValueError, match="may not change the shape"):
        P.register_parametrization(flow.nn.Linear(2, 2), "weight", _FirstRow())
    with pytest.raises(ValueError, match="may not change the dtype"):
        P.register_parametrization(flow.nn.Linear(2, 2), "weight", _ToFloat64())
    m = P.register_parametrization(flow.nn.Linear(2, 2), "weight", _FirstRow(), unsafe=True)
    assert tuple(m.weight.shape) == (1, 2)
    m = P.register_parametrization(flow.nn.Linear(2, 2), "weight", _Double())
    with pytest.raises(ValueError, match="may not change the shape"):
        P.register_parametrization(m, "weight", _FirstRow())
    # no right_inverse: assigning raises (it used to store the value as the original)
    with pytest.raises(RuntimeError, match="does not implement right_inverse"):
        m.weight = flow.ones(2, 2)


@pytest.mark.parametrize("shape", [(3, 3), (4, 3), (3, 4)])
@pytest.mark.parametrize("orthogonal_map", ["matrix_exp", "cayley", "householder"])
def test_orthogonal_without_trivialization_like_torch(shape, orthogonal_map):
    w = np.random.default_rng(0).standard_normal(shape)
    outs = []
    for fw in (flow, torch):
        m = fw.nn.Linear(shape[1], shape[0], bias=False).double()
        with fw.no_grad():
            m.weight.copy_(fw.tensor(w))
        fw.nn.utils.parametrizations.orthogonal(m, orthogonal_map=orthogonal_map,
                                                use_trivialization=False)
        W = m.weight
        (W ** 3).sum().backward()
        o = m.parametrizations.weight.original
        outs.append([W.detach().numpy().copy(), o.detach().numpy().copy(), o.grad.numpy().copy()])
        if orthogonal_map == "householder":
            q = np.linalg.qr(np.random.default_rng(1).standard_normal((max(shape),) * 2))[0]
            with fw.no_grad():
                m.weight = fw.tensor(q[:shape[0], :shape[1]].copy())
            outs[-1] += [m.weight.detach().numpy(), o.detach().numpy()]
        else:
            with pytest.raises(NotImplementedError):
                m.weight = fw.tensor(np.eye(*shape))
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("ema", [False, True])
def test_averaged_model_integer_buffers_like_torch(ema):
    # use_buffers=True averages num_batches_tracked too: a truncated float mix in torch (SWA
    # raised in flowgrad, EMA copied the model's count)
    def run(fw):
        kw = dict(multi_avg_fn=fw.optim.swa_utils.get_ema_multi_avg_fn(0.5)) if ema else {}
        m = fw.nn.BatchNorm1d(2)
        am = fw.optim.swa_utils.AveragedModel(m, use_buffers=True, **kw)
        out = []
        for i in range(5):
            m.num_batches_tracked += 7 * (i + 1)
            am.update_parameters(m)
            out.append(int(am.module.num_batches_tracked))
        return out

    assert run(flow) == run(torch)



SCALAR_STATE = ["Adam", "AdamW", "Adamax", "NAdam", "RAdam", "ASGD", "Adagrad", "RMSprop",
                "Adadelta", "Rprop", "SGD"]


@pytest.mark.parametrize("name", SCALAR_STATE)
def test_scalar_state_follows_a_float64_default_dtype_as_torch(name):
    """torch's `_get_scalar_dtype`: the step count (and NAdam's mu_product, ASGD's eta and mu)
    is float64 under a float64 default dtype (it was float32: NAdam and ASGD drifted by 1e-9
    over 30 steps, and state dicts carried float32)."""
    states = []
    for fw in (flow, torch):
        fw.set_default_dtype(fw.float64)
        try:
            p = fw.nn.Parameter(fw.ones(3))
            opt = getattr(fw.optim, name)([p], lr=0.1)
            for step in range(30):
                p.grad = fw.full((3,), 0.5 + step)
                opt.step()
            states.append((p.detach().numpy().copy(),
                           {k: (str(v.dtype).split(".")[-1], v.detach().numpy().copy())
                            for k, v in opt.state[p].items() if v.dim() == 0}))
        finally:
            fw.set_default_dtype(fw.float32)
    (ours, our_scalars), (theirs, their_scalars) = states
    np.testing.assert_allclose(ours, theirs, rtol=1e-13)
    assert our_scalars.keys() == their_scalars.keys()
    for key, (dtype, value) in their_scalars.items():
        assert our_scalars[key][0] == dtype, key
        np.testing.assert_allclose(our_scalars[key][1], value, rtol=1e-13)


@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
@pytest.mark.parametrize("name", ["Adam", "AdamW", "Adamax", "NAdam", "RAdam"])
def test_state_of_another_dtype_than_the_gradient_raises_as_torch(name, weight_decay):
    """After model.double() following steps, torch's lerp_ refuses the float32 first moment;
    flowgrad stepped on with it. It raises before writing anything (torch has counted the
    step and decayed the weights by then)."""
    raised = []
    for fw in (flow, torch):
        m = fw.nn.Linear(2, 2)
        opt = getattr(fw.optim, name)(m.parameters(), lr=0.1, weight_decay=weight_decay)
        m(fw.ones(1, 2)).sum().backward()
        opt.step()
        m.double()
        opt.zero_grad()
        m(fw.ones(1, 2, dtype=fw.float64)).sum().backward()
        before = m.weight.detach().clone(), opt.state[m.weight]["step"].clone()
        with pytest.raises(RuntimeError, match="expected dtype float") as info:
            opt.step()
        raised.append(info.value)
        if fw is flow:
            assert "make the optimizer again" in str(info.value)
            assert flow.equal(m.weight.detach(), before[0])
            assert flow.equal(opt.state[m.weight]["step"], before[1])
