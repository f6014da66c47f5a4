"""Doctest collection: a public wrapper that `errors.pickle_by_name` named into a namespace
(flowgrad.nansum, Tensor.add) carries the wrapped function's docstring, whose examples run
once in the module that defines the function; the copy found in the namespace's module is
skipped (it would run again, in that namespace's globals, where `float` is flowgrad's dtype)."""
import pathlib
import sys


def pytest_collection_modifyitems(config, items):
    from flowgrad.errors import RENAMED

    def copied(item):
        home = RENAMED.get(getattr(getattr(item, "dtest", None), "name", None))
        return home is not None and pathlib.Path(item.path) == pathlib.Path(
            sys.modules[home].__file__)

    items[:] = [item for item in items if not copied(item)]
