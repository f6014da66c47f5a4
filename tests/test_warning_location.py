"""A warning flowgrad raises names the user's line, as torch's do, whatever wrappers (the
argument guard, out= handling, autocast) stand between the call and the `warn` inside."""
import warnings

import pytest

import flowgrad as flow
import flowgrad.nn.functional as F


def _calls():
    x3 = flow.ones(2, 3, 4)
    a = flow.eye(3) * 2.0
    model = flow.nn.Linear(2, 2)
    opt = flow.optim.SGD(model.parameters(), lr=0.1)
    sched = flow.optim.lr_scheduler.StepLR(opt, 1)
    return {
        "dropout2d of a 3-D input": lambda: F.dropout2d(x3),
        "deprecated cholesky": lambda: flow.cholesky(a),
        "upsample_bilinear": lambda: F.upsample_bilinear(flow.ones(1, 1, 2, 2), scale_factor=2),
        "scheduler before optimizer": lambda: sched.step(),
    }


@pytest.mark.parametrize("case", list(_calls()))
def test_warning_names_the_callers_line(case):
    call = _calls()[case]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    assert caught, f"{case}: no warning"
    assert {w.filename for w in caught} == {__file__}, [(w.filename, w.lineno) for w in caught]
