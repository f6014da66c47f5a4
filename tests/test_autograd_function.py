"""Custom autograd.Function against torch: saved tensors, flags, marks, non-tensor args."""
from __future__ import annotations

import pytest
import torch
from test_autograd_semantics import X, flags, leaf, raises, same

import flowgrad as flow


def fns(m):
    """The same custom Functions, defined on module m's autograd.Function."""
    F = m.autograd.Function

    class Cube(F):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, dy):
            (x,) = ctx.saved_tensors
            return dy * 3 * x ** 2

    class ExpOut(F):  # saves its own output
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, dy):
            (y,) = ctx.saved_tensors
            return dy * y

    class Scale(F):  # non-tensor arguments, attributes on ctx
        @staticmethod
        def forward(ctx, x, k, w, offset=0.0):
            ctx.k = k
            ctx.flags = ctx.needs_input_grad
            ctx.save_for_backward(w)
            return x * k * w + offset

        @staticmethod
        def backward(ctx, dy):
            (w,) = ctx.saved_tensors
            return dy * ctx.k * w, None, None, None

    class SplitTwo(F):  # two outputs, the second marked non-differentiable
        @staticmethod
        def forward(ctx, x):
            lo, hi = x * 2, (x > 0).to(x.dtype)
            ctx.mark_non_differentiable(hi)
            return lo, hi

        @staticmethod
        def backward(ctx, dlo, dhi):
            ctx.dhi = dhi
            return dlo * 2

    class Pair(F):  # two differentiable outputs
        @staticmethod
        def forward(ctx, x):
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, da, db):
            return da * 2 + db * 3

    class DoubleInPlace(F):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, dy):
            return dy * 2

    class Once(F):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sin()

        @staticmethod
        @m.autograd.function.once_differentiable
        def backward(ctx, dy):
            (x,) = ctx.saved_tensors
            ctx.grad_enabled = m.is_grad_enabled()
            return dy * x.cos()

    class NoneGrad(F):
        @staticmethod
        def forward(ctx, x, w):
            return x * w

        @staticmethod
        def backward(ctx, dy):
            return dy * 2, None

    class TooFew(F):
        @staticmethod
        def forward(ctx, x, w):
            return x * w

        @staticmethod
        def backward(ctx, dy):
            return dy

    class WrongShape(F):
        @staticmethod
        def forward(ctx, x):
            return x.sum()

        @staticmethod
        def backward(ctx, dy):
            return dy.expand(2)

    class GradForInt(F):
        @staticmethod
        def forward(ctx, x, k):
            return x * k

        @staticmethod
        def backward(ctx, dy):
            return dy, dy

    class Identity(F):  # returns its input as-is
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, dy):
            return dy * 5

    return {k: v for k, v in locals().items() if isinstance(v, type)}


def test_save_for_backward_input():
    def scenario(m):
        x = leaf(m)
        y = fns(m)["Cube"].apply(x)
        y.sum().backward()
        return y, x.grad, flags(y), y.grad_fn.name()
    same(scenario)


def test_save_for_backward_output():
    def scenario(m):
        x = leaf(m)
        (fns(m)["ExpOut"].apply(x) * x).sum().backward()
        return x.grad
    same(scenario)


def test_custom_function_second_order():
    def scenario(m):
        x = leaf(m)
        f = fns(m)
        (g,) = m.autograd.grad(f["Cube"].apply(f["ExpOut"].apply(x)).sum(), x,
                               create_graph=True)
        (g2,) = m.autograd.grad(g.sum(), x)
        return g, g2
    same(scenario)


def test_non_tensor_arguments_and_needs_input_grad():
    def scenario(m):
        x, w = leaf(m), m.tensor(X + 1, dtype=m.float64)
        holder = {}

        class Spy(fns(m)["Scale"]):
            @staticmethod
            def forward(ctx, *args):
                holder["ctx"] = ctx
                return fns(m)["Scale"].forward(ctx, *args)
        y = Spy.apply(x, 3, w, 0.5)
        y.sum().backward()
        return y, x.grad, holder["ctx"].flags
    same(scenario)


def test_mark_non_differentiable():
    def scenario(m):
        x = leaf(m)
        f = fns(m)["SplitTwo"]
        lo, hi = f.apply(x)
        (lo * 3).sum().backward()
        return lo, hi, flags(lo), flags(hi), x.grad
    same(scenario)


def test_non_differentiable_output_grad_is_zeros():
    captured = {}

    def scenario(m):
        x = leaf(m)

        class Spy(fns(m)["SplitTwo"]):
            @staticmethod
            def backward(ctx, dlo, dhi):
                captured[m.__name__] = dhi
                return dlo * 2
        lo, _ = Spy.apply(x)
        lo.sum().backward()
        return x.grad, captured[m.__name__]
    same(scenario)


def test_next_functions_index_of_second_output():
    def scenario(m):
        x = leaf(m)
        a, b = fns(m)["Pair"].apply(x)
        z = b * 2
        (node, idx) = z.grad_fn.next_functions[0]
        (a.sum() + z.sum()).backward()
        return node is b.grad_fn, idx, x.grad
    same(scenario)


