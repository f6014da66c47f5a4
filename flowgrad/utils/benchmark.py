"""torch.utils.benchmark for flowgrad: `Timer` (timeit with warm-up, a thread count, and
replicates: `timeit`, `blocked_autorange`, `adaptive_autorange`), the `Measurement` it returns
(median, mean, IQR, significant figures, torch's repr) and `Compare`, a table of
measurements. Instruction counts (`collect_callgrind`) and the fuzzers are not here.

>>> import flowgrad as flow
>>> from flowgrad.utils import benchmark
>>> m = benchmark.Timer("x * 2", globals={"x": flow.ones(8)}).timeit(100)
>>> m.number_per_run, len(m.times), m.median > 0
(100, 1, True)
"""
from __future__ import annotations

import collections
import dataclasses
import math
import textwrap
import timeit as _timeit

import numpy as np

__all__ = ["Timer", "Measurement", "Compare", "TaskSpec", "Language", "select_unit"]

_IQR_WARN_THRESHOLD, _IQR_GROSS_WARN_THRESHOLD = 0.1, 0.5
_UNIT_NAMES = {"ns": "nanoseconds", "us": "microseconds", "ms": "milliseconds", "s": "seconds"}


class Language:
    """The statement's language (torch's enum; Python is the only one here)."""

    PYTHON = 0
    CPP = 1


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """What was measured: the statement, its setup and the labels Compare groups by."""

    stmt: str
    setup: str
    global_setup: str = ""
    label: str | None = None
    sub_label: str | None = None
    description: str | None = None
    env: str | None = None
    num_threads: int = 1

    @property
    def title(self):
        sub = f": {self.sub_label}" if self.sub_label else ""
        if self.label is not None:
            return self.label + sub
        if "\n" not in self.stmt:
            return self.stmt + sub
        return (f"stmt:{f' ({self.sub_label})' if self.sub_label else ''}\n" +
                textwrap.indent(self.stmt, "  "))

    def setup_str(self):
        if self.setup == "pass" or not self.setup:
            return ""
        return (f"setup:\n{textwrap.indent(self.setup, '  ')}" if "\n" in self.setup
                else f"setup: {self.setup}")

    def summarize(self):
        sections = [self.title, self.description or "", self.setup_str()]
        return "\n".join(f"{s}\n" if "\n" in s else s for s in sections if s)


