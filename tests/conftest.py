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
