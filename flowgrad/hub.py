"""`flow.hub`: not available. torch.hub downloads a repository and runs its hubconf.py,
and flowgrad never runs code from downloaded files; every function raises, saying what to do.

>>> import flowgrad as flow
>>> flow.hub.load("pytorch/vision", "resnet18")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
NotImplementedError: flowgrad.hub.load is not available: ...
"""

_WHY = ("is not available: flowgrad does not download or run hub code. Build the model in "
        "Python, download its weights yourself and load them with "
        "model.load_state_dict(flowgrad.load(path)) (flowgrad reads torch's .pt/.pth files)")


def _absent(name):
    def absent(*args, **kwargs):
        raise NotImplementedError(f"flowgrad.hub.{name} {_WHY}")
    absent.__name__ = name
    absent.__doc__ = f"Raises NotImplementedError: flowgrad.hub.{name} {_WHY}."
    return absent


load = _absent("load")
list = _absent("list")  # noqa: A001 - torch's name
help = _absent("help")  # noqa: A001 - torch's name
load_state_dict_from_url = _absent("load_state_dict_from_url")
download_url_to_file = _absent("download_url_to_file")
get_dir = _absent("get_dir")
set_dir = _absent("set_dir")
