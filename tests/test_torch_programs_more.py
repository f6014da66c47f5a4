"""Still more real-world PyTorch programs run unchanged with `torch` mapped to flowgrad (the
shim and runner of test_torch_programs.py), each giving torch's losses and logged figures
step for step: a soft actor-critic update (tanh-squashed Normal, twin target networks, Polyak
averaging in place, a learned temperature), a Fourier neural operator (complex weights, rfft,
einsum), listwise ranking (argsort, gather, logcumsumexp, topk, searchsorted), CTC on a conv +
bidirectional GRU, metric learning (triplet with swap, cosine embedding, margin ranking,
cdist), a Gaussian process fit (cholesky, cholesky_solve, logdet), a top-2 mixture of experts
(where, index_add_, bincount), a tabular net fed by a DataLoader with a chained scheduler, a
neural ODE by RK4 with Rprop, and model surgery (frozen layers, parameter groups added
mid-run, parameters_to_vector, a non-strict state_dict load)."""
import numpy as np
import pytest
from test_torch_programs import _run

SAC_UPDATE = '''
class Actor(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(3, 16), nn.ReLU())
        self.mu, self.log_std = nn.Linear(16, 2), nn.Linear(16, 2)

    def forward(self, s, eps):
        h = self.body(s)
        mu, log_std = self.mu(h), self.log_std(h).clamp(-5, 2)
        std = log_std.exp()
        dist = torch.distributions.Normal(mu, std)
        raw = mu + std * eps
        action = torch.tanh(raw)
        logp = dist.log_prob(raw).sum(-1) - torch.log(1 - action.pow(2) + 1e-6).sum(-1)
        return action, logp

def q_net(seed):
    return init(nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 1)), seed=seed)

actor = init(Actor(), seed=40)
q1, q2 = q_net(41), q_net(42)
q1_t, q2_t = q_net(43), q_net(44)
q1_t.load_state_dict(q1.state_dict()); q2_t.load_state_dict(q2.state_dict())
q_opt = torch.optim.Adam(list(q1.parameters()) + list(q2.parameters()), lr=3e-3)
pi_opt = torch.optim.Adam(actor.parameters(), lr=3e-3)
log_alpha = torch.zeros(1, requires_grad=True)
a_opt = torch.optim.Adam([log_alpha], lr=1e-2)
rng = np.random.default_rng(45)
for _ in range(5):
    s, s2 = torch.tensor(rng.standard_normal((16, 3))), torch.tensor(rng.standard_normal((16, 3)))
    a = torch.tensor(rng.uniform(-1, 1, (16, 2)))
    r, done = torch.tensor(rng.standard_normal(16)), torch.tensor((rng.random(16) < 0.1) * 1.0)
    alpha = log_alpha.exp().detach()
    with torch.no_grad():
        a2, logp2 = actor(s2, torch.tensor(rng.standard_normal((16, 2))))
        sa2 = torch.cat([s2, a2], -1)
        soft_q = torch.min(q1_t(sa2), q2_t(sa2)).squeeze(-1) - alpha * logp2
        target = r + 0.99 * (1 - done) * soft_q
    sa = torch.cat([s, a], -1)
    q_loss = F.mse_loss(q1(sa).squeeze(-1), target) + F.mse_loss(q2(sa).squeeze(-1), target)
    q_opt.zero_grad(); q_loss.backward(); q_opt.step()
    new_a, logp = actor(s, torch.tensor(rng.standard_normal((16, 2))))
    sa_new = torch.cat([s, new_a], -1)
    pi_loss = (alpha * logp - torch.min(q1(sa_new), q2(sa_new)).squeeze(-1)).mean()
    pi_opt.zero_grad(); pi_loss.backward(); pi_opt.step()
    alpha_loss = -(log_alpha * (logp.detach() - 2.0)).mean()
    a_opt.zero_grad(); alpha_loss.backward(); a_opt.step()
    with torch.no_grad():
        for net, targ in ((q1, q1_t), (q2, q2_t)):
            for p, pt in zip(net.parameters(), targ.parameters()):
                pt.mul_(0.95).add_(0.05 * p)
    losses += [q_loss.item(), pi_loss.item(), log_alpha.item()]
'''

