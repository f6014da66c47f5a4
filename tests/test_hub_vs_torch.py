"""flowgrad.hub's checkpoint downloads against torch.hub's, over file:// URLs: the same
objects, cache paths, hash checks and raise/no-raise; hub code is never run."""
import hashlib
import zipfile

import numpy as np
import pytest
import torch

import flowgrad as flow


@pytest.fixture
def served(tmp_path):
    """A torch checkpoint (a state dict) and its file:// URL, with the sha256 prefix in its
    name, as published checkpoints are named."""
    state = {"w": torch.arange(6.0).reshape(2, 3), "b": torch.ones(2, dtype=torch.float64)}
    raw = tmp_path / "raw.pth"
    torch.save(state, raw)
    digest = hashlib.sha256(raw.read_bytes()).hexdigest()
    path = tmp_path / f"net-{digest[:8]}.pth"
    raw.rename(path)
    return path, state


def _same(ours, theirs):
    assert sorted(ours) == sorted(theirs)
    for k in theirs:
        np.testing.assert_array_equal(ours[k].numpy(), theirs[k].numpy())
        assert str(ours[k].dtype).split(".")[-1] == str(theirs[k].dtype).split(".")[-1]


def test_load_state_dict_from_url_as_torch(served, tmp_path):
    path, state = served
    for check_hash in (False, True):
        ours = flow.hub.load_state_dict_from_url(path.as_uri(), str(tmp_path / f"f{check_hash}"),
                                                 check_hash=check_hash)
        theirs = torch.hub.load_state_dict_from_url(path.as_uri(),
                                                    str(tmp_path / f"t{check_hash}"),
                                                    check_hash=check_hash)
        _same(ours, theirs)
        assert (tmp_path / f"f{check_hash}" / path.name).read_bytes() == path.read_bytes()
    model = flow.nn.Linear(3, 2)
    model.weight.data, model.bias.data = flow.zeros(2, 3), flow.zeros(2)
    model.load_state_dict({"weight": ours["w"], "bias": ours["b"].float()})
    assert model.weight.tolist() == state["w"].tolist()


def test_a_wrong_hash_raises_and_leaves_nothing(tmp_path, served):
    path, _ = served
    bad = tmp_path / "net-0123abcd.pth"
    bad.write_bytes(path.read_bytes())
    for lib, where in ((flow, "f"), (torch, "t")):
        with pytest.raises(RuntimeError, match="invalid hash value"):
            lib.hub.load_state_dict_from_url(bad.as_uri(), str(tmp_path / where),
                                             check_hash=True)
        assert list((tmp_path / where).iterdir()) == []


def test_the_cache_is_torchs_and_read_without_downloading(served, tmp_path, monkeypatch):
    path, state = served
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "home"))
    assert flow.hub.get_dir() == torch.hub.get_dir() == str(tmp_path / "home" / "hub")
    torch.hub.load_state_dict_from_url(path.as_uri(), file_name="kept.pth")
    path.unlink()  # the second reader finds torch's cached copy
    ours = flow.utils.model_zoo.load_url(path.as_uri(), file_name="kept.pth")
    _same(ours, state)
    monkeypatch.setattr(flow.hub, "_hub_dir", [None])  # (set_dir's choice, undone after)
    flow.hub.set_dir(str(tmp_path / "elsewhere"))
    assert flow.hub.get_dir() == str(tmp_path / "elsewhere")


def test_a_legacy_zip_download(served, tmp_path):
    path, state = served
    archive = tmp_path / "old.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.write(path, arcname="old.pth")
    _same(flow.hub.load_state_dict_from_url(archive.as_uri(), str(tmp_path / "f")), state)
    _same(torch.hub.load_state_dict_from_url(archive.as_uri(), str(tmp_path / "t")), state)


def test_hub_code_is_never_run():
    for name in ("load", "list", "help"):
        with pytest.raises(NotImplementedError, match="does not run hub code"):
            getattr(flow.hub, name)("pytorch/vision")
