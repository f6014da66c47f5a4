import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import pytest  # noqa: E402


@pytest.fixture
def keep_global_random_streams():
    """Restore torch's and flowgrad's global generators after the test: the fuzz modules
    seed them, and later tests in the worker must see the streams as they were."""
    import torch

    import flowgrad as flow

    saved = torch.get_rng_state(), flow.get_rng_state()
    yield
    torch.set_rng_state(saved[0])
    flow.set_rng_state(saved[1])


@pytest.fixture(autouse=True)
def torch_distributions_validate_by_default():
    """torch._dynamo's import (the OpInfo database, torch.compile) turns torch.distributions'
    default argument validation off for the whole process (its eval_frame.py); the tests
    comparing validation errors with torch need torch's documented default (on), whatever
    ran before them in the worker."""
    distributions = sys.modules.get("torch.distributions")
    if distributions is not None and not distributions.Distribution._validate_args:
        distributions.Distribution.set_default_validate_args(True)
