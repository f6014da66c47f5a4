"""Error messages that name the op, the shapes and dtypes, and what to do."""
from __future__ import annotations


def describe(x) -> str:
    """'Tensor(shape=(2, 3), dtype=float32)' for tensors, repr for anything else."""
    data = getattr(x, "_data", None)
    if data is not None:
        return f"Tensor(shape={tuple(data.shape)}, dtype={data.dtype})"
    return repr(x)


def saved_tensor_error(node, saved):
    """The RuntimeError for a saved tensor modified in place after it was saved for backward."""
    data = saved.tensor._data if saved.tensor is not None else saved.data
    what = "output" if saved.is_output else "input"
    return RuntimeError(
        f"one of the tensors needed for gradient computation has been modified by an "
        f"in-place operation: {what} Tensor(shape={tuple(data.shape)}, dtype={data.dtype}) "
        f"saved by {node.name} for backward was saved at version {saved.version} and is now "
        f"at version {saved.counter.value}. Use the out-of-place op (e.g. `x = x * 2` "
        f"instead of `x.mul_(2)`), or clone() the tensor before modifying it.")


def freed_graph_error(node):
    """The RuntimeError for a second backward through a graph whose saved tensors were freed."""
    return RuntimeError(
        f"Trying to backward through the graph a second time: {node.name} has already "
        f"freed its saved tensors. Pass retain_graph=True to the first backward() or "
        f"autograd.grad() if you need to backward through the graph again.")