def test_mark_dirty_on_non_leaf():
    def scenario(m):
        a = leaf(m)
        x = a * 1
        y = fns(m)["DoubleInPlace"].apply(x)
        (y * y).sum().backward()
        return y is x, x, a.grad, flags(y)
    same(scenario)


def test_mark_dirty_on_leaf_that_requires_grad_raises():
    same(lambda m: raises(lambda: fns(m)["DoubleInPlace"].apply(leaf(m))))
    with pytest.raises(RuntimeError, match="leaf"):
        fns(flow)["DoubleInPlace"].apply(leaf(flow))


def test_mark_dirty_on_a_view_of_a_leaf_that_stopped_requiring_grad_raises():
    # (program_fuzz 11501611: v = x[:, None], then x.requires_grad = False: v still requires
    # grad and is a view of a leaf to torch's check, as to mul_'s; flowgrad's Function wrote)
    def scenario(m):
        x = leaf(m)
        v = x[:, None]
        x.requires_grad = False
        return raises(lambda: fns(m)["DoubleInPlace"].apply(v))
    same(scenario)
    assert scenario(flow) is not None


def test_mark_dirty_bumps_version():
    def scenario(m):
        a = leaf(m)
        x = a * 1
        s = x.exp()     # saves x? no: exp saves its output; sin saves its input
        t = x.sin()
        fns(m)["DoubleInPlace"].apply(x)
        return raises(lambda: (s + t).sum().backward())
    same(scenario)


def test_once_differentiable_runs_without_grad_mode():
    ctxs = {}

    def scenario(m):
        x = leaf(m)

        class Spy(fns(m)["Once"]):
            @staticmethod
            def forward(ctx, x):
                ctxs[m.__name__] = ctx
                return fns(m)["Once"].forward(ctx, x)
        Spy.apply(x).sum().backward(create_graph=True)
        return x.grad, ctxs[m.__name__].grad_enabled
    same(scenario)


def test_none_gradient_for_input():
    def scenario(m):
        x, w = leaf(m), leaf(m, X + 1)
        fns(m)["NoneGrad"].apply(x, w).sum().backward()
        return x.grad, w.grad
    same(scenario)


def test_wrong_number_of_gradients_names_function():
    same(lambda m: raises(
        lambda: fns(m)["TooFew"].apply(leaf(m), leaf(m)).sum().backward()))
    with pytest.raises(RuntimeError, match="TooFewBackward.*incorrect number of gradients"):
        fns(flow)["TooFew"].apply(leaf(flow), leaf(flow)).sum().backward()


def test_wrong_gradient_shape_names_function_and_shapes():
    same(lambda m: raises(lambda: fns(m)["WrongShape"].apply(leaf(m)).backward()))
    with pytest.raises(RuntimeError, match=r"WrongShapeBackward.*\(2,\).*\(3,\)"):
        fns(flow)["WrongShape"].apply(leaf(flow)).backward()


def test_gradient_for_non_tensor_argument_raises():
    same(lambda m: raises(lambda: fns(m)["GradForInt"].apply(leaf(m), 2).sum().backward()))
    with pytest.raises(RuntimeError, match="GradForIntBackward.*not a Tensor"):
        fns(flow)["GradForInt"].apply(leaf(flow), 2).sum().backward()


def test_output_that_is_an_input():
    def scenario(m):
        x = leaf(m)
        y = fns(m)["Identity"].apply(x)
        (y * 2).sum().backward()
        return y is x, flags(y), flags(x), x.grad
    same(scenario)


def test_under_no_grad_records_nothing():
    def scenario(m):
        x = leaf(m)
        with m.no_grad():
            y = fns(m)["Cube"].apply(x)
        return flags(y)
    same(scenario)


