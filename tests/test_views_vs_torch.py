"""Views and in-place writes, program by program, against torch in float64: the same values,
the same gradients, and the same raise/no-raise. Each case is a regression test for a family
of silent wrong results (issue 7)."""
import threading
import warnings

import numpy as np
import pytest
import torch

import flowgrad as flow


def _np(t):
    if t is None:
        return None
    return np.array(t.detach().numpy(), copy=True)


def run_both(program):
    """Run `program(m)` with m = torch and m = flowgrad; it returns a dict of tensors (or None)
    to compare. Both must raise, or neither."""
    results = []
    for m in (torch, flow):
        m.manual_seed(0)
        try:
            out = program(m)
        except (RuntimeError, IndexError, ValueError, TypeError) as error:
            results.append(("raised", type(error).__name__, str(error)))
            continue
        results.append(("ok", {k: _np(v) for k, v in (out or {}).items()}))
    theirs, ours = results
    assert theirs[0] == ours[0], f"torch {theirs}, flowgrad {ours}"
    if theirs[0] == "ok":
        assert theirs[1].keys() == ours[1].keys()
        for key, want in theirs[1].items():
            got = ours[1][key]
            if want is None or got is None:
                assert want is None and got is None, f"{key}: torch {want}, flowgrad {got}"
                continue
            assert got.shape == want.shape, f"{key}: shape {got.shape} vs torch {want.shape}"
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=key)
    return ours


def leaf(m, values, requires_grad=True):
    return m.tensor(np.asarray(values, dtype=np.float64), requires_grad=requires_grad)


# ---- 1. element views are views (0-d included) ---------------------------------------------
def p_int_index_fill(m):
    x = m.zeros(3, dtype=m.float64)
    x[1].fill_(5)
    x.select(0, 2).add_(7)
    return {"x": x}


def p_iterate_add(m):
    x = m.zeros(2, 3, dtype=m.float64)
    for row in x:
        row.add_(1)
    for e in x[0]:
        e.mul_(3)
    return {"x": x}


def p_bias_element_no_grad(m):
    m.manual_seed(0)
    lin = m.nn.Linear(2, 3).double()
    with m.no_grad():
        lin.bias.zero_()
        lin.bias[0].fill_(9)
    return {"bias": lin.bias}


def p_element_mul_grad(m):
    a = leaf(m, [1.0, 2.0, 3.0])
    x = a * 1
    x[0].mul_(10)
    (x * leaf(m, [1.0, 2.0, 3.0], False)).sum().backward()
    return {"x": x, "a.grad": a.grad}


def p_leaf_element_write(m):
    a = leaf(m, [1.0, 2.0, 3.0])
    a[0].add_(1)


def p_element_of_matrix(m):
    a = leaf(m, [[1.0, 2.0], [3.0, 4.0]])
    x = a.exp()
    e = x[1, 0]
    e.mul_(a[0, 1])
    x.sum().backward()
    return {"x": x, "a.grad": a.grad}


# ---- 2. a view taken before an in-place write to its base -----------------------------------
def p_stale_slice(m):
    x = leaf(m, [1.0, 2.0, 3.0])
    w = leaf(m, [5.0, 7.0], False)
    b = x * 1
    v = b[0:2]
    b.mul_(2)
    (v * w).sum().backward()
    return {"v": v, "x.grad": x.grad}


def p_stale_column_setitem(m):
    x = leaf(m, [[1.0, 2.0], [3.0, 4.0]])
    y = leaf(m, [10.0, 20.0])
    b = x * 1
    col = b[:, 0]
    b[1] = y
    (col * col).sum().backward()
    return {"col": col, "x.grad": x.grad, "y.grad": y.grad}


def p_stale_view_of_view(m):
    x = leaf(m, [1.0, 2.0, 3.0, 4.0])
    b = x * 1
    v = b[1:]
    vv = v[0:2]
    b.mul_(3)
    vv.sum().backward()
    return {"x.grad": x.grad}


def p_sibling_view_write(m):
    x = leaf(m, [1.0, 2.0, 3.0])
    b = x * 1
    v1, v2 = b[0:2], b[1:3]
    v1.mul_(5)
    (v2 * v2).sum().backward()
    return {"v2": v2, "x.grad": x.grad}