def select_unit(t):
    """(unit, scale) that shows `t` seconds as a number of order 1 to 999."""
    unit = {-3: "ns", -2: "us", -1: "ms"}.get(int(math.log10(t) // 3), "s") if t > 0 else "s"
    return unit, {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[unit]


@dataclasses.dataclass(repr=False)
class Measurement:
    """`raw_times[i]` seconds for `number_per_run` runs of the task, per replicate."""

    number_per_run: int
    raw_times: list
    task_spec: TaskSpec
    metadata: dict | None = None

    def __getattr__(self, name):
        if name in {f.name for f in dataclasses.fields(TaskSpec)}:
            return getattr(self.task_spec, name)
        raise AttributeError(name)

    @property
    def times(self):
        """Seconds per run, one per replicate."""
        return [t / self.number_per_run for t in self.raw_times]

    def _quantile(self, q):
        return float(np.quantile(np.asarray(self.times, np.float64), q))

    @property
    def median(self):
        return self._quantile(0.5)

    @property
    def mean(self):
        return float(np.mean(self.times))

    @property
    def iqr(self):
        return self._quantile(0.75) - self._quantile(0.25)

    @property
    def significant_figures(self):
        """How many digits of the median the interquartile spread supports (1 to 6)."""
        ordered = sorted(self.times)
        n = len(ordered)
        middle = np.asarray(ordered[n // 4:math.ceil(3 * n / 4)], np.float64)
        interval = max(1.645 * middle.std() / math.sqrt(len(middle)), 1e-9)
        return min(max(int(math.floor(math.log10(self.median / interval))), 1), 6)

    def meets_confidence(self, threshold=_IQR_WARN_THRESHOLD):
        return self.iqr / self.median < threshold

    @property
    def _warnings(self):
        if len(self.times) < 4 or self.meets_confidence(_IQR_WARN_THRESHOLD):
            return ()
        why = ("This suggests significant environmental influence."
               if not self.meets_confidence(_IQR_GROSS_WARN_THRESHOLD)
               else "This could indicate system fluctuation.")
        return (f"  WARNING: Interquartile range is {self.iqr / self.median * 100:.1f}% of the "
                f"median measurement.\n           {why}",)

    @property
    def has_warnings(self):
        return bool(self._warnings)

    @property
    def title(self):
        return self.task_spec.title

    @property
    def as_row_name(self):
        return self.sub_label or self.stmt or "[Unknown]"

    def __repr__(self):
        n = len(self.raw_times)
        unit, scale = select_unit(self.median)
        lines = [object.__repr__(self), self.task_spec.summarize(),
                 f"  {'Median: ' if n > 1 else ''}{self.median / scale:.2f} {unit}"]
        if n >= 4:
            lines.append(f"  IQR:    {self.iqr / scale:.2f} {unit} "
                         f"({self._quantile(0.25) / scale:.2f} to "
                         f"{self._quantile(0.75) / scale:.2f})")
        threads = self.num_threads
        lines.append(f"  {n} measurement{'s' if n > 1 else ''}, {self.number_per_run} runs "
                     f"{'per measurement,' if n > 1 else ','} {threads} "
                     f"thread{'s' if threads > 1 else ''}")
        lines += self._warnings
        return "\n".join(lines)

    @staticmethod
    def merge(measurements):
        """Replicates of one task merged into one Measurement (times per single run)."""
        groups = collections.defaultdict(list)
        for m in measurements:
            groups[m.task_spec].extend(m.times)
        return [Measurement(1, times, spec) for spec, times in groups.items()]


class _Threads:
    """flowgrad's thread count set to `n` for the measurement, restored after."""

    def __init__(self, n):
        self.n = n

    def __enter__(self):
        import flowgrad

        self.before = flowgrad.get_num_threads()
        flowgrad.set_num_threads(self.n)

    def __exit__(self, *exc):
        import flowgrad

        flowgrad.set_num_threads(self.before)


class Timer:
    """Times `stmt` (after `setup`, with `globals`) as torch's Timer: `timeit(number)`, or
    replicates until `min_run_time` (`blocked_autorange`) or until the spread is small
    (`adaptive_autorange`), each with a warm-up, at `num_threads` threads."""

    def __init__(self, stmt="pass", setup="pass", global_setup="", timer=_timeit.default_timer,
                 globals=None, label=None, sub_label=None, description=None, env=None,
                 num_threads=1, language=Language.PYTHON):
        if language not in (Language.PYTHON, "py", "python"):
            raise ValueError("Timer: only Python statements can be timed in flowgrad")
        if not isinstance(stmt, str):
            raise ValueError("Timer: stmt must be a string")
        names = dict(globals or {})
        if global_setup:
            exec(global_setup, names)  # noqa: S102 - the caller's own setup code, as torch's
        names.setdefault("torch", __import__("flowgrad"))
        self._timer = _timeit.Timer(stmt=textwrap.dedent(stmt), setup=textwrap.dedent(setup),
                                    timer=timer, globals=names)
        self._task_spec = TaskSpec(stmt, setup, global_setup, label, sub_label, description,
                                   env, num_threads)

    def _timeit(self, number):
        return self._timer.timeit(number=max(int(number), 1))

    def timeit(self, number=1000000):
        """One replicate of `number` runs (after a warm-up of number // 100)."""
        with _Threads(self._task_spec.num_threads):
            self._timeit(max(number // 100, 2))
            return Measurement(number, [self._timeit(number)], self._task_spec)

    def repeat(self, repeat=-1, number=-1):
        raise NotImplementedError("See `Timer.blocked_autorange.`")

    def autorange(self, callback=None):
        raise NotImplementedError("See `Timer.blocked_autorange.`")

    def _block_size(self, min_run_time):
        """Runs per replicate: grown tenfold until the timer's own cost is negligible."""
        overhead = float(np.median([self._timer.timeit(number=0) for _ in range(5)]))
        number = 1
        while True:
            taken = self._timeit(number)
            if (overhead / taken <= 1e-4 and taken >= min_run_time / 1000 or
                    taken > min_run_time or number * 10 > 2147483647):
                return number
            number *= 10

    def _replicates(self, number, enough, min_run_time, max_run_time=None, callback=None):
        times, total = [], 0.0
        while True:
            spent = self._timeit(number)
            times.append(spent)
            total += spent
            if callback:
                callback(number, spent)
            if total >= min_run_time and enough(times):
                return times
            if max_run_time and total > max_run_time:
                return times

    def blocked_autorange(self, callback=None, min_run_time=0.2):
        """Replicates of one block size until `min_run_time` seconds are spent."""
        with _Threads(self._task_spec.num_threads):
            number = self._block_size(min_run_time)
            times = self._replicates(number, lambda t: True, min_run_time, callback=callback)
        return Measurement(number, times, self._task_spec)

    def adaptive_autorange(self, threshold=0.1, *, min_run_time=0.01, max_run_time=10.0,
                           callback=None):
        """Replicates until their IQR is under `threshold` of the median (at least 3 and
        `min_run_time`), or `max_run_time` is spent."""
        with _Threads(self._task_spec.num_threads):
            number = self._block_size(min_run_time=0.05)

            def enough(times):
                return len(times) > 3 and Measurement(number, times, self._task_spec) \
                    .meets_confidence(threshold)
            times = self._replicates(number, enough, min_run_time, max_run_time, callback)
        return Measurement(number, times, self._task_spec)

    def collect_callgrind(self, *args, **kwargs):
        raise NotImplementedError("Timer.collect_callgrind is not available in flowgrad")


class Compare:
    """A table of measurements: one block per label, a row per sub_label (or statement), a
    column per description; medians in one unit per block."""

    def __init__(self, results):
        self._results = list(results)
        self._trim = self._colorize = self._highlight = False

    def extend_results(self, results):
        self._results.extend(results)

    def trim_significant_figures(self):
        self._trim = True

    def colorize(self, rowwise=False):
        self._colorize = True

    def highlight_warnings(self):
        self._highlight = True

    def print(self):
        print(str(self))

    def __str__(self):
        blocks = []
        by_label = collections.OrderedDict()
        for m in Measurement.merge(self._results):
            by_label.setdefault(m.label, []).append(m)
        for label, ms in by_label.items():
            rows = list(dict.fromkeys(m.as_row_name for m in ms))
            cols = list(dict.fromkeys(m.description for m in ms))
            unit, scale = select_unit(min(m.median for m in ms))
            cell = {(m.as_row_name, m.description): m for m in ms}
            header = [""] + [c or "" for c in cols]
            table = [header]
            for r in rows:
                line = [r]
                for c in cols:
                    m = cell.get((r, c))
                    if m is None:
                        line.append("")
                        continue
                    value = m.median / scale
                    if self._trim:
                        digits = m.significant_figures
                        value = float(f"{value:.{digits}g}")
                    line.append(f"{value:.1f}" + (" (! ...)" if self._highlight and
                                                   m.has_warnings else ""))
                table.append(line)
            widths = [max(len(row[k]) for row in table) for k in range(len(header))]
            text = "\n".join("  " + " | ".join(v.rjust(w) if k else v.ljust(w)
                                               for k, (v, w) in enumerate(zip(row, widths)))
                             for row in table)
            title = f"-- {label} --" if label else "-" * 10
            blocks.append(f"[{title}]\n{text}\n\nTimes are in {_UNIT_NAMES[unit]} ({unit}).")
        return "\n\n".join(blocks)
