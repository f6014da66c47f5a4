"""The profiler's results, as torch's: `FunctionEvent`s (one per op call, backward node or
user range, with its self and total CPU time), `EventList.key_averages()` grouping them by
name (and input shapes) into `FunctionEventAvg`s, and `table()`, torch's text table."""
from __future__ import annotations

import json
import os

__all__ = ["FunctionEvent", "FunctionEventAvg", "EventList"]


def _us(ns):
    return ns / 1000.0


def _time_str(us):
    """torch's format: 12.345us, 1.234ms, 1.234s."""
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


class FunctionEvent:
    """One recorded piece of work. Times in microseconds."""

    def __init__(self, event, parent=None, origin=0):
        self.name = event.name
        self.key = event.name
        self.kind = event.kind  # 'op', 'backward' or 'user'
        self.is_user_annotation = event.kind == "user"
        self.thread = event.thread
        self.input_shapes = event.shapes or []
        self.time_range_start = _us(event.start - origin)
        end = event.end if event.end is not None else event.start
        self.cpu_time_total = _us(end - event.start)
        self.cpu_parent = parent
        self.cpu_children = []
        self.count = 1

    @property
    def self_cpu_time_total(self):
        return self.cpu_time_total - sum(c.cpu_time_total for c in self.cpu_children)

    cpu_time = property(lambda self: self.cpu_time_total)
    device_time_total = self_device_time_total = 0.0

    def __repr__(self):
        return (f"<FunctionEvent name={self.name} cpu_time_total={_time_str(self.cpu_time_total)}"
                f" self_cpu_time_total={_time_str(self.self_cpu_time_total)}>")


class FunctionEventAvg:
    """The events of one key (name, and input shapes when grouped by them) added up."""

    def __init__(self, key, input_shapes=None):
        self.key = key
        self.name = key
        self.input_shapes = input_shapes if input_shapes is not None else []
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0
        self.is_user_annotation = False
        self.device_time_total = self.self_device_time_total = 0.0

    def add(self, other):
        self.count += other.count
        self.cpu_time_total += other.cpu_time_total
        self.self_cpu_time_total += other.self_cpu_time_total
        self.is_user_annotation = other.is_user_annotation
        return self

    @property
    def cpu_time(self):
        return self.cpu_time_total / self.count if self.count else 0.0

    cpu_time_str = property(lambda self: _time_str(self.cpu_time))
    cpu_time_total_str = property(lambda self: _time_str(self.cpu_time_total))
    self_cpu_time_total_str = property(lambda self: _time_str(self.self_cpu_time_total))

    def __repr__(self):
        return (f"<FunctionEventAvg key={self.key} self_cpu_time={self.self_cpu_time_total_str}"
                f" cpu_time={self.cpu_time_str} count={self.count}>")


class EventList(list):
    """A list of events (FunctionEvent or FunctionEventAvg) with torch's summaries."""

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0):
        """One FunctionEventAvg per name (per name and input shapes with
        group_by_input_shape), in the order each first ran."""
        groups = {}
        for event in self:
            shapes = event.input_shapes if group_by_input_shape else None
            key = (event.key, str(shapes) if group_by_input_shape else None)
            if key not in groups:
                groups[key] = FunctionEventAvg(event.key, shapes)
            groups[key].add(event)
        averages = EventList(groups.values())
        averages.by_input_shape = group_by_input_shape
        return averages

    def total_average(self):
        total = FunctionEventAvg("Total")
        for event in self:
            total.add(event)
        return total

    @property
    def self_cpu_time_total(self):
        return sum(e.self_cpu_time_total for e in self)

    def table(self, sort_by=None, row_limit=100, max_name_column_width=55, header=None,
              top_level_events_only=False, **_ignored):
        """torch's text table: name, self CPU time and share, total CPU time and share,
        average, calls (and input shapes where grouped by them), sorted by `sort_by` (an
        attribute: 'cpu_time_total', 'self_cpu_time_total', 'count', ...), descending."""
        rows = list(self)
        if top_level_events_only:
            rows = [e for e in rows if getattr(e, "cpu_parent", None) is None]
        if sort_by is not None:
            rows.sort(key=lambda e: getattr(e, sort_by.replace("cuda", "device")), reverse=True)
        if row_limit is not None and row_limit > 0:
            rows = rows[:row_limit]
        total = self.self_cpu_time_total or 1.0
        shapes = getattr(self, "by_input_shape", False)
        names = [e.key if len(e.key) <= max_name_column_width else
                 e.key[:max_name_column_width - 3] + "..." for e in rows]
        name_w = max([len("Name")] + [len(n) for n in names]) + 4
        heads = ["Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg",
                 "# of Calls"] + (["Input Shapes"] if shapes else [])
        widths = [name_w] + [12] * 6 + ([28] if shapes else [])
        line = "".join("-" * w + "  " for w in widths)
        out = [header] if header else []
        out += [line, "".join(h.rjust(w) + "  " for h, w in zip(["Name"] + heads, widths)), line]
        for name, e in zip(names, rows):
            avg = e.cpu_time_total / e.count if e.count else 0.0
            cells = [name, f"{100 * e.self_cpu_time_total / total:.2f}%",
                     _time_str(e.self_cpu_time_total),
                     f"{100 * e.cpu_time_total / total:.2f}%", _time_str(e.cpu_time_total),
                     _time_str(avg), str(e.count)]
            if shapes:
                cells.append(str(e.input_shapes))
            out.append("".join(c.rjust(w) + "  " for c, w in zip(cells, widths)))
        out += [line, f"Self CPU time total: {_time_str(self.self_cpu_time_total)}", ""]
        return "\n".join(out)

    def export_chrome_trace(self, path):
        """The events as a Chrome trace (chrome://tracing, Perfetto): one complete event
        each, times in microseconds."""
        pid = os.getpid()
        trace = [{"name": e.name, "ph": "X", "ts": e.time_range_start,
                  "dur": e.cpu_time_total, "pid": pid, "tid": e.thread,
                  "cat": "user_annotation" if e.is_user_annotation else "cpu_op",
                  "args": {"Input Dims": e.input_shapes} if e.input_shapes else {}}
                 for e in self if isinstance(e, FunctionEvent)]
        with open(path, "w") as f:
            json.dump({"traceEvents": trace, "displayTimeUnit": "ms"}, f)

    def __str__(self):
        return self.table()


def flatten(events, origin):
    """The recorded events (trees) as FunctionEvents, parents before their children."""
    out = EventList()
    stack = [(e, None) for e in reversed(events)]
    while stack:
        event, parent = stack.pop()
        fe = FunctionEvent(event, parent, origin)
        if parent is not None:
            parent.cpu_children.append(fe)
        out.append(fe)
        stack.extend((c, fe) for c in reversed(event.children))
    return out
