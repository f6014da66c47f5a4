"""Random number generation: a global generator seeded by `manual_seed`.

>>> import flowgrad as flow
>>> _ = flow.manual_seed(0); a = flow.rand(2)
>>> _ = flow.manual_seed(0); bool((flow.rand(2) == a).all())
True
"""
from __future__ import annotations

import contextlib

import numpy as np


class Generator:
    """A random stream (NumPy's PCG64). Pass one as `generator=` to sample from it."""

    def __init__(self, device="cpu"):
        self._seed = 67280421310721
        self.np = np.random.Generator(np.random.PCG64(self._seed))

    def manual_seed(self, seed):
        seed = int(seed)
        if not -2 ** 63 <= seed < 2 ** 64:
            raise ValueError(f"manual_seed: the seed must be within [-2**63, 2**64 - 1], got "
                             f"{seed}")
        self._seed = seed % 2 ** 64  # a negative seed counts from 2**64, as torch's
        self.np = np.random.Generator(np.random.PCG64(self._seed))
        return self

    def seed(self):
        return self.manual_seed(np.random.SeedSequence().entropy % (2 ** 63))._seed

    def initial_seed(self):
        return self._seed

    def get_state(self):
        import json

        from .tensor import Tensor

        state = json.dumps(self.np.bit_generator.state).encode()
        return Tensor._wrap(np.frombuffer(state, dtype=np.uint8).copy())

    def set_state(self, state):
        import json

        self.np.bit_generator.state = json.loads(bytes(np.asarray(state, np.uint8)).decode())
        return self


default_generator = Generator()


def manual_seed(seed):
    """Seed the global generator; returns it.

    >>> import flowgrad as flow
    >>> _ = flow.manual_seed(42)
    >>> a = flow.rand(2)
    >>> _ = flow.manual_seed(42)
    >>> flow.equal(a, flow.rand(2))
    True
    """
    return default_generator.manual_seed(seed)


def seed():
    """Seed the global generator from a non-deterministic source; returns the seed used."""
    return default_generator.seed()


def initial_seed():
    """The seed the global generator was last seeded with."""
    return default_generator.initial_seed()


def get_rng_state():
    """The global generator's state, to pass to set_rng_state later."""
    return default_generator.get_state()


def set_rng_state(new_state):
    """Restore the global generator to a state from get_rng_state."""
    default_generator.set_state(new_state)


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True, _caller="fork_rng", _devices_kw="devices",
             device_type="cuda"):
    """Run the block with the global generator's state restored after it, as torch's (the
    CPU generator is the one there is; `devices` name accelerators, which flowgrad has none
    of): draws inside do not move the numbers drawn after.

    >>> import flowgrad as flow
    >>> _ = flow.manual_seed(0)
    >>> with flow.random.fork_rng():
    ...     _ = flow.rand(3)
    >>> a = flow.rand(2); _ = flow.manual_seed(0); bool((a == flow.rand(2)).all())
    True
    """
    if not enabled:
        yield
        return
    state = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(state)


def numpy_generator(generator=None):
    """The NumPy generator behind `generator` (the global one when None)."""
    return (generator or default_generator).np


def resolve(generator=None):
    """The Generator object a random op draws from: `generator`, or the global one when None.

    Random ops take it as an attribute and draw inside their kernel, so a recorded op call
    replayed later draws fresh numbers from the same stream.

    >>> resolve() is default_generator
    True
    """
    return default_generator if generator is None else generator