FNO = '''
class SpectralConv1d(nn.Module):
    def __init__(self, cin, cout, modes):
        super().__init__()
        self.modes = modes
        self.weight = nn.Parameter(torch.zeros(cin, cout, modes, dtype=torch.cdouble))

    def forward(self, x):
        xf = torch.fft.rfft(x)
        out = torch.zeros(x.size(0), self.weight.size(1), xf.size(-1), dtype=torch.cdouble)
        out[:, :, :self.modes] = torch.einsum("bix,iox->box", xf[:, :, :self.modes], self.weight)
        return torch.fft.irfft(out, n=x.size(-1))

class FNO(nn.Module):
    def __init__(self):
        super().__init__()
        self.lift = nn.Conv1d(1, 4, 1)
        self.spec = SpectralConv1d(4, 4, 5)
        self.skip = nn.Conv1d(4, 4, 1)
        self.proj = nn.Conv1d(4, 1, 1)

    def forward(self, x):
        h = self.lift(x)
        h = F.gelu(self.spec(h) + self.skip(h))
        return self.proj(h)

model = FNO()
init(model, scale=0.3)
with torch.no_grad():
    w = np.random.default_rng(46).standard_normal((2, 4, 4, 5)) * 0.2
    model.spec.weight.copy_(torch.complex(torch.tensor(w[0]), torch.tensor(w[1])))
grid = np.linspace(0, 2 * np.pi, 16, endpoint=False)
rng = np.random.default_rng(47)
u = torch.tensor(np.sin(grid[None, None] * rng.integers(1, 4, (6, 1, 1)))
                 * rng.uniform(0.5, 1.5, (6, 1, 1)))
target = torch.roll(u, 2, dims=-1) * 0.5
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for _ in range(6):
    loss = F.mse_loss(model(u), target)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), model.spec.weight.grad.abs().sum().item()]
'''

LISTWISE = '''
# (no bias in the last layer: listMLE is blind to a shift of every score, so its gradient is
# rounding noise, which Adagrad would scale up to a step)
scorer = init(nn.Sequential(nn.Linear(4, 12), nn.Tanh(), nn.Linear(12, 1, bias=False)))
opt = torch.optim.Adagrad(scorer.parameters(), lr=0.1, lr_decay=0.01)
rng = np.random.default_rng(48)
feats = torch.tensor(rng.standard_normal((5, 6, 4)))
relevance = torch.tensor(rng.integers(0, 4, (5, 6))).to(feats.dtype)
for _ in range(6):
    scores = scorer(feats).squeeze(-1)
    order = relevance.argsort(dim=1, descending=True, stable=True)
    s = scores.gather(1, order)
    listmle = (torch.logcumsumexp(s.flip(1), 1).flip(1) - s).sum(1).mean()
    top = scores.topk(3, dim=1)
    gains = (2 ** relevance.gather(1, top.indices) - 1) / torch.log2(torch.arange(2, 5.0))
    ranks = torch.searchsorted(torch.tensor([0.5, 1.5, 2.5]), relevance)
    loss = listmle + 0.01 * ranks.to(scores.dtype).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), gains.sum().item(), top.values.sum().item()]
'''

CTC = '''
class Acoustic(nn.Module):
    def __init__(self, classes=5):
        super().__init__()
        self.conv = nn.Conv1d(3, 8, 3, padding=1)
        self.rnn = nn.GRU(8, 6, bidirectional=True, batch_first=True)
        self.out = nn.Linear(12, classes)

    def forward(self, x):
        h = F.relu(self.conv(x.transpose(1, 2))).transpose(1, 2)
        h, _ = self.rnn(h)
        return self.out(h).log_softmax(-1).transpose(0, 1)  # (T, N, C)

rng = np.random.default_rng(49)
x = torch.tensor(rng.standard_normal((3, 12, 3)))
targets = torch.tensor(rng.integers(1, 5, (3, 4)))
input_lengths = torch.tensor([12, 10, 9])
target_lengths = torch.tensor([4, 3, 2])
model = init(Acoustic(), scale=0.3)
ctc = nn.CTCLoss(blank=0, zero_infinity=True)
opt = torch.optim.Adadelta(model.parameters(), lr=1.0)
for _ in range(6):
    loss = ctc(model(x), targets, input_lengths, target_lengths)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
'''

