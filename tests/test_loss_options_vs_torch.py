"""Losses over their option matrices against torch 2.13: each case runs in both frameworks from
the same NumPy numbers and must give the same raise/no-raise, dtype, shape, value and input
gradients (nan where torch's nan)."""
import warnings

import numpy as np
import pytest
import torch
from vs_torch import ERRORS

import flowgrad as flow


def F(m):
    return m.nn.functional


def _run(m, build):
    """(value, gradients of the differentiable leaves) of build(m) -> (loss, leaves), or the
    exception's type."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            loss, leaves = build(m)
            up = m.tensor(np.linspace(0.5, 1.5, max(loss.numel(), 1))[:loss.numel()]
                          .reshape(tuple(loss.shape)), dtype=loss.dtype)
            grads = m.autograd.grad((loss * up).sum(), leaves) if leaves else []
        except ERRORS as error:
            return type(error).__name__
    return [loss.detach()] + [g for g in grads]


def _same(build, rtol=1e-7, atol=1e-9):
    want, got = _run(torch, build), _run(flow, build)
    if isinstance(want, str) or isinstance(got, str):
        assert isinstance(want, str) and isinstance(got, str), (want, got)
        return
    assert len(want) == len(got)
    for w, g in zip(want, got):
        assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1]
        assert tuple(g.shape) == tuple(w.shape)
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=rtol, atol=atol, equal_nan=True)


# ---- ctc_loss: the gradient of a leaf log_probs -----------------------------------------------
def _log_probs(t, n, c, seed=0, normalised=True):
    x = np.random.default_rng(seed).standard_normal((t, n, c))
    if normalised:
        x = x - np.log(np.exp(x).sum(-1, keepdims=True))
    return x


_TP = np.array([[1, 2, 2, 3], [3, 4, 1, 1], [1, 1, 1, 0]])
_TL = np.array([4, 2, 3])


def _ctc_case(targets="padded", lengths="tensor", reduction="mean", zero_infinity=False,
              blank=0, input_lengths=(12, 10, 7), normalised=True, dtype="float64"):
    def build(m):
        lp = m.tensor(_log_probs(12, 3, 5, normalised=normalised),
                      dtype=getattr(m, dtype)).requires_grad_()
        tp = np.where(_TP == blank, 2, _TP)
        tg = m.tensor(np.concatenate([tp[i, :_TL[i]] for i in range(3)])
                      if targets == "concatenated" else tp)
        il, tl = list(input_lengths), _TL.tolist()
        if lengths == "tensor":
            il, tl = m.tensor(il), m.tensor(tl)
        elif lengths == "tuple":
            il, tl = tuple(il), tuple(tl)
        loss = F(m).ctc_loss(lp, tg, il, tl, blank=blank, reduction=reduction,
                             zero_infinity=zero_infinity)
        return loss, [lp]
    return build


CTC_CASES = {
    "padded_mean": _ctc_case(),
    "concatenated_sum": _ctc_case(targets="concatenated", reduction="sum"),
    "tuple_lengths_none": _ctc_case(lengths="tuple", reduction="none"),
    "list_lengths_concatenated": _ctc_case(targets="concatenated", lengths="list"),
    "blank_1": _ctc_case(blank=1, reduction="none"),
    "blank_4_concatenated": _ctc_case(blank=4, targets="concatenated"),
    "impossible": _ctc_case(input_lengths=(3, 10, 7), reduction="none"),
    "impossible_zero_infinity": _ctc_case(input_lengths=(3, 10, 7), zero_infinity=True),
    "not_normalised": _ctc_case(normalised=False, reduction="sum"),
    "float32": _ctc_case(dtype="float32"),
}


@pytest.mark.parametrize("name", list(CTC_CASES))
def test_ctc_loss_gradient_of_a_leaf_log_probs_is_torchs(name):
    # torch's kernel returns exp(log_probs) - occupancy (the gradient of the logits beneath a
    # log_softmax); a leaf log_probs, as in torch's CTCLoss example, gets that gradient
    rtol = 1e-4 if name == "float32" else 1e-7
    _same(CTC_CASES[name], rtol=rtol, atol=rtol * 1e-2)


def test_ctc_loss_gradient_of_an_unbatched_leaf_is_torchs():
    def build(m):
        lp = m.tensor(_log_probs(12, 1, 5, seed=3)[:, 0]).requires_grad_()
        return F(m).ctc_loss(lp, m.tensor([1, 2, 2]), m.tensor(12), m.tensor(3)), [lp]
    _same(build)


# ---- soft margins: a target broadcast against the input ---------------------------------------
def _margin_case(name, target_shape, reduction):
    def build(m):
        x = m.tensor(np.random.default_rng(0).standard_normal((3, 4))).requires_grad_()
        t = m.tensor(np.random.default_rng(1).uniform(0.1, 0.9, target_shape))
        return getattr(F(m), name)(x, t, reduction=reduction), [x]
    return build


@pytest.mark.parametrize("reduction", ["none", "sum"])
@pytest.mark.parametrize("target_shape", [(4,), (3, 1), (), (1, 3, 4), (2, 1, 4), (5,)])
@pytest.mark.parametrize("name", ["soft_margin_loss", "multilabel_soft_margin_loss"])
def test_soft_margin_losses_broadcast_the_target_as_torch(name, target_shape, reduction):
    # soft_margin_loss broadcasts the target into the input's shape, multilabel_soft_margin_loss
    # broadcasts both and sums the input's last dim counted from the front ((1, 3, 4) targets
    # give a (1, 4) loss); flowgrad refused any target of another shape
    _same(_margin_case(name, target_shape, reduction))


# ---- margin losses: int64 class indices only -------------------------------------------------
@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "int8", "uint8", "bool", "float32"])
@pytest.mark.parametrize("name", ["multilabel_margin_loss", "multi_margin_loss"])
def test_margin_losses_take_int64_targets_only_as_torch(name, dtype):
    # torch raises 'expected scalar type Long' for any other target dtype; flowgrad computed
    # multilabel_margin_loss of int32/int16/int8/uint8 targets (int32 [[0, 1, -1, 0], ...]:
    # 0.517) and raised IndexError (not RuntimeError) for multi_margin_loss's bool/float ones
    def build(m):
        x = m.tensor(np.random.default_rng(0).standard_normal((3, 4))).requires_grad_()
        if name == "multilabel_margin_loss":
            t = np.array([[0, 1, -1, 0], [2, -1, 0, 0], [3, 2, 1, 0]])
        else:
            t = np.array([0, 1, 3])
        if dtype in ("uint8", "bool"):
            t = np.abs(t) % 2
        return getattr(F(m), name)(x, m.tensor(t).to(getattr(m, dtype))), [x]
    want, got = _run(torch, build), _run(flow, build)
    assert isinstance(want, str) == isinstance(got, str), (want, got)
    if isinstance(want, str):
        assert got == want
    else:
        _same(build)


@pytest.mark.parametrize("targets", [[[1, 0, 2], [3, 1, 0]], [[0, 0, 1], [2, 0, 3]]])
def test_ctc_loss_of_a_blank_inside_the_targets_is_torchs(targets):
    # torch treats a blank written in the targets as a label (its kernels' skip rule checks only
    # that a label differs from the one before it); flowgrad's refused the skip into it:
    # [[1, 0, 2], [3, 1, 0]] (lengths 3, 2) gave 7.4007 where torch has 6.4359
    def build(m):
        lp = m.tensor(_log_probs(8, 2, 4)).requires_grad_()
        return F(m).ctc_loss(lp, m.tensor(targets), m.tensor([8, 6]), m.tensor([3, 2]),
                             reduction="none"), []
    _same(build)


@pytest.mark.parametrize("call", ["float_input_lengths", "float_target_lengths",
                                  "bool_input_lengths", "blank_-1", "blank_C"])
def test_ctc_loss_refuses_what_torch_refuses(call):
    # torch raises RuntimeError for lengths that are not integral (flowgrad truncated float
    # lengths and computed) and for a blank outside the classes (flowgrad: ValueError)
    def build(m):
        lp = m.tensor(_log_probs(8, 2, 4)).requires_grad_()
        il, tl, blank = m.tensor([8, 6]), m.tensor([3, 2]), 0
        if call == "float_input_lengths":
            il = il.double()
        elif call == "float_target_lengths":
            tl = tl.double()
        elif call == "bool_input_lengths":
            il = il.bool()
        else:
            blank = -1 if call == "blank_-1" else 4
        return F(m).ctc_loss(lp, m.tensor([[1, 2, 2], [3, 1, 0]]), il, tl, blank=blank), [lp]
    want, got = _run(torch, build), _run(flow, build)
    assert want == got == "RuntimeError"


# ---- cosine_embedding_loss: torch checks dims, then broadcasts -----------------------------
@pytest.mark.parametrize("shapes", [((3, 4), (1, 4), (3,)), ((3, 4), (3, 1), (3,)),
                                    ((1, 4), (1, 4), (3,)), ((3, 4), (3, 4), (1,)),
                                    ((4,), (1,), ()), ((0, 4), (1, 4), (0,)),
                                    ((3, 4), (2, 4), (3,)), ((3, 4), (3, 4), (5,)),
                                    ((3, 4), (4,), (3,)), ((3, 4), (3, 4), (1, 3))])
def test_cosine_embedding_loss_broadcasts_as_torch(shapes):
    # flowgrad required inputs of one shape and a target of the batch's: an input2 of (1, 4)
    # beside a (3, 4) input1 raised where torch gives [0.991, 0, 1.606] (margin 0)
    s1, s2, st = shapes

    def build(m):
        a = m.tensor(np.random.default_rng(0).standard_normal(s1)).requires_grad_()
        b = m.tensor(np.random.default_rng(1).standard_normal(s2)).requires_grad_()
        t = m.tensor(np.resize([1.0, -1.0, 1.0, -1.0, 1.0], st))
        return F(m).cosine_embedding_loss(a, b, t, margin=-0.2, reduction="none"), [a, b]
    _same(build)


# ---- loss modules' class weights: the caller's tensor is not converted --------------------------
@pytest.mark.parametrize("convert", ["double", "half", "to_float64", "float"])
@pytest.mark.parametrize("loss", ["CrossEntropyLoss", "NLLLoss", "BCELoss", "MultiMarginLoss",
                                  "MultiLabelSoftMarginLoss"])
def test_module_conversion_leaves_the_callers_weight_as_torch(loss, convert):
    # Module.double() converted each buffer's storage in place, so the tensor given as a loss's
    # weight (the caller's own, maybe shared with another loss) turned float64 too; torch puts
    # a converted tensor in the module and leaves the given one (and keeps it where the dtype
    # stays)
    def facts(m):
        w = m.tensor([0.5, 1.0, 2.0])
        module = getattr(m.nn, loss)(weight=w)
        if convert == "to_float64":
            module.to(m.float64)
        else:
            getattr(module, convert)()
        return (str(w.dtype).split(".")[-1], str(module.weight.dtype).split(".")[-1],
                module.weight is w, w.tolist())
    assert facts(flow) == facts(torch)


def test_converted_module_loss_still_computes_as_torch():
    def build(m):
        w = m.tensor([0.5, 1.0, 2.0])
        ce = m.nn.CrossEntropyLoss(weight=w)
        nll = m.nn.NLLLoss(weight=w)
        ce.double()
        x = m.tensor(np.random.default_rng(0).standard_normal((4, 3)),
                     dtype=m.float32).requires_grad_()
        t = m.tensor([0, 2, 1, 2])
        # the float32 loss still takes the untouched float32 weights
        return nll(x.log_softmax(1), t) + ce(x.double(), t).float(), [x]
    _same(build, rtol=1e-5, atol=1e-7)


# ---- class-index targets of uint8 -----------------------------------------------------------
_UINT8_SHAPES = {1: ((4,), ()), 2: ((3, 4), (3,)), 3: ((3, 4, 2), (3, 2)),
                 4: ((3, 4, 2, 2), (3, 2, 2))}


@pytest.mark.parametrize("reduction", ["none", "mean"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("fn, smoothing", [("nll_loss", 0.0), ("cross_entropy", 0.0),
                                           ("cross_entropy", 0.1)])
@pytest.mark.parametrize("ndim", [1, 2, 3, 4])
def test_uint8_class_targets_where_torch_takes_them(ndim, fn, smoothing, weighted, reduction):
    # torch takes Byte class indices for (C,) and (N, C) inputs only: a K-dimensional input
    # raises 'expected scalar type Long but found Byte' (flowgrad computed a loss), and so does
    # cross_entropy's smoothed weighted mean, which gathers the weights by the target
    xs, ts = _UINT8_SHAPES[ndim]

    def build(m):
        x = m.tensor(np.random.default_rng(0).standard_normal(xs)).requires_grad_()
        t = m.tensor(np.random.default_rng(1).integers(0, 4, ts)).to(m.uint8)
        kw = {"reduction": reduction}
        if weighted:
            kw["weight"] = m.tensor([0.5, 1.0, 2.0, 0.3], dtype=m.float64)
        if smoothing:
            kw["label_smoothing"] = smoothing
        return getattr(F(m), fn)(x, t, **kw), [x]
    _same(build)


# ---- nll_loss under create_graph ----------------------------------------------------------
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("shape", [(3, 5), (2, 5, 3)])
def test_nll_loss_gradient_of_its_gradient_is_torchs(shape, reduction):
    # torch's nll_loss gradient is a function of the input (of zero derivative): under
    # create_graph it requires grad, and differentiating it gives zeros; flowgrad's did not
    # require grad, so a gradient penalty on log-probabilities raised 'does not require grad'
    def build(m):
        x = m.tensor(np.random.default_rng(0).standard_normal(shape)).requires_grad_()
        t = m.tensor(np.random.default_rng(1).integers(0, 5, shape[:1] + shape[2:]))
        loss = F(m).nll_loss(x, t, weight=m.tensor([0.5, 1.0, 2.0, 0.3, 1.5],
                                                   dtype=m.float64), reduction=reduction)
        up = m.tensor(np.linspace(0.5, 1.5, loss.numel()).reshape(tuple(loss.shape)))
        g, = m.autograd.grad((loss * up).sum(), x, create_graph=True)
        assert g.requires_grad
        return (g * g).sum(), [x]
    _same(build)


# ---- exception types of integer and bool operands -----------------------------------------
@pytest.mark.parametrize("call", ["huber_int_input", "huber_bool_input", "bcel_bool_target"])
def test_integer_and_bool_operands_raise_torchs_type(call):
    # torch: huber_loss of an integer input beside a float target can't cast its float result
    # to the input's dtype (RuntimeError; flowgrad raised NotImplementedError), and
    # binary_cross_entropy_with_logits subtracts from a bool target (RuntimeError; flowgrad
    # let NumPy raise a TypeError)
    def build(m):
        x = m.tensor(np.random.default_rng(0).standard_normal(4)).requires_grad_()
        if call == "bcel_bool_target":
            return F(m).binary_cross_entropy_with_logits(
                x, m.tensor([True, False, True, True])), [x]
        ints = m.tensor([1, 0, 1, 1])
        return F(m).huber_loss(ints.bool() if call == "huber_bool_input" else ints, x), [x]
    want, got = _run(torch, build), _run(flow, build)
    assert want == got == "RuntimeError"


@pytest.mark.parametrize("call", ["4d_log_probs", "int64_log_probs", "bool_log_probs"])
def test_ctc_loss_bad_log_probs_raise_torchs_type(call):
    # torch: log_probs of 4 dims raise RuntimeError (flowgrad: ValueError), integer log_probs
    # NotImplementedError, its kernel having no integer instance (flowgrad: RuntimeError)
    def build(m):
        lp = m.tensor(_log_probs(8, 2, 4))
        if call == "4d_log_probs":
            lp = lp[None]
        else:
            lp = lp.long() if call == "int64_log_probs" else lp > 0
        return F(m).ctc_loss(lp, m.tensor([[1, 2], [2, 1]]), [8, 7], [2, 2]), []
    want, got = _run(torch, build), _run(flow, build)
    assert want == got
