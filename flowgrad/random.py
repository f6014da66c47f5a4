"""Random number generation: a global generator seeded by `manual_seed`.

>>> import flowgrad as flow
>>> _ = flow.manual_seed(0); a = flow.rand(2)
>>> _ = flow.manual_seed(0); bool((flow.rand(2) == a).all())
True
"""
from __future__ import annotations

import contextlib
import ctypes

import numpy as np

from .device import CPU

# While nn.Graph traces build: a callable that raises for a change of a generator's state
# (seeding, set_state, a new Generator): it would happen once, on the trace, while the
# compiled plan's random ops draw on from the generator on every call
_REFUSE_STATE_CHANGES = []


@contextlib.contextmanager
def refusing_state_changes(refuse):
    """Within the block, `refuse(what)` is called before a generator's state changes."""
    _REFUSE_STATE_CHANGES.append(refuse)
    try:
        yield
    finally:
        _REFUSE_STATE_CHANGES.pop()


def _mt19937(seed):
    """torch's CPU stream for `seed`: MT19937 seeded as torch's manual_seed (init_genrand of
    the low 32 bits), which NumPy's legacy seeding is."""
    bits = np.random.MT19937(0)
    bits._legacy_seeding(seed & 0xFFFFFFFF)
    return bits


class Generator:
    """A random stream (NumPy's PCG64). Pass one as `generator=` to sample from it.

    Beside it runs torch's own CPU stream (MT19937, seeded as torch seeds it), which the
    draws torch documents per seed take: randperm, and the samplers' and DataLoader's
    draws, so a seeded shuffle gives torch's order."""

    def __init__(self, device="cpu"):
        if _REFUSE_STATE_CHANGES:
            _REFUSE_STATE_CHANGES[-1]("flowgrad.Generator()")
        self._seed = 67280421310721
        self.np = np.random.Generator(np.random.PCG64(self._seed))
        self.mt = _mt19937(self._seed)

    def manual_seed(self, seed):
        if _REFUSE_STATE_CHANGES:
            _REFUSE_STATE_CHANGES[-1]("manual_seed" if self is default_generator else
                                      "Generator.manual_seed")
        if isinstance(seed, bool) or not isinstance(seed, int):  # as torch's: no int(seed)
            if isinstance(seed, np.integer):
                raise TypeError(f"Generator.manual_seed: an integer is required, got "
                                f"{type(seed).__name__}; pass int(seed)")
            raise RuntimeError(f"manual_seed expected a long, but got "
                               f"{type(seed).__name__}; pass an int")
        if not -2 ** 63 <= seed < 2 ** 64:
            raise ValueError(f"manual_seed: the seed must be within [-2**63, 2**64 - 1], got "
                             f"{seed}")
        self._seed = seed % 2 ** 64  # a negative seed counts from 2**64, as torch's
        self.np = np.random.Generator(np.random.PCG64(self._seed))
        self.mt = _mt19937(self._seed)
        return self

    def seed(self):
        return self.manual_seed(np.random.SeedSequence().entropy % (2 ** 63))._seed

    def initial_seed(self):
        return self._seed

    @property
    def device(self):
        """The device the generator draws for: the CPU (flowgrad draws every number there)."""
        return CPU

    def get_state(self):
        import json

        from .tensor import Tensor

        mt = self.mt.state
        mt = dict(mt, state=dict(mt["state"], key=mt["state"]["key"].tolist()))
        state = json.dumps({"np": self.np.bit_generator.state, "mt": mt}).encode()
        return Tensor._wrap(np.frombuffer(state, dtype=np.uint8).copy())

    def set_state(self, state):
        if _REFUSE_STATE_CHANGES:
            _REFUSE_STATE_CHANGES[-1]("set_rng_state (or fork_rng)" if self is
                                      default_generator else "Generator.set_state")
        import json

        from .tensor import Tensor

        if not isinstance(state, Tensor) or state.dtype.name != "uint8":
            raise TypeError(f"RNG state must be a uint8 tensor (from get_state), got "
                            f"{getattr(state, 'dtype', type(state).__name__)}")
        try:
            state = json.loads(bytes(np.asarray(state, np.uint8)).decode())
        except ValueError:  # (json's errors and a bad utf-8 are ValueErrors)
            raise RuntimeError(f"set_state: the {state.numel()} bytes are not a state from "
                               f"get_state (or get_rng_state)") from None
        if "np" not in state:  # (a state saved before the torch stream was kept)
            self.np.bit_generator.state = state
            return self
        self.np.bit_generator.state = state["np"]
        mt = state["mt"]
        self.mt.state = dict(mt, state=dict(mt["state"], key=np.asarray(mt["state"]["key"],
                                                                          np.uint32)))
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
    return default_generator.manual_seed(int(seed))  # (torch.manual_seed takes int(seed))


def seed():
    """Seed the global generator from a non-deterministic source; returns the seed used."""
    return default_generator.seed()


def initial_seed():
    """The seed the global generator was last seeded with."""
    return default_generator.initial_seed()


def get_rng_state():
    """The global generator's state, to pass to set_rng_state later."""
    return default_generator.get_state()