METRIC = '''
embed = init(nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 4)), seed=50)
opt = torch.optim.SGD(embed.parameters(), lr=0.05, momentum=0.5, dampening=0.1)
rng = np.random.default_rng(51)
triplet = nn.TripletMarginLoss(margin=0.5, p=2, swap=True)
cosine = nn.CosineEmbeddingLoss(margin=0.2)
ranking = nn.MarginRankingLoss(margin=0.1)
for _ in range(6):
    a, p, n = (torch.tensor(rng.standard_normal((8, 6))) for _ in range(3))
    ea, ep, en = embed(a), embed(p + a * 0.5), embed(n)
    flags = torch.tensor(rng.choice([-1.0, 1.0], 8))
    d_pos, d_neg = F.pairwise_distance(ea, ep), F.pairwise_distance(ea, en)
    loss = triplet(ea, ep, en) + cosine(ea, en, flags) + ranking(d_neg, d_pos, torch.ones(8))
    dist = torch.cdist(ea, en)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), dist.min().item(), F.cosine_similarity(ea, ep).mean().item()]
'''

GP = '''
import math
rng = np.random.default_rng(52)
X = torch.tensor(np.sort(rng.uniform(-3, 3, 20))[:, None])
y = torch.sin(X[:, 0]) + torch.tensor(rng.standard_normal(20)) * 0.1
raw = nn.ParameterDict({"length": nn.Parameter(torch.tensor(0.0)),
                        "scale": nn.Parameter(torch.tensor(0.0)),
                        "noise": nn.Parameter(torch.tensor(-2.0))})
opt = torch.optim.Adam(raw.parameters(), lr=0.1)
for _ in range(6):
    length, scale, noise = (F.softplus(raw[k]) for k in ("length", "scale", "noise"))
    K = scale * torch.exp(-0.5 * torch.cdist(X, X).pow(2) / length ** 2)
    K = K + (noise + 1e-4) * torch.eye(20)
    L = torch.linalg.cholesky(K)
    alpha = torch.cholesky_solve(y[:, None], L)
    nll = 0.5 * (y[:, None] * alpha).sum() + torch.log(torch.diagonal(L)).sum() \\
        + 10 * math.log(2 * math.pi)
    opt.zero_grad()
    nll.backward()
    opt.step()
    losses += [nll.item(), torch.logdet(K).item()]
'''

MOE = '''
class MoE(nn.Module):
    def __init__(self, d=6, experts=4, k=2):
        super().__init__()
        self.gate = nn.Linear(d, experts, bias=False)
        self.experts = nn.ModuleList([nn.Sequential(nn.Linear(d, 8), nn.SiLU(), nn.Linear(8, d))
                                      for _ in range(experts)])
        self.k = k

    def forward(self, x):
        logits = self.gate(x)
        weights, chosen = logits.topk(self.k, dim=-1)
        weights = weights.softmax(-1)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            rows, slot = torch.where(chosen == e)
            if rows.numel():
                out.index_add_(0, rows, weights[rows, slot, None] * expert(x[rows]))
        counts = torch.bincount(chosen.flatten(), minlength=len(self.experts)).to(x.dtype)
        importance = logits.softmax(-1).mean(0)
        balance = len(self.experts) * (importance * counts / counts.sum()).sum()
        return out, balance

rng = np.random.default_rng(53)
x = torch.tensor(rng.standard_normal((12, 6)))
y = torch.tensor(rng.standard_normal((12, 6)))
model = init(MoE(), scale=0.4)
opt = torch.optim.AdamW(model.parameters(), lr=1e-2, amsgrad=True)
for _ in range(6):
    out, balance = model(x)
    loss = F.mse_loss(out + x, y) + 0.01 * balance
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), balance.item()]
'''

