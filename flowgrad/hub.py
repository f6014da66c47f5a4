"""`flow.hub`: downloading checkpoints, as torch.hub does, without running hub code.

`load_state_dict_from_url` (and `utils.model_zoo.load_url`) download a checkpoint once into
the hub cache, torch's own (`$TORCH_HOME/hub/checkpoints`, by default
`~/.cache/torch/hub/checkpoints`: files torch downloaded are reused), check the sha256 prefix a
file name carries (`name-<hash>.pth`) when asked, and read it with `flowgrad.load`, which never
runs code from a file. `hub.load`, `hub.list` and `hub.help` download a repository and run its
hubconf.py: they are not available and raise, saying what to do.

>>> import flowgrad as flow
>>> flow.hub.load("pytorch/vision", "resnet18")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
NotImplementedError: flowgrad.hub.load is not available: ...
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
import tempfile
import urllib.request
import zipfile
from urllib.parse import urlparse

from .serialization import load as _load

__all__ = ["load", "list", "help", "load_state_dict_from_url", "download_url_to_file",
           "get_dir", "set_dir"]

_WHY = ("is not available: flowgrad does not run hub code (a repository's hubconf.py). "
        "Build the model in Python and load its weights with "
        "model.load_state_dict(flowgrad.hub.load_state_dict_from_url(url))")
# a hash prefix in a file name: resnet18-f37072fd.pth
HASH_REGEX = re.compile(r"-([a-f0-9]*)\.")
_hub_dir = [None]


def _absent(name):
    def absent(*args, **kwargs):
        raise NotImplementedError(f"flowgrad.hub.{name} {_WHY}")
    absent.__name__ = name
    absent.__doc__ = f"Raises NotImplementedError: flowgrad.hub.{name} {_WHY}."
    return absent


load = _absent("load")
list = _absent("list")  # noqa: A001 - torch's name
help = _absent("help")  # noqa: A001 - torch's name


def get_dir():
    """The hub cache directory: the one `set_dir` gave, else `$TORCH_HOME/hub` (torch's:
    `$TORCH_HOME` defaults to `$XDG_CACHE_HOME/torch`, that to `~/.cache/torch`).

    >>> get_dir().endswith("hub")
    True
    """
    if _hub_dir[0] is not None:
        return _hub_dir[0]
    home = os.getenv("TORCH_HOME", os.path.join(os.getenv("XDG_CACHE_HOME", "~/.cache"),
                                                "torch"))
    return os.path.join(os.path.expanduser(home), "hub")


def set_dir(d):
    """Make `d` the hub cache directory (see `get_dir`)."""
    _hub_dir[0] = os.path.expanduser(d)


def download_url_to_file(url, dst, hash_prefix=None, progress=True):
    """Download `url` (http(s), ftp or file) to the path `dst`, through a temporary file
    beside it, so `dst` appears only complete; with `hash_prefix`, the file's sha256 must
    start with it (RuntimeError otherwise, nothing left behind). `progress` is accepted for
    torch's signature (flowgrad prints none).

    >>> import pathlib, tempfile
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> (d / "a.bin").write_bytes(b"abc")
    3
    >>> download_url_to_file((d / "a.bin").as_uri(), str(d / "b.bin"), hash_prefix="ba7816bf")
    >>> (d / "b.bin").read_bytes()
    b'abc'
    """
    dst = os.path.expanduser(dst)
    folder = os.path.dirname(os.path.abspath(dst))
    digest = hashlib.sha256()
    with tempfile.NamedTemporaryFile(delete=False, dir=folder, prefix=".download-") as f:
        try:
            with urllib.request.urlopen(url) as response:  # noqa: S310 - the user's URL
                while chunk := response.read(1 << 16):
                    f.write(chunk)
                    digest.update(chunk)
            f.close()
            if hash_prefix is not None and not digest.hexdigest().startswith(hash_prefix):
                raise RuntimeError(f'invalid hash value (expected "{hash_prefix}", got '
                                   f'"{digest.hexdigest()}")')
            shutil.move(f.name, dst)
        finally:
            f.close()
            if os.path.exists(f.name):
                os.remove(f.name)


def _legacy_zip(path):
    """A zip holding one checkpoint file (torch's old download format), not a torch.save zip."""
    if not zipfile.is_zipfile(path):
        return False
    with zipfile.ZipFile(path) as z:
        entries = z.infolist()
    return len(entries) == 1 and not entries[0].is_dir()


def load_state_dict_from_url(url, model_dir=None, map_location=None, progress=True,
                             check_hash=False, file_name=None, weights_only=False):
    """The object saved at `url` (a checkpoint: torch.save's formats or flowgrad's), read by
    `flowgrad.load` from the hub cache, downloaded there first if it is not there yet.

    `model_dir` is the cache folder (default `get_dir()/checkpoints`), `file_name` the name
    kept there (default the URL's); with `check_hash` the file's sha256 must start with the
    hex digits after the name's last '-' (`resnet18-f37072fd.pth`). Nothing in the file is
    run: `weights_only=False` rebuilds flowgrad's classes and the user's own, never a
    function (see `flowgrad.load`).

    >>> import pathlib, tempfile, flowgrad as flow
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> flow.save({"w": flow.ones(2)}, d / "weights.pt")
    >>> flow.hub.load_state_dict_from_url((d / "weights.pt").as_uri(), model_dir=str(d / "c"))
    {'w': tensor([1., 1.])}
    """
    if model_dir is None:
        model_dir = os.path.join(get_dir(), "checkpoints")
    os.makedirs(model_dir, exist_ok=True)
    filename = file_name if file_name is not None else os.path.basename(urlparse(url).path)
    cached = os.path.join(model_dir, filename)
    if not os.path.exists(cached):
        sys.stderr.write(f'Downloading: "{url}" to {cached}\n')
        found = HASH_REGEX.search(filename) if check_hash else None
        download_url_to_file(url, cached, found.group(1) if found else None, progress)
    if _legacy_zip(cached):
        with zipfile.ZipFile(cached) as z:
            entry = z.infolist()[0]
            name = os.path.basename(entry.filename)
            if not name or name.startswith("."):
                raise RuntimeError(f"flowgrad.hub: the zip {cached} holds {entry.filename!r}, "
                                   f"not a checkpoint file name")
            cached = os.path.join(model_dir, name)  # (its base name only: never elsewhere)
            with z.open(entry) as src, open(cached, "wb") as out:
                shutil.copyfileobj(src, out)
    return _load(cached, map_location=map_location, weights_only=weights_only)
