"""Errors raised inside kernels come back naming the op, the input shapes and dtypes, and
what to do; broadcasting failures are RuntimeErrors worded like torch's."""
import numpy as np
import pytest

import flowgrad as flow

BROADCAST = [
    ("add", lambda a, b: a + b),
    ("mul", lambda a, b: a * b),
    ("sub", lambda a, b: flow.sub(a, b)),
    ("where", lambda a, b: flow.where(a > 0, a, b)),
    ("maximum", lambda a, b: flow.maximum(a, b)),
    ("atan2", lambda a, b: flow.atan2(a, b)),
]


@pytest.mark.parametrize("op_name,fn", BROADCAST, ids=[c[0] for c in BROADCAST])
def test_broadcast_errors_name_the_op_shapes_and_dtypes(op_name, fn):
    a, b = flow.ones(2, 3, requires_grad=True), flow.ones(3, 2)
    with pytest.raises(RuntimeError) as info:
        fn(a, b)
    message = str(info.value)
    assert message.startswith(f"{op_name}: The size of tensor a (2) must match the size of "
                              f"tensor b (3) at non-singleton dimension 0")
    assert "shape=(2, 3), dtype=float32" in message and "shape=(3, 2)" in message
    assert "broadcastable" in message


def test_failed_inplace_op_changes_nothing():
    a = flow.ones(2, 3)
    version = a._version
    with pytest.raises(RuntimeError, match="add"):
        a.add_(flow.ones(4))
    assert np.array_equal(a.numpy(), np.ones((2, 3))) and a._version == version


def test_index_errors_name_the_op_and_input():
    with pytest.raises(IndexError, match=r"getitem: index 5 is out of bounds for axis 0 with "
                                         r"size 3; inputs: Tensor\(shape=\(3,\)"):
        flow.ones(3)[5]


def test_a_failed_op_records_no_node():
    a = flow.ones(2, 3, requires_grad=True)
    with pytest.raises(RuntimeError):
        a * flow.ones(4)
    y = (a * 2).sum()
    y.backward()
    assert a.grad.tolist() == [[2.0] * 3] * 2


def test_errors_whose_type_needs_more_than_a_message_keep_their_text():
    from flowgrad.errors import kernel_error

    class NoLoop(TypeError):  # like NumPy's _UFuncNoLoopError: (ufunc, dtypes) arguments
        def __init__(self, ufunc, dtypes):
            super().__init__(f"ufunc {ufunc!r} has no loop for {dtypes}")

    error = kernel_error(flow.ops.REGISTRY["add"], (flow.ones(2),), NoLoop("sign", "bool"))
    assert isinstance(error, TypeError)
    assert str(error).startswith("add: ufunc 'sign' has no loop for bool; inputs: Tensor(")