TABULAR = '''
class Tabular(nn.Module):
    def __init__(self):
        super().__init__()
        self.cats = nn.ModuleList([nn.Embedding(5, 3), nn.Embedding(7, 2)])
        self.net = nn.Sequential(nn.Linear(3 + 2 + 4, 16), nn.BatchNorm1d(16), nn.ReLU(),
                                 nn.Dropout(0.0), nn.Linear(16, 1), nn.Sigmoid())

    def forward(self, cat, num):
        emb = [m(cat[:, i]) for i, m in enumerate(self.cats)]
        return self.net(torch.cat(emb + [num], 1)).squeeze(1)

rng = np.random.default_rng(54)
cat = torch.tensor(np.stack([rng.integers(0, 5, 32), rng.integers(0, 7, 32)], 1))
num = torch.tensor(rng.standard_normal((32, 4)))
label = ((num[:, 0] + (cat[:, 0] > 2).to(num.dtype)) > 0.5).to(num.dtype)
dataset = torch.utils.data.TensorDataset(cat, num, label)
loader = torch.utils.data.DataLoader(dataset, batch_size=10, shuffle=False, drop_last=True)
model = init(Tabular(), scale=0.4)
opt = torch.optim.RAdam(model.parameters(), lr=1e-2, decoupled_weight_decay=True,
                        weight_decay=1e-2)
sched = torch.optim.lr_scheduler.ChainedScheduler([
    torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5),
    torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)])
for epoch in range(2):
    model.train()
    for c, n, t in loader:
        loss = F.binary_cross_entropy(model(c, n), t)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    sched.step()
    losses.append(sched.get_last_lr()[0])
model.eval()
with torch.no_grad():
    losses.append(F.binary_cross_entropy(model(cat, num), label).item())
'''

NEURAL_ODE = '''
import math
field = init(nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 2)), scale=0.4)

def rk4(f, y, t0, t1, steps):
    h = (t1 - t0) / steps
    for _ in range(steps):
        k1 = f(y)
        k2 = f(y + 0.5 * h * k1)
        k3 = f(y + 0.5 * h * k2)
        k4 = f(y + h * k3)
        y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return y

rng = np.random.default_rng(55)
y0 = torch.tensor(rng.standard_normal((10, 2)))
theta = 0.8
rot = torch.tensor([[math.cos(theta), -math.sin(theta)], [math.sin(theta), math.cos(theta)]])
y1 = y0 @ rot.T
opt = torch.optim.Rprop(field.parameters(), lr=0.01, etas=(0.5, 1.2), step_sizes=(1e-6, 1))
for _ in range(6):
    loss = F.l1_loss(rk4(field, y0, 0.0, 1.0, 4), y1)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
'''

SURGERY = '''
import io

class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 8))
        self.register_buffer("calls", torch.zeros(()), persistent=False)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        self.calls += 1
        return self.head(F.relu(self.features(x)))

model = init(Backbone())
model.features[0].requires_grad_(False)
decay = [p for n, p in model.named_parameters() if p.requires_grad and n.endswith("weight")]
no_decay = [p for n, p in model.named_parameters() if p.requires_grad and n.endswith("bias")]
opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay}], lr=1e-2)
rng = np.random.default_rng(56)
x = torch.tensor(rng.standard_normal((12, 5)))
y = torch.tensor(rng.integers(0, 3, 12))
for step in range(6):
    loss = F.cross_entropy(model(x), y, reduction="none").mul(torch.linspace(0.5, 1.5, 12)).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step == 2:
        model.features[0].requires_grad_(True)
        opt.add_param_group({"params": list(model.features[0].parameters()), "lr": 1e-3})
vec = torch.nn.utils.parameters_to_vector(model.parameters())
torch.nn.utils.vector_to_parameters(vec * 0.5, model.parameters())
buf = io.BytesIO()
torch.save(model.state_dict(), buf)
buf.seek(0)
fresh = Backbone()
result = fresh.load_state_dict({k.replace("head", "classifier"): v
                                for k, v in torch.load(buf).items()}, strict=False)
losses += [len(result.missing_keys), len(result.unexpected_keys), model.calls.item(),
           vec.sum().item(), F.cross_entropy(model(x), y).item(), len(model.state_dict())]
'''


PROGRAMS = {name.lower(): source for name, source in [
    ("SAC_UPDATE", SAC_UPDATE),
    ("FNO", FNO),
    ("LISTWISE", LISTWISE),
    ("CTC", CTC),
    ("METRIC", METRIC),
    ("GP", GP),
    ("MOE", MOE),
    ("TABULAR", TABULAR),
    ("NEURAL_ODE", NEURAL_ODE),
    ("SURGERY", SURGERY),
]}


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_program_matches_torch(name):
    theirs = _run(PROGRAMS[name], shim=False)
    ours = _run(PROGRAMS[name], shim=True)
    assert len(ours) == len(theirs) >= 5
    np.testing.assert_allclose(np.asarray(ours, float), np.asarray(theirs, float), rtol=1e-8,
                               atol=1e-10)