def p_stale_transposed(m):
    x = leaf(m, [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    w = leaf(m, [0.5, -1.0, 2.0])
    b = x.tanh()
    t = b.t()
    b[0].mul_(w)
    (t * t).sum().backward()
    return {"t": t, "x.grad": x.grad, "w.grad": w.grad}


def p_plain_base_gains_grad(m):
    w = leaf(m, [1.0, 2.0, 3.0])
    c = m.zeros(3, dtype=m.float64)
    v = c[0:2]
    c.add_(w)
    (v * 3).sum().backward()
    return {"v": v, "w.grad": w.grad}


def p_stale_grad_fn_property(m):
    x = leaf(m, [1.0, 2.0])
    b = x * 1
    v = b[0:1]
    b.mul_(2)
    return {"is_leaf": m.tensor(float(v.is_leaf)), "rg": m.tensor(float(v.requires_grad))}


# ---- 3. views made under no_grad, written or reused in grad mode ---------------------------
def p_no_grad_view_written(m):
    x = leaf(m, [1.0, 2.0, 3.0])
    b = x * 1
    with m.no_grad():
        v = b[0:2]
    v.mul_(2)


def p_no_grad_view_of_plain_written_with_grad(m):
    w = leaf(m, [1.0, 2.0])
    c = m.zeros(3, dtype=m.float64)
    with m.no_grad():
        v = c[0:2]
    v.mul_(w)


def p_no_grad_view_of_plain_written(m):
    c = m.ones(3, dtype=m.float64)
    with m.no_grad():
        v = c[0:2]
    v.mul_(2)
    return {"c": c}


def p_no_grad_view_reused_after_step(m):
    p = leaf(m, [1.0, 2.0, 3.0])
    with m.no_grad():
        pv = p[0:2]
        p.mul_(2)
    (pv * 2).sum().backward()


def p_scalar_ops_on_a_no_grad_view_backward_twice(m):
    # the no_grad view reports requires_grad yet has no history, so the ops on it record
    # nodes whose gradients reach nothing: torch's mul/div by a Python number keep the number
    # only for a gradient they will compute (none), so a second backward through them runs;
    # a unary op (exp) keeps its result regardless, so a second backward through it raises
    x = leaf(m, [-0.7, 0.79, 1.25, 1.66])
    with m.no_grad():
        v = x.squeeze()
    w = v * -0.5
    first, second = w.chunk(2)
    (second.sin() * 0.5).sum().backward()
    (second.sin() * 0.49).sum().backward()
    return {"x.grad": x.grad, "w": w}


def p_scalar_op_after_one_on_a_no_grad_view_backward_twice(m):
    # the division's input has a history (the inert product's node): its node keeps the
    # number, and a second backward through it raises, in both
    x = leaf(m, [-0.7, 0.79, 1.25, 1.66])
    with m.no_grad():
        v = x.squeeze()
    w = v * -0.5 / 3.0
    (w.sin() * 0.5).sum().backward()
    (w.sin() * 0.49).sum().backward()


def p_unary_op_on_a_no_grad_view_backward_twice(m):
    x = leaf(m, [-0.7, 0.79, 1.25, 1.66])
    with m.no_grad():
        v = x[1:]
    u = v.exp()
    (u * 2).sum().backward()
    (u * 3).sum().backward()


def p_no_grad_view_written_no_grad(m):
    x = leaf(m, [1.0, 2.0, 3.0])
    b = x * 1
    with m.no_grad():
        v = b[0:2]
        v.mul_(2)
    (b * b).sum().backward()
    return {"b": b, "x.grad": x.grad}


# ---- 4. "views" that were the input itself ----------------------------------------------------
def p_identity_views_are_new(m):
    x = leaf(m, [1.0, 2.0])
    s = leaf(m, 3.0)
    outs = [x.t(), s.t(), x.expand(2), x.expand_as(x), m.broadcast_to(x, (2,)),
            m.nn.functional.pad(x, (0, 0))]
    return {f"new{i}": m.tensor(float(o is not x and o is not s)) for i, o in enumerate(outs)}


def p_functions_that_return_the_input_itself(m):
    x = leaf(m, [[1.0, 2.0], [3.0, 4.0]])
    outs = {"flatten_1_1": x.flatten(1, 1), "broadcast": m.broadcast_tensors(x, x)[0],
            "positive": m.positive(x), "pos": +x, "conj": x.conj(), "real": x.real,
            "resolve_conj": x.resolve_conj(), "resolve_neg": x.resolve_neg(),
            "contiguous": x.contiguous(), "float": x.double()}
    flags = {k: m.tensor(float(o is x)) for k, o in outs.items()}
    r = x.t().ravel()  # a copy (not contiguous); x.ravel() is a view
    x.detach().ravel()[0] = 9.0
    return {**flags, "ravel_t": r, "x": x}


def p_identity_view_hook(m):
    x = leaf(m, [1.0, 2.0])
    y = x.expand(2)
    y.register_hook(lambda g: g * 10)
    (y * 1).sum().backward()
    return {"x.grad": x.grad, "leaf": m.tensor(float(y.is_leaf))}


def p_t_of_vector_is_a_view(m):
    x = m.zeros(3, dtype=m.float64)
    x.t()[1] = 4
    m.nn.functional.pad(x, (0, 0))[0] = 9  # a copy, as torch's
    return {"x": x}


def p_transpose_0d(m):
    m.tensor(1.0).transpose(0, 1)


def p_transpose_0d_ok(m):
    return {"t": m.tensor(1.0).transpose(0, -1)}


# ---- 9. torch raises, flowgrad carried on ---------------------------------------------------
def p_detach_view_inplace(m):
    m.zeros(3)[0:2].detach_()


def p_unbind_output_written(m):
    x = leaf(m, [1.0, 2.0, 3.0])
    b = x * 1
    b.unbind(0)[0].add_(1)


def p_split_output_written(m):
    x = leaf(m, [1.0, 2.0, 3.0, 4.0])
    b = x * 1
    b.split(2)[1].mul_(2)


def p_chunk_output_written(m):
    x = leaf(m, [1.0, 2.0, 3.0, 4.0])
    (x * 1).chunk(2)[0].mul_(2)


def p_iteration_output_written(m):
    x = leaf(m, [1.0, 2.0])
    for e in x * 1:
        e.add_(1)


def p_split_output_after_base_write(m):
    x = leaf(m, [1.0, 2.0, 3.0, 4.0])
    b = x * 1
    u = b.split(1)
    b.mul_(2)
    (u[0] * 1).sum().backward()


def p_split_of_plain_written(m):
    x = m.zeros(4, dtype=m.float64)
    x.split(2)[0].add_(1)
    return {"x": x}


def p_detach_saved_input(m):
    x = leaf(m, [1.0, 2.0])
    y = x * 1
    w = y * y
    y.detach_()
    w.sum().backward()


@pytest.mark.parametrize("act", ["relu_", "sigmoid_", "tanh_", "exp_"])
def test_write_after_inplace_activation_saved_its_output(act):
    def program(m):
        x = leaf(m, [-1.0, 0.5, 2.0])
        y = x * 1
        getattr(y, act)()
        y.mul_(2)
        y.sum().backward()
    run_both(program)


# ---- 10. flowgrad raised, torch computes ----------------------------------------------------
def p_where_then_write_other(m):
    a = leaf(m, [1.0, -2.0, 3.0])
    b = leaf(m, [4.0, 5.0, 6.0]) * 1
    c = m.where(a > 0, a, b)
    b.add_(1)
    (c * c).sum().backward()
    return {"a.grad": a.grad}


def p_reciprocal_then_write(m):
    x = leaf(m, [1.0, 2.0, 4.0])
    y = 1.0 / x
    y.add_(1)
    (y * y).sum().backward()
    return {"y": y, "x.grad": x.grad}


def p_data_write_between(m):
    x = leaf(m, [1.0, 2.0, 3.0])
    y = x * x
    x.data.mul_(2)
    y.sum().backward()
    return {"x": x, "x.grad": x.grad}


@pytest.mark.parametrize("write", ["fill", "zero", "masked_fill", "copy", "add"])
def test_write_into_expanded_view(write):
    def program(m):
        e = m.zeros(3, dtype=m.float64).expand(2, 3)
        if write == "fill":
            e.fill_(2)
        elif write == "zero":
            e.zero_()
        elif write == "masked_fill":
            e.masked_fill_(m.ones(2, 3, dtype=m.bool), 2.0)
        elif write == "copy":
            e.copy_(m.ones(2, 3, dtype=m.float64))
        else:
            e.add_(1)
        return {"e": e}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=UserWarning)  # torch: masked_fill_ note
        run_both(program)


def p_cat_of_transposed_is_contiguous(m):
    q = m.arange(6.0, dtype=m.float64).reshape(2, 3)
    heads = [q.t(), (q * 2).t()]
    return {"cat": m.cat(heads, 1).view(-1), "stack": m.stack(heads).view(-1)}


@pytest.mark.parametrize("dtype", ["int32", "int64", "float16", "float32", "uint8"])
def test_view_dtype_reinterprets_bytes(dtype):
    def program(m):
        x = m.tensor(np.arange(8.0, dtype=np.float32).reshape(2, 4) * 1.5)
        v = x.view(getattr(m, dtype))
        return {"v": v.to(m.float64), "shape": m.tensor(list(v.shape))}
    run_both(program)


def p_view_dtype_shares_storage(m):
    x = m.zeros(4)
    x.view(m.int32)[1] = 1065353216  # the bits of 1.0f
    return {"x": x}


def p_view_dtype_bad_size(m):
    m.zeros(2, 3).view(m.float64)


def p_view_dtype_0d(m):
    m.zeros(()).view(m.float16)


def p_slice_write_into_expand_with_autograd(m):
    x = leaf(m, [1.0, 2.0, 3.0, 4.0])
    b = x * 1
    b.expand(3, 4)[1] = leaf(m, [4.0, 3.0, 2.0, 1.0])  # one row: no element written twice
    (b * b).sum().backward()
    return {"b": b, "x.grad": x.grad}


def p_view_leaf_given_a_history_by_a_sibling_write(m):
    # a view made a leaf, then its base written in place through another view: once the
    # view's history is brought up to date (reading is_leaf here), a graph that accumulates
    # into the old leaf raises, as torch's (program fuzz seed 8000709; the gradient went to
    # an orphaned meta, .grad stayed None)
    base = m.tensor([[-1.47, -0.53], [0.98, -0.73]], dtype=m.float64)
    v = base[1, -1]
    w = v[...]
    v.requires_grad_()
    w.add_(v)
    assert not v.is_leaf
    (w.sin() * -0.47).sum().backward()
    return {"v.grad": v.grad}


def _second_backward_after_setitem(m, write):
    # torch's x[index] = value is a CopySlices (or index_put_) node: a second backward through
    # it without retain_graph raises whatever it saved; flowgrad's setitem node saved nothing
    # for a basic index and ran (program fuzz seed 8008873)
    x = leaf(m, [[-0.31, -1.37], [-1.13, -1.25], [-0.11, -1.98]])
    t = x - x
    write(t)
    (t.sin() * 0.5).sum().backward()
    (t.sin() * -0.17).sum().backward()
    return {"x.grad": x.grad}


def p_second_backward_through_int_setitem(m):
    return _second_backward_after_setitem(m, lambda t: t.__setitem__(-3, 0.75))


def p_second_backward_through_slice_setitem(m):
    return _second_backward_after_setitem(
        m, lambda t: t.__setitem__(slice(0, 2), m.ones(2, 2, dtype=m.float64)))


def p_requires_grad_false_on_a_stale_no_grad_view(m):
    # torch reads leafness from the grad_fn a tensor has, without regenerating a stale view:
    # requires_grad_(False) on a view made under no_grad, after a no_grad write to its base
    # through another view, runs (flowgrad regenerated it and raised; program fuzz 8008928)
    x = leaf(m, [[-1.84, -1.77, -0.27], [-1.94, 0.05, 0.6]])
    _, middle, last = x.chunk(3, 1)
    with m.no_grad():
        v = middle.reshape(2, -1)
        last.relu_()
    v.requires_grad_(False)
    return {"v": v}


def p_second_backward_through_setitem_of_a_0d_tensor(m):
    # x[()] of a 0-d x is x itself: x.copy_(value), no CopySlices, so it runs twice (8005243)
    a = leaf(m, -0.68)
    x = m.tensor(0.69, dtype=m.float64)
    x[()] = a
    (x.sin() * 0.5).sum().backward()
    (x.sin() * 1.09).sum().backward()
    return {"a.grad": a.grad}


def p_copy_of_a_view_with_the_same_elements_into_an_expand(m):
    # torch's copy_ returns early when the source is a view of the very same elements (same
    # start, shape, strides), even into an expand; flowgrad did so only for the tensor itself
    # and refused the self-overlapping write (program fuzz seed 8004424)
    x = leaf(m, [[-0.66, 0.95], [0.48, -0.37]])
    (g,) = m.autograd.grad((x.tanh() * x).sum(), [x], create_graph=True)
    wide = g.expand(2, 2, 2)
    wide.expand_as(wide).copy_(wide)
    return {"wide": wide}


def p_retained_grad_of_a_tensor_detached_in_place(m):
    # detach_() after retain_grad(): a graph recorded before still reaches the tensor, whose
    # .grad gets the retained gradient, as torch's (flowgrad gave it a new meta the graph never
    # reached: .grad None; program fuzz seed 9007321)
    x = leaf(m, [-0.1, 0.31, 1.73, 1.62])
    y = x.neg()
    total = y.sum()
    y.retain_grad()
    y.detach_()
    (total.sin() * 0.86).backward()
    return {"y.grad": y.grad, "x.grad": x.grad, "leaf": m.tensor(float(y.is_leaf)),
            "requires_grad": m.tensor(float(y.requires_grad))}


PROGRAMS = [v for k, v in dict(globals()).items() if k.startswith("p_")]


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.__name__[2:] for p in PROGRAMS])
def test_program_matches_torch(program):
    run_both(program)