def test_forward_runs_without_grad_mode():
    def scenario(m):
        seen = []

        class Probe(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                seen.append(m.is_grad_enabled())
                return (x * 2).requires_grad

            @staticmethod
            def backward(ctx, dy):
                return dy
        return Probe.apply(leaf(m)), tuple(seen)
    same(scenario)


def test_saved_output_modified_in_place_raises():
    def scenario(m):
        x = leaf(m)
        y = fns(m)["ExpOut"].apply(x)
        with m.no_grad():
            y.add_(1)
        return raises(lambda: y.sum().backward())
    same(scenario)
    x = leaf(flow)
    y = fns(flow)["ExpOut"].apply(x)
    with flow.no_grad():
        y.add_(1)
    with pytest.raises(RuntimeError, match="ExpOutBackward.*version 0.*version 1"):
        y.sum().backward()


def test_second_backward_through_custom_function_raises():
    def scenario(m):
        x = leaf(m)
        y = fns(m)["Cube"].apply(x).sum()
        y.backward()
        return raises(y.backward)
    same(scenario)


def test_custom_function_saved_tensors_freed_after_backward():
    import weakref
    x = leaf(flow)
    h = x * 2
    y = fns(flow)["Cube"].apply(h).sum()
    ref = weakref.ref(h)
    del h
    y.backward()
    assert ref() is None  # the saved input was dropped by the run


def test_custom_backward_sees_grad_mode_of_create_graph():
    seen = {}

    def scenario(m):
        class Probe(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, dy):
                seen.setdefault(m.__name__, []).append(m.is_grad_enabled())
                return dy * 2
        x = leaf(m)
        Probe.apply(x).sum().backward(retain_graph=True)
        Probe.apply(x).sum().backward(create_graph=True)
        return tuple(seen[m.__name__])
    same(scenario)
    assert seen["flowgrad"] == [False, True]



def test_set_materialize_grads_false_passes_none_like_torch():
    seen = {}

    def make(m):
        class TwoOut(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.set_materialize_grads(False)
                return x * 2, x * 3

            @staticmethod
            def backward(ctx, g1, g2):
                seen[m.__name__] = (g1 is None, g2 is None)
                return g1 * 2 if g1 is not None else None
        return TwoOut

    for m in (flow, torch):
        x = m.tensor([1.0, 2.0], requires_grad=True)
        a, _ = make(m).apply(x)
        a.sum().backward()
        assert x.grad.tolist() == [2.0, 2.0]
    assert seen["flowgrad"] == seen["torch"] == (False, True)


def test_materialized_grads_are_zeros_by_default():
    class TwoOut(flow.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            assert g2 is not None and g2.tolist() == [0.0, 0.0]
            return g1 * 2 + g2 * 3

    x = flow.tensor([1.0, 2.0], requires_grad=True)
    a, _ = TwoOut.apply(x)
    a.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]


def test_a_write_into_a_tensor_without_history_beside_a_live_function_view():
    # a custom Function's as-is output, alive, is remembered (a weak dictionary); a write into
    # a plain tensor (no autograd meta) then looked None up there and raised TypeError
    class Same(flow.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    kept = Same.apply(flow.ones(3, requires_grad=True))
    w = flow.tensor([1.0, 2.0, 3.0], requires_grad=True)
    z = flow.zeros(3)
    z[1:] = w[1:]
    z.sum().backward()
    assert z.tolist() == [0.0, 2.0, 3.0] and w.grad.tolist() == [0.0, 1.0, 1.0]
    assert kept.grad_fn is not None


def test_an_input_view_whose_base_was_written_since_is_regenerated_first():
    # program_fuzz seed 11401484: apply recorded a stale view's old grad_fn (a view of y taken
    # before y.mul_(w)): x's gradient missed the write, w got none, where torch's apply reads
    # each input's grad_fn first (regenerating the view); a multi-output view (chunk) whose
    # sibling was written raises there, as torch's
    def scenario(m):
        Cube = fns(m)["Cube"]
        x, w = leaf(m, [1.92, 1.0, 0.69]), leaf(m, [2.0, 3.0, 4.0])
        y = x * 1.0
        v = y[:2]
        y.mul_(w)
        Cube.apply(v).sum().backward()
        a, b = leaf(m, [1.0, 2.0, 3.0, 4.0]).chunk(2)
        with m.no_grad():
            b.mul_(2.0)
        return x.grad, w.grad, raises(lambda: Cube.apply(a))

    same(scenario)


def test_outputs_unrecorded_and_written_inputs_as_torch():
    # program_fuzz seeds 11402354, 11403930, 11403940: not recorded (no_grad), an input
    # returned comes back as a detached alias (it came back itself, requiring grad); a
    # retaining non-leaf written by forward (mark_dirty) keeps retain_grad, its .grad reset
    # (flowgrad lost retain_grad); a multi-output view written by forward raises
    def scenario(m):
        F = m.autograd.Function

        class Double_(F):
            @staticmethod
            def forward(ctx, x):
                x.mul_(2.0)
                ctx.mark_dirty(x)
                return x

            @staticmethod
            def backward(ctx, g):
                return g * 2.0

        class Same(F):
            @staticmethod
            def forward(ctx, x):
                return x

            @staticmethod
            def backward(ctx, g):
                return g

        x = leaf(m, [[-0.64, 1.24], [1.52, 1.04]])
        p = m.ones(2)
        with m.no_grad():
            t, s, q = Double_.apply(x), Same.apply(x), Same.apply(p)
        out = [t is x, t.requires_grad, s is x, s.requires_grad, q is p, q._is_view()]
        t.add_(1.0)
        w = leaf(m, [[0.28, -0.16, 1.05]])
        u = w.flip(0)
        u.retain_grad()
        (u * 2).sum().backward(retain_graph=True)
        v = Double_.apply(u)
        out.append(u.grad)
        v.sin().sum().backward()
        a, b = w.exp().unbind(1)[:2]
        return out + [x, u.grad, w.grad, raises(lambda: Double_.apply(b))]

    same(scenario)
