"""Issue 11's "done when": small real-world PyTorch programs run unchanged with `torch`
mapped to flowgrad (the shim of ../shared/bench/flowgrad_as_torch.py, done in-process by an
import hook) and give torch's losses step for step: a GPT trainer, a policy-gradient agent
with Categorical, a packed-sequence LSTM classifier, an LBFGS fit and a weight-normed conv
net. Weights and data come from NumPy, so both runs start from the same numbers."""
import builtins
import importlib

import numpy as np
import pytest

import flowgrad

PRELUDE = '''
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Categorical
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

torch.set_default_dtype(torch.float64)  # so the comparison sees bugs, not float32 rounding


def init(model, seed=0, scale=0.3):
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for _, p in model.named_parameters():
            p.copy_(torch.tensor(rng.standard_normal(tuple(p.shape)) * scale))
    return model

losses = []
'''

GPT = '''
class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.heads = heads

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / (k.size(-1) ** 0.5))
        mask = torch.tril(torch.ones(T, T)).view(1, 1, T, T)
        att = F.softmax(att.masked_fill(mask == 0, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.proj(y)
        return x + self.mlp(self.ln2(x))

class GPT(nn.Module):
    def __init__(self, vocab=17, d=16, heads=2, layers=2, block=8):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(block, d)
        self.blocks = nn.ModuleList([Block(d, heads) for _ in range(layers)])
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, idx, targets=None):
        x = self.tok(idx) + self.pos(torch.arange(idx.size(1)))
        for b in self.blocks:
            x = b(x)
        logits = self.head(self.ln(x))
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

model = init(GPT())
opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)
data = np.random.default_rng(1).integers(0, 17, (4, 9))
x, y = torch.tensor(data[:, :-1]), torch.tensor(data[:, 1:])
for _ in range(6):
    _, loss = model(x, y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    losses.append(loss.item())
'''

POLICY_GRADIENT = '''
policy = init(nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 3)))
opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
rng = np.random.default_rng(2)
for _ in range(6):
    states = torch.tensor(rng.standard_normal((32, 4)))
    dist = Categorical(logits=policy(states))
    assert tuple(dist.sample().shape) == (32,)
    # actions from NumPy uniforms through the probabilities: the same draw in both runs
    cdf = dist.probs.detach().cumsum(-1).numpy()
    actions = torch.tensor((rng.random((32, 1)) > cdf).sum(-1).clip(0, 2))
    rewards = (actions == (states[:, 0] > 0).long()).to(states.dtype)
    returns = (rewards - rewards.mean()) / (rewards.std() + 1e-8)
    loss = -(dist.log_prob(actions) * returns).mean() - 0.01 * dist.entropy().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
'''

PACKED_LSTM = '''
class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(11, 8, padding_idx=0)
        self.lstm = nn.LSTM(8, 12, num_layers=2, batch_first=True, bidirectional=True)
        self.out = nn.Linear(24 + 24, 3)

    def forward(self, x, lengths):
        packed = pack_padded_sequence(self.emb(x), lengths, batch_first=True,
                                      enforce_sorted=False)
        out, (h, c) = self.lstm(packed)
        padded, _ = pad_packed_sequence(out, batch_first=True)
        pooled = padded.sum(1) / lengths.unsqueeze(1).float()
        return self.out(torch.cat([pooled, h[-2], h[-1]], dim=1))

rng = np.random.default_rng(3)
lengths = torch.tensor([5, 2, 7, 3, 1, 6])
x = torch.tensor(rng.integers(1, 11, (6, 7)))
x = x * (torch.arange(7).unsqueeze(0) < lengths.unsqueeze(1)).long()
y = torch.tensor(rng.integers(0, 3, 6))
model = init(Classifier())
opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
for _ in range(6):
    loss = F.cross_entropy(model(x, lengths), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
'''

LBFGS_FIT = '''
rng = np.random.default_rng(4)
X = torch.tensor(rng.uniform(-2, 2, (64, 1)))
Y = torch.sin(2 * X) + 0.1 * X ** 2
model = init(nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 1)), scale=0.5)
opt = torch.optim.LBFGS(model.parameters(), lr=1, max_iter=10, history_size=8,
                        line_search_fn="strong_wolfe")

def closure():
    opt.zero_grad()
    loss = F.mse_loss(model(X), Y)
    loss.backward()
    return loss

for _ in range(4):
    losses.append(opt.step(closure).item())
losses.append(F.mse_loss(model(X), Y).item())
'''

WEIGHT_NORM_CONV = '''
from torch.nn.utils import weight_norm
from torch.nn.utils.parametrizations import weight_norm as weight_norm_p

model = nn.Sequential(
    weight_norm_p(nn.Conv2d(2, 6, 3, padding=1)), nn.ReLU(), nn.MaxPool2d(2),
    weight_norm(nn.Conv2d(6, 8, 3)), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
    weight_norm_p(nn.Linear(8, 4), dim=None))
init(model, scale=0.4)
rng = np.random.default_rng(5)
x = torch.tensor(rng.standard_normal((8, 2, 8, 8)))
y = torch.tensor(rng.integers(0, 4, 8))
opt = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
for _ in range(6):
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
'''

PROGRAMS = {"gpt": GPT, "policy_gradient": POLICY_GRADIENT, "packed_lstm": PACKED_LSTM,
            "lbfgs": LBFGS_FIT, "weight_norm_conv": WEIGHT_NORM_CONV}


def _as_flowgrad_import(name, globals=None, locals=None, fromlist=(), level=0):
    """`import torch...` resolves to flowgrad's module of the same dotted name."""
    if level == 0 and (name == "torch" or name.startswith("torch.")):
        module = importlib.import_module("flowgrad" + name[len("torch"):])
        return module if fromlist else flowgrad
    return builtins.__import__(name, globals, locals, fromlist, level)


def exec_program(source, shim, name):
    """The namespace of `source` run as module `name` with torch, or (`shim`) with `import
    torch...` resolving to flowgrad; the program's own exception propagates."""
    namespace = {"__name__": name}
    if shim:
        namespace["__builtins__"] = dict(vars(builtins), __import__=_as_flowgrad_import)
    exec(compile(source, f"<{name}>", "exec"), namespace)
    assert (namespace["torch"] is flowgrad) == shim
    return namespace


def _run(source, shim):
    try:
        namespace = exec_program(PRELUDE + source, shim, "__program__")
    finally:
        import torch

        torch.set_default_dtype(torch.float32)
        flowgrad.set_default_dtype(flowgrad.float32)
    return namespace["losses"]


def assert_matches_torch(source, trains=True):
    """Run the program `source` with torch and with flowgrad: the same figures logged, at
    least 5 of them; with `trains`, torch's last below its first (the program trains)."""
    theirs = _run(source, shim=False)
    ours = _run(source, shim=True)
    assert len(ours) == len(theirs) >= 5
    if trains:
        assert theirs[-1] < theirs[0]
    np.testing.assert_allclose(np.asarray(ours, float), np.asarray(theirs, float), rtol=1e-8,
                               atol=1e-10)


@pytest.mark.filterwarnings("ignore:.*is deprecated in favor of:FutureWarning")
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_program_losses_match_torch(name):
    assert_matches_torch(PROGRAMS[name])