# ---- writes through an expand whose elements share memory, with autograd -------------------
# torch computes these forward but its backward refuses them ("more than one element of the
# written-to tensor refers to a single memory location"); flowgrad addresses such a write to
# the base's elements, so it must equal the same write done on the base, run in torch.
def _write_through_expand(m, through_expand):
    x = leaf(m, [-1.44, -0.37, 0.17, 0.68])
    v = leaf(m, [5.0, 7.0])
    a = x * 2
    if through_expand:
        a.expand(2, 4)[[0, 1], [1, 1]] = v  # both rows alias a[1]: the last write wins
        a.expand(3, 4).masked_fill_(a > 0, 0.5)
    else:
        a[[1, 1]] = v
        a.masked_fill_(a > 0, 0.5)
    s = x.sum()
    if through_expand:
        s.expand(3)[[1, 1]] += 1.5  # a 0-d base
    else:
        s[()] = s + 1.5
    ((a * a).sum() + s * 3).backward()
    return [t.detach().numpy().copy() for t in (a, s, x.grad, v.grad)]


def test_writes_through_an_expand_equal_writes_to_its_base():
    for got, want in zip(_write_through_expand(flow, True), _write_through_expand(torch, False)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


# ---- 5. concurrent backward into one shared leaf --------------------------------------------
def test_concurrent_backward_accumulates_exactly():
    w = flow.zeros(100_000, requires_grad=True)
    x = flow.ones(100_000)

    def worker():
        for _ in range(50):
            (w * x).sum().backward()

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    np.testing.assert_array_equal(w.grad.numpy(), np.full(100_000, 300.0, np.float32))


@pytest.mark.parametrize("write", ["masked_fill_", "mask setitem", "index setitem", "fill_"])
def test_masked_writes_into_an_expand_warn_as_torchs(write):
    # a mask or index selecting some elements of an expand writes every element aliasing them
    # (torch too, with a deprecation warning; flowgrad wrote silently); fill_ writes all anyway
    seen = []
    for m in (torch, flow):
        a = m.ones(1, dtype=m.float64).expand(3)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if write == "masked_fill_":
                a.masked_fill_(m.tensor([True, False, True]), 0.0)
            elif write == "mask setitem":
                a[m.tensor([True, False, True])] = 0.0
            elif write == "index setitem":
                a[m.tensor([0, 2])] = 5.0
            else:
                a.fill_(2.0)
        names = {str(w.message).split(" on ")[0] for w in caught
                 if "expanded tensors is deprecated" in str(w.message)}
        seen.append((a.tolist(), bool(names), all(w.filename == __file__ for w in caught)))
    assert seen[1] == seen[0]


SETITEM_INDEXES = {"int": (slice(None), 0), "narrowing slice": slice(0, 2),
                   "ellipsis int": (Ellipsis, 0), "list and int": ([0, 1], 0),
                   "full slice": slice(None), "ellipsis": Ellipsis, "list": [0, 1],
                   "mask": "mask", "full slice and list": (slice(None), [0])}


@pytest.mark.parametrize("detach_base", [False, True])
@pytest.mark.parametrize("index", SETITEM_INDEXES.values(), ids=SETITEM_INDEXES.keys())
def test_setitem_on_a_view_rebases_the_view_only_where_torch_does(index, detach_base):
    """torch's v[i] = x writes into the view v[i] makes when the index's basic part selects
    one (an int, a narrowing slice): v itself is regenerated from its base when next read,
    so after base.detach_() it has no history; a whole or purely advanced index writes v."""
    def program(m):
        x = m.ones(3, 1, dtype=m.float64, requires_grad=True) * 2
        base = m.zeros(3, 1, dtype=m.float64)
        v = base[0:3]
        i = m.tensor([True, False, True]) if isinstance(index, str) else index
        target = v[i]
        v[i] = x[:target.shape[0]].reshape(target.shape) if target.dim() else x[0, 0]
        if detach_base:
            base.detach_()
        out = {"v": v, "requires_grad": m.tensor(float(v.requires_grad))}
        if v.requires_grad:
            (g,) = m.autograd.grad((v * v).sum(), x, allow_unused=True)
            out["grad"] = g
        return out
    run_both(program)
