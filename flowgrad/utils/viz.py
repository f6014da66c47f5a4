"""Pictures of the backward graph: Graphviz DOT, SVG/PNG through `dot`, and a text report of
the memory the graph keeps for backward.

Each backward node is drawn with its op and the tensors it saved (shape, dtype, bytes); leaf
tensors are named by parameter name when `params=dict(model.named_parameters())` is given;
the tensor the graph was taken from is the root.

>>> import flowgrad as flow
>>> from flowgrad.utils import viz
>>> lin = flow.nn.Linear(3, 2)
>>> y = lin(flow.ones(4, 3)).relu().sum()
>>> dot = viz.make_dot(y, params=dict(lin.named_parameters()))
>>> dot.splitlines()[0], "weight (2, 3)" in dot, "relu_backward" in dot
('digraph backward {', True, True)
>>> print(viz.memory_report(y).splitlines()[-1])
total saved: 2 tensors, 80 B
"""
from __future__ import annotations

import shutil
import subprocess

from ..autograd.node import AccumulateGrad

__all__ = ["make_dot", "render", "memory_report", "saved_tensors"]


def _walk(root):
    """Every node reachable from `root`, consumers before producers (iterative DFS)."""
    seen, order, stack = {root}, [], [root]
    while stack:
        node = stack.pop()
        order.append(node)
        for nxt in node.next_nodes:
            if nxt is not None and nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return order


def saved_tensors(node):
    """(label, array or None, packed) for each tensor `node` keeps for backward; an array of
    None means the saved tensor was already freed (backward ran without retain_graph)."""
    ctx = node
    if getattr(ctx, "op", None) is None:  # an accumulate_grad node saves nothing
        return []
    out = []
    for label, group in (("input", ctx._inputs), ("output", ctx._outputs)):
        for i, saved in enumerate(group or ()):
            if saved is None:
                continue
            packed = getattr(saved, "packed", None) is not None or hasattr(saved, "unpack_hook")
            data = saved.tensor._data if saved.tensor is not None else saved.data
            out.append((f"{label} {i}", data, packed))
    for i, t in enumerate(ctx.aux or ()):
        out.append((f"aux {i}", t._data, False))
    return out


def _root_of(tensor):
    tensor._sync()
    if tensor._grad_fn is not None:
        return tensor._grad_fn
    if tensor.requires_grad:
        return tensor._meta.grad_accumulator(tensor)
    raise ValueError(f"viz: the tensor (shape {tuple(tensor.shape)}) has no backward graph; "
                     f"compute it from tensors with requires_grad=True")


def _fmt_bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def _escape(text):
    return text.replace("\\", "\\\\").replace('"', '\\"')


def make_dot(tensor, params=None, show_saved=True) -> str:
    """The backward graph of `tensor` as Graphviz DOT source (a str)."""
    names = {id(p._meta): name for name, p in (params or {}).items() if p._meta is not None}
    root = _root_of(tensor)
    ids = {}
    lines = ["digraph backward {",
             '  node [shape=box, style=filled, fillcolor=white, fontname="monospace", '
             'fontsize=10];',
             f'  out [label="{_escape("output " + str(tuple(tensor.shape)))}", '
             'fillcolor=darkolivegreen1];']
    nodes = _walk(root)
    shapes = _leaf_shapes(nodes)
    for node in nodes:
        key = ids[node] = f"n{len(ids)}"
        if type(node) is AccumulateGrad:
            name = names.get(id(node.variable_meta))
            shape = shapes.get(node, tuple(tensor.shape))
            label = f"{name} {shape}" if name else f"leaf {shape}"
            lines.append(f'  {key} [label="{_escape(label)}", fillcolor=lightblue];')
            continue
        rows = [str(node.name)]
        if show_saved:
            for label, data, packed in saved_tensors(node):
                if data is None:
                    rows.append(f"{label}: freed")
                elif packed:
                    rows.append(f"{label}: {tuple(data.shape)} {data.dtype} (packed by hooks)")
                else:
                    rows.append(f"{label}: {tuple(data.shape)} {data.dtype} "
                                f"{_fmt_bytes(data.nbytes)}")
        text = "\\l".join(_escape(r) for r in rows) + "\\l"
        lines.append(f'  {key} [label="{text}"];')
    lines.append(f"  out -> {ids[root]} [style=dashed];")
    for node, key in ids.items():
        for nxt in node.next_nodes:
            if nxt is not None:
                lines.append(f"  {key} -> {ids[nxt]};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _leaf_shapes(nodes):
    """The shape of each accumulate node's leaf, as its consumers recorded it."""
    shapes = {}
    for node in nodes:
        for nxt, info in zip(node.next_nodes, node.input_infos):
            if type(nxt) is AccumulateGrad:
                shapes[nxt] = tuple(info[0])
    return shapes


def render(tensor, path, format="svg", params=None) -> str:
    """Write the picture of `tensor`'s backward graph to `path` (svg, png, pdf) with the
    Graphviz `dot` program; returns the path. Raises RuntimeError when `dot` is missing.
    """
    dot = shutil.which("dot")
    if dot is None:
        raise RuntimeError("viz.render needs the Graphviz `dot` program (e.g. `apt-get "
                           "install graphviz`); make_dot(...) gives the DOT source without it")
    source = make_dot(tensor, params=params)
    subprocess.run([dot, f"-T{format}", "-o", str(path)], input=source.encode(), check=True)
    return str(path)


def memory_report(tensor) -> str:
    """A table of the bytes each backward node keeps for backward, and the total (a storage
    saved by several nodes counts once in the total)."""
    rows, seen, total, count = [], set(), 0, 0
    for node in _walk(_root_of(tensor)):
        if type(node) is AccumulateGrad:
            continue
        node_bytes = 0
        saved = saved_tensors(node)
        for _, data, packed in saved:
            if data is None or packed:
                continue
            node_bytes += data.nbytes
            if id(data) not in seen:  # an op's output saved again as the next op's input
                seen.add(id(data))
                total += data.nbytes
                count += 1
        rows.append((str(node.name), len(saved), node_bytes))
    width = max([len(r[0]) for r in rows] + [4])
    out = [f"{'node':<{width}} {'saved':>5} {'bytes':>10}"]
    out += [f"{name:<{width}} {n:>5} {_fmt_bytes(b):>10}" for name, n, b in rows]
    out.append(f"total saved: {count} tensors, {_fmt_bytes(total)}")
    return "\n".join(out)