def _snapshot():
    """The global generator's state as its two bit generators hold it (no serialising: an
    nn.Graph takes one on every first call, to put back after a failed trace by `_restore`)."""
    generator = default_generator
    mt = generator.mt
    return generator, generator.np, generator.np.bit_generator.state, mt, _mt19937_bytes(mt)


def _restore(taken):
    """Put the generator of a `_snapshot` back in the state it had then."""
    generator, np_generator, np_state, mt, mt_bytes = taken
    generator.np, generator.mt = np_generator, mt
    np_generator.bit_generator.state = np_state
    _put_mt19937_bytes(mt, mt_bytes)


def _mt19937_bytes(bits):
    """The state of a NumPy MT19937 bit generator as the bytes of its C struct (uint32
    key[624], int pos), read through its address: its `state` property fills a 624-number
    array item by item (~0.5M instructions), too slow for every nn.Graph first call."""
    return ctypes.string_at(bits.ctypes.state_address, _MT19937_SIZE)


def _put_mt19937_bytes(bits, state):
    """Write back a state `_mt19937_bytes` read."""
    ctypes.memmove(bits.ctypes.state_address, state, _MT19937_SIZE)


_MT19937_SIZE = 624 * 4 + 4  # (NumPy's mt19937_state)


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
    if generator is None:
        return default_generator
    if not isinstance(generator, Generator):  # (torch's class: its ops refuse the argument)
        raise TypeError(f"generator must be a flowgrad.Generator or None, got "
                        f"{type(generator).__name__}")
    return generator


# ---- torch's draws from its CPU stream (Generator.mt) -------------------------------------
_RANDPERM_SMALL = (2 ** 32 - 1) // 20  # below this, torch's randperm is the simple loop


def torch_int64(generator=None):
    """`torch.empty((), dtype=torch.int64).random_(generator=generator).item()`."""
    hi, lo = resolve(generator).mt.random_raw(2).tolist()
    return ((hi << 32) | lo) & (2 ** 63 - 1)


def torch_randint(high, size, generator=None):
    """`torch.randint(high=high, size=(size,), generator=generator).tolist()` (high below
    2**32: one 32-bit draw modulo high each)."""
    if high >= 2 ** 32:
        return resolve(generator).np.integers(0, high, size).tolist()
    return (resolve(generator).mt.random_raw(size) % np.uint64(high)).tolist()


def torch_randperm(n, generator=None):
    """`torch.randperm(n, generator=generator).tolist()` on the CPU: a Fisher-Yates pass over
    32-bit draws (`r[i] <-> r[i + draw % (n - i)]`); from 2**32 // 20 elements on, where
    torch's differs, a NumPy permutation of the same stream."""
    gen = resolve(generator)
    if n >= _RANDPERM_SMALL:
        return np.random.Generator(gen.mt).permutation(n).tolist()
    draws = gen.mt.random_raw(max(n - 1, 0)) % np.arange(n, 1, -1, dtype=np.uint64)
    perm = list(range(n))
    for i, z in enumerate(draws.tolist()):  # sequential by nature
        j = i + z
        perm[i], perm[j] = perm[j], perm[i]
    return perm


def torch_multinomial_with_replacement(weights, size, generator=None):
    """`torch.multinomial(weights, size, replacement=True, generator=generator).tolist()`
    for 1-d float64 `weights` and size > 1: each draw a 53-bit double from two 32-bit draws,
    placed by binary search in the normalized cumulative weights."""
    cum = np.cumsum(np.asarray(weights))  # (in the weights' float32 or float64, as torch)
    cum = cum / cum[-1]
    raw = resolve(generator).mt.random_raw(2 * size).reshape(size, 2)
    bits = ((raw[:, 0] << np.uint64(32)) | raw[:, 1]) & np.uint64((1 << 53) - 1)
    return np.searchsorted(cum, bits.astype(np.float64) * 2.0 ** -53, side="left").tolist()


def torch_multinomial_by_exponentials(weights, size, generator=None):
    """`torch.multinomial(weights, size, replacement=False, generator=generator).tolist()`
    for 1-d or 2-d float32/float64 `weights` (torch's path for one draw with replacement too),
    as rows: q ~ Exp(1) for every weight, as -log1p(-u) of a 53-bit double u from two 32-bit
    draws, rounded to the weights' dtype; then the `size` largest weights / q of each row.
    torch's q is empty_like(weights): its draws fill a transposed (column-major) input's
    columns first, in memory order."""
    rows = weights.reshape(1, -1) if weights.ndim == 1 else weights
    n = rows.size
    raw = resolve(generator).mt.random_raw(2 * n).reshape(n, 2)
    bits = ((raw[:, 0] << np.uint64(32)) | raw[:, 1]) & np.uint64((1 << 53) - 1)
    q = (-np.log1p(-(bits.astype(np.float64) * 2.0 ** -53))).astype(rows.dtype)
    s0, s1 = rows.strides
    if 0 < s0 < s1 and min(rows.shape) > 1:  # (a stride of 0 keeps the row-major order)
        q = q.reshape(rows.shape[::-1]).T
    keys = rows / q.reshape(rows.shape)
    return np.argsort(-keys, axis=1, kind="stable")[:, :size].tolist()
