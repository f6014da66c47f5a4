"""Grad mode: no_grad, enable_grad, set_grad_enabled, inference_mode, is_grad_enabled —
as context managers, decorators and plain calls; thread-local; compared with torch."""
from __future__ import annotations

import threading

import pytest
from test_autograd_semantics import leaf, same


def _ctx(m, kind):
    return {
        "no_grad": lambda: m.no_grad(),
        "enable_grad": lambda: m.enable_grad(),
        "set_false": lambda: m.set_grad_enabled(False),
        "set_true": lambda: m.set_grad_enabled(True),
        "inference": lambda: m.inference_mode(),
        "inference_false": lambda: m.inference_mode(False),
    }[kind]()


KINDS = ["no_grad", "enable_grad", "set_false", "set_true", "inference", "inference_false"]


@pytest.mark.parametrize("outer", [True, False], ids=["outer_on", "outer_off"])
@pytest.mark.parametrize("kind", KINDS)
def test_context_manager(kind, outer):
    def scenario(m):
        x = leaf(m)
        with m.set_grad_enabled(outer):
            with _ctx(m, kind):
                inside = (m.is_grad_enabled(), (x * 2).requires_grad)
            after = (m.is_grad_enabled(), (x * 2).requires_grad)
        return inside, after, m.is_grad_enabled()
    same(scenario)


@pytest.mark.parametrize("outer", [True, False], ids=["outer_on", "outer_off"])
@pytest.mark.parametrize("kind", KINDS)
def test_decorator(kind, outer):
    def scenario(m):
        x = leaf(m)

        @_ctx(m, kind)
        def f(y):
            """doc"""
            return m.is_grad_enabled(), (y * 2).requires_grad
        with m.set_grad_enabled(outer):
            before = m.is_grad_enabled()
            inside = f(x)
            after = m.is_grad_enabled()
        return before, inside, after, f.__name__, f.__doc__
    same(scenario)


@pytest.mark.parametrize("kind", ["no_grad", "enable_grad", "inference"])
def test_bare_decorator(kind):
    def scenario(m):
        cls = {"no_grad": m.no_grad, "enable_grad": m.enable_grad,
               "inference": m.inference_mode}[kind]

        @cls
        def f():
            return m.is_grad_enabled()
        with m.set_grad_enabled(kind != "enable_grad"):
            return f(), m.is_grad_enabled()
    same(scenario)


@pytest.mark.parametrize("kind", ["no_grad", "enable_grad", "set_false", "inference"])
def test_decorated_generator(kind):
    def scenario(m):
        @_ctx(m, kind)
        def gen():
            for _ in range(2):
                yield m.is_grad_enabled()
        with m.set_grad_enabled(kind == "no_grad"):
            out = []
            for v in gen():
                out.append((v, m.is_grad_enabled()))
        return tuple(out)
    same(scenario)


def test_set_grad_enabled_as_plain_call():
    def scenario(m):
        x = leaf(m)
        m.set_grad_enabled(False)
        off = (m.is_grad_enabled(), (x * 2).requires_grad)
        m.set_grad_enabled(True)
        return off, m.is_grad_enabled(), (x * 2).requires_grad
    same(scenario)


@pytest.mark.parametrize("kind", KINDS)
def test_mode_restored_after_exception(kind):
    def scenario(m):
        results = []
        for outer in (True, False):
            with m.set_grad_enabled(outer):
                try:
                    with _ctx(m, kind):
                        raise KeyError("boom")
                except KeyError:
                    pass
                results.append(m.is_grad_enabled())

                @_ctx(m, kind)
                def f():
                    raise KeyError("boom")
                try:
                    f()
                except KeyError:
                    pass
                results.append(m.is_grad_enabled())
        return tuple(results)
    same(scenario)


def test_nested_modes():
    def scenario(m):
        x = leaf(m)
        seen = []
        with m.no_grad():
            seen.append((x * 2).requires_grad)
            with m.enable_grad():
                seen.append((x * 2).requires_grad)
                with m.set_grad_enabled(False):
                    seen.append((x * 2).requires_grad)
                seen.append((x * 2).requires_grad)
            seen.append((x * 2).requires_grad)
        seen.append((x * 2).requires_grad)
        return tuple(seen)
    same(scenario)


def test_grad_mode_is_thread_local():
    def scenario(m):
        seen = {}

        def worker(key):
            x = leaf(m)
            seen[key] = (m.is_grad_enabled(), (x * 2).requires_grad)

        with m.no_grad():
            t = threading.Thread(target=worker, args=("inside_no_grad",))
            t.start()
            t.join()
            seen["main"] = m.is_grad_enabled()

        def disabler():
            m.set_grad_enabled(False)
            seen["worker_off"] = m.is_grad_enabled()
        t = threading.Thread(target=disabler)
        t.start()
        t.join()
        seen["main_after"] = m.is_grad_enabled()
        return seen
    same(scenario)


def test_backward_inside_no_grad_still_computes_grads():
    def scenario(m):
        x = leaf(m)
        y = (x * x).sum()
        with m.no_grad():
            y.backward()
        return x.grad, m.is_grad_enabled()
    same(scenario)


def test_no_grad_module_exported():
    def scenario(m):
        return (m.autograd.grad_mode.no_grad is m.no_grad,
                m.autograd.no_grad is m.no_grad)
    same(scenario)
