"""Code written for torch runs with only the import changed: one script, run on both."""
import numpy as np
import pytest

SCRIPT = '''
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.manual_seed(0)
rng = np.random.default_rng(0)
X = torch.tensor(rng.standard_normal((256, 20)), dtype=torch.float32, device=device)
y = (X[:, 0] + 0.5 * X[:, 1] > 0).long()
loader = DataLoader(TensorDataset(X, y), batch_size=32, shuffle=True)
model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 2))
model = model.to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=5, gamma=0.5)
for epoch in range(8):
    model.train()
    for xb, yb in loader:
        xb, yb = xb.to(device), yb.to(device)
        opt.zero_grad()
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        opt.step()
    sched.step()
model.eval()
with torch.no_grad():
    accuracy = (model(X).argmax(dim=1) == y).float().mean().item()
torch.save({"model": model.state_dict(), "epoch": 8}, checkpoint)
state = torch.load(checkpoint)
model.load_state_dict(state["model"])
summary = (X.size(0), tuple(X.shape), X.dtype == torch.float32, state["epoch"],
           round(sched.get_last_lr()[0], 6), len(list(model.parameters())))
'''


@pytest.mark.parametrize("framework", ["torch", "flowgrad"])
def test_torch_training_script_runs_with_the_import_changed(framework, tmp_path):
    source = SCRIPT
    if framework == "flowgrad":
        source = source.replace("import torch\n", "import flowgrad as torch\n")
        source = source.replace("import torch.nn as nn", "import flowgrad.nn as nn")
        source = source.replace("import torch.nn.functional as F",
                                "import flowgrad.nn.functional as F")
        source = source.replace("from torch.utils.data", "from flowgrad.utils.data")
    namespace = {"checkpoint": str(tmp_path / "ckpt")}
    exec(compile(source, f"<{framework} script>", "exec"), namespace)
    assert namespace["accuracy"] > 0.9
    assert namespace["summary"] == (256, (256, 20), True, 8, 0.05, 4)
    assert np.isfinite(namespace["loss"].item())


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64"])
def test_finfo_matches_torch(name):
    import torch

    import flowgrad as flow

    ours, theirs = flow.finfo(getattr(flow, name)), torch.finfo(getattr(torch, name))
    for field in ("bits", "eps", "max", "min", "tiny", "resolution"):
        assert getattr(ours, field) == getattr(theirs, field), field


@pytest.mark.parametrize("name", ["uint8", "int8", "int16", "int32", "int64"])
def test_iinfo_matches_torch(name):
    import torch

    import flowgrad as flow

    ours, theirs = flow.iinfo(getattr(flow, name)), torch.iinfo(getattr(torch, name))
    assert (ours.bits, ours.min, ours.max) == (theirs.bits, theirs.min, theirs.max)


def test_finfo_of_an_integer_dtype_raises():
    import flowgrad as flow

    with pytest.raises(TypeError, match="not a floating point dtype"):
        flow.finfo(flow.int32)
