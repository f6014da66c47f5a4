"""Still more real-world PyTorch programs run unchanged with `torch` mapped to flowgrad (the
shim and runner of test_torch_programs.py), each giving torch's losses and logged figures
step for step: a soft actor-critic update (tanh-squashed Normal, twin target networks, Polyak
averaging in place, a learned temperature), a Fourier neural operator (complex weights, rfft,
einsum), listwise ranking (argsort, gather, logcumsumexp, topk, searchsorted), CTC on a conv +
bidirectional GRU, metric learning (triplet with swap, cosine embedding, margin ranking,
cdist), a Gaussian process fit (cholesky, cholesky_solve, logdet), a top-2 mixture of experts
(where, index_add_, bincount), a tabular net fed by a DataLoader with a chained scheduler, a
neural ODE by RK4 with Rprop, model surgery (frozen layers, parameter groups added mid-run,
parameters_to_vector, a non-strict state_dict load), a spatial transformer with super-
resolution (affine_grid, grid_sample, PixelShuffle, bicubic), nn.Transformer with masks,
RNN variants (relu RNN, LSTM with proj_size, GRU with h0), SVD/QR/eigh/lstsq/pinv losses, an
STFT spectral loss, parametrizations (symmetric, orthogonal, spectral_norm), mixup with
SequentialLR and an L1 clip, AdaptiveLogSoftmaxWithLoss, torch.compile'd training, Bayesian
fits (Beta, Dirichlet, Gamma, LogNormal, KL terms), unfold/fold patches with pixel
(un)shuffle, packed GRUs (pack/pad/unpack_sequence), and kNN with cdist/topk beside
slogdet, cholesky_inverse and solve_triangular."""
import functools

import pytest
from test_torch_programs import assert_matches_torch

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


STN_SR = '''
class STN(nn.Module):
    def __init__(self):
        super().__init__()
        self.loc = nn.Sequential(nn.Conv2d(1, 4, 3), nn.AdaptiveAvgPool2d(2), nn.Flatten(),
                                 nn.Linear(16, 6))
        self.up = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.PixelShuffle(2))
        self.head = nn.Conv2d(1, 1, 3, padding=1)

    def forward(self, x):
        theta = self.loc(x).view(-1, 2, 3) + torch.tensor([[1.0, 0, 0], [0, 1.0, 0]])
        grid = F.affine_grid(theta, list(x.shape), align_corners=False)
        warped = F.grid_sample(x, grid, mode="bilinear", padding_mode="border",
                               align_corners=False)
        sr = self.up(warped)
        return self.head(sr + F.interpolate(warped, scale_factor=2, mode="bicubic",
                                            align_corners=False))

rng = np.random.default_rng(60)
low = torch.tensor(rng.standard_normal((4, 1, 6, 6)))
high = F.interpolate(low, scale_factor=2, mode="nearest") * 0.5
model = init(STN(), scale=0.2)
opt = torch.optim.Adam(model.parameters(), lr=5e-3)
for _ in range(5):
    loss = F.l1_loss(model(low), high) + 0.1 * F.mse_loss(model(low), high)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
'''

SEQ_TRANSFORMER = '''
model = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                       dim_feedforward=16, dropout=0.0, batch_first=True)
embed = nn.Embedding(10, 8)
head = nn.Linear(8, 10)
init(nn.ModuleList([model, embed, head]), scale=0.3)
params = list(model.parameters()) + list(embed.parameters()) + list(head.parameters())
opt = torch.optim.Adam(params, lr=1e-2)
rng = np.random.default_rng(61)
src = torch.tensor(rng.integers(1, 10, (3, 5)))
tgt = torch.tensor(rng.integers(1, 10, (3, 4)))
tgt_mask = nn.Transformer.generate_square_subsequent_mask(3)
src_pad = src == 0
for _ in range(5):
    out = model(embed(src), embed(tgt[:, :-1]), tgt_mask=tgt_mask,
                src_key_padding_mask=src_pad, memory_key_padding_mask=src_pad)
    loss = F.cross_entropy(head(out).reshape(-1, 10), tgt[:, 1:].reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
'''

RNN_VARIANTS = '''
rnn = nn.RNN(3, 5, num_layers=2, nonlinearity="relu", batch_first=True, bidirectional=True)
lstm = nn.LSTM(10, 6, proj_size=3, batch_first=True)
gru = nn.GRU(3, 4, num_layers=1)
head = nn.Linear(3 + 4, 2)
mods = nn.ModuleList([rnn, lstm, gru, head])
init(mods, scale=0.3)
opt = torch.optim.SGD(mods.parameters(), lr=0.1, momentum=0.5)
rng = np.random.default_rng(62)
x = torch.tensor(rng.standard_normal((4, 6, 3)))
h0 = torch.tensor(rng.standard_normal((4, 4, 5))) * 0.1
y = torch.tensor(rng.integers(0, 2, 4))
for _ in range(5):
    out, hn = rnn(x, h0)
    out2, (h2, c2) = lstm(out)
    out3, h3 = gru(x.transpose(0, 1))
    loss = F.cross_entropy(head(torch.cat([out2[:, -1], h3[-1]], 1)), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), hn.abs().sum().item(), c2.abs().sum().item()]
'''

SPECTRAL = '''
# Procrustes alignment + spectral norm penalty + a low-rank factorization by SVD/QR/eigh
rng = np.random.default_rng(63)
A = torch.tensor(rng.standard_normal((6, 4)))
B = torch.tensor(rng.standard_normal((6, 4)))
W = torch.tensor(rng.standard_normal((4, 4)) * 0.5, requires_grad=True)
U0 = torch.tensor(rng.standard_normal((6, 2)), requires_grad=True)
opt = torch.optim.SGD([W, U0], lr=0.05)
for _ in range(5):
    u, s, vh = torch.linalg.svd(A.T @ B)
    R = u @ vh
    q, r = torch.linalg.qr(U0)
    evals, evecs = torch.linalg.eigh(W @ W.T + torch.eye(4))
    lowrank = q @ (q.T @ A)
    sol = torch.linalg.lstsq(A, B).solution
    loss = ((A @ W - B) ** 2).mean() + 0.1 * torch.linalg.matrix_norm(W, ord=2) \\
        + 0.01 * evals.log().sum() + ((lowrank - A) ** 2).mean() \\
        + 1e-3 * torch.linalg.pinv(W).norm()
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), (R.T @ R).trace().item(), sol.abs().sum().item(), s.sum().item()]
'''

AUDIO = '''
class Denoiser(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv1d(1, 6, 5, padding=2), nn.Tanh(),
                                 nn.Conv1d(6, 1, 5, padding=2))

    def forward(self, x):
        return x + self.net(x.unsqueeze(1)).squeeze(1)

def spectral_loss(pred, target):
    window = torch.hann_window(16, dtype=pred.dtype)
    P = torch.stft(pred, n_fft=16, hop_length=4, window=window, return_complex=True)
    T = torch.stft(target, n_fft=16, hop_length=4, window=window, return_complex=True)
    mag = (P.abs() - T.abs()).norm() / T.abs().norm()
    logmag = F.l1_loss(torch.log(P.abs() + 1e-5), torch.log(T.abs() + 1e-5))
    return mag + logmag

t = np.linspace(0, 1, 64)
clean = torch.tensor(np.stack([np.sin(2 * np.pi * f * t) for f in (3, 5, 7)]))
noisy = clean + torch.tensor(np.random.default_rng(64).standard_normal((3, 64)) * 0.3)
model = init(Denoiser(), scale=0.2)
opt = torch.optim.Adam(model.parameters(), lr=5e-3)
for _ in range(5):
    pred = model(noisy)
    loss = spectral_loss(pred, clean) + F.mse_loss(pred, clean)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), torch.trapezoid(pred.abs(), dx=1 / 63).sum().item(),
               torch.diff(pred, dim=1).abs().mean().item()]
'''

PARAMETRIZED = '''
from torch.nn.utils import parametrize
from torch.nn.utils.parametrizations import orthogonal, spectral_norm

class Symmetric(nn.Module):
    def forward(self, X):
        return X.triu() + X.triu(1).transpose(-1, -2)

lin_sym = nn.Linear(4, 4)
lin_orth = nn.Linear(4, 4)
lin_sn = nn.Linear(4, 3)
init(nn.ModuleList([lin_sym, lin_orth, lin_sn]), scale=0.4)
parametrize.register_parametrization(lin_sym, "weight", Symmetric())
orthogonal(lin_orth, orthogonal_map="cayley")
spectral_norm(lin_sn, n_power_iterations=2)
with torch.no_grad():  # the power iteration's random start, from NumPy
    rng0 = np.random.default_rng(65)
    for name, buf in lin_sn.named_buffers():
        if name.endswith(("_u", "_v")):
            buf.copy_(torch.nn.functional.normalize(
                torch.tensor(rng0.standard_normal(tuple(buf.shape))), dim=0))
model = nn.Sequential(lin_sym, nn.Tanh(), lin_orth, nn.Tanh(), lin_sn)
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
rng = np.random.default_rng(66)
x = torch.tensor(rng.standard_normal((10, 4)))
y = torch.tensor(rng.integers(0, 3, 10))
for _ in range(5):
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    W = lin_orth.weight
    losses += [loss.item(), (W @ W.T - torch.eye(4)).abs().max().item() < 1e-9,
               (lin_sym.weight - lin_sym.weight.T).abs().max().item(),
               torch.linalg.matrix_norm(lin_sn.weight, 2).item()]
'''

MIXUP = '''
model = init(nn.Sequential(nn.Linear(6, 16), nn.Mish(), nn.Linear(16, 4)))
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
sched = torch.optim.lr_scheduler.SequentialLR(opt, schedulers=[
    torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=2),
    torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4)], milestones=[2])
rng = np.random.default_rng(67)
for _ in range(6):
    x = torch.tensor(rng.standard_normal((8, 6)))
    y = torch.tensor(rng.integers(0, 4, 8))
    lam = float(rng.beta(0.4, 0.4))
    perm = torch.tensor(rng.permutation(8))
    mixed = lam * x + (1 - lam) * x[perm]
    soft = lam * F.one_hot(y, 4).to(x.dtype) + (1 - lam) * F.one_hot(y[perm], 4).to(x.dtype)
    logits = model(mixed)
    loss = torch.sum(-soft * F.log_softmax(logits, -1), -1).mean()
    loss = loss + 0.1 * F.cross_entropy(logits, y, label_smoothing=0.2)
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5, norm_type=1.0)
    opt.step()
    sched.step()
    losses += [loss.item(), sched.get_last_lr()[0]]
'''

ADAPTIVE = '''
class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(30, 8)
        self.rnn = nn.GRU(8, 8, batch_first=True)
        self.out = nn.AdaptiveLogSoftmaxWithLoss(8, 30, cutoffs=[5, 15], div_value=2.0)

    def forward(self, x, y):
        h, _ = self.rnn(self.emb(x))
        return self.out(h.reshape(-1, 8), y.reshape(-1))

model = init(LM(), scale=0.3)
opt = torch.optim.Adagrad(model.parameters(), lr=0.1)
data = torch.tensor(np.random.default_rng(68).integers(0, 30, (4, 7)))
for _ in range(5):
    res = model(data[:, :-1], data[:, 1:])
    opt.zero_grad()
    res.loss.backward()
    opt.step()
    losses += [res.loss.item(), res.output.sum().item()]
with torch.no_grad():
    h, _ = model.rnn(model.emb(data[:, :-1]))
    losses += [model.out.log_prob(h.reshape(-1, 8)).exp().sum().item(),
               model.out.predict(h.reshape(-1, 8)).sum().item()]
'''

COMPILED = '''
model = init(nn.Sequential(nn.Linear(5, 8), nn.GELU(), nn.Linear(8, 1)))
compiled = torch.compile(model)
opt = torch.optim.Adam(model.parameters(), lr=1e-2, fused=False, foreach=True)
rng = np.random.default_rng(69)
x = torch.tensor(rng.standard_normal((16, 5)))
y = torch.tensor(rng.standard_normal((16, 1)))

@torch.no_grad()
def evaluate():
    model.eval()
    out = F.mse_loss(compiled(x), y).item()
    model.train()
    return out

for _ in range(5):
    with torch.autograd.set_detect_anomaly(True):
        loss = F.mse_loss(compiled(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    losses += [loss.item(), evaluate()]
with torch.inference_mode():
    losses.append(compiled(x).sum().item())
'''

BAYES = '''
from torch.distributions import Beta, Dirichlet, Gamma, Normal, LogNormal, kl_divergence

rng = np.random.default_rng(70)
alpha_raw = torch.tensor(rng.standard_normal(3) * 0.1, requires_grad=True)
conc_raw = torch.tensor(rng.standard_normal(4) * 0.1, requires_grad=True)
loc = torch.tensor(0.0, requires_grad=True)
opt = torch.optim.Adam([alpha_raw, conc_raw, loc], lr=0.05)
obs_beta = torch.tensor(rng.uniform(0.1, 0.9, (20, 3)))
obs_dir = torch.tensor(rng.dirichlet([2, 3, 1, 4], 20))
obs_pos = torch.tensor(rng.gamma(2.0, 1.5, 20))
for _ in range(6):
    a = F.softplus(alpha_raw) + 0.5
    beta = Beta(a, a.flip(0))
    dirich = Dirichlet(F.softplus(conc_raw) + 0.5)
    gamma = Gamma(F.softplus(loc) + 1.0, torch.tensor(0.7))
    ln = LogNormal(loc, 1.0)
    nll = -(beta.log_prob(obs_beta).sum() + dirich.log_prob(obs_dir).sum()
            + gamma.log_prob(obs_pos).sum() + ln.log_prob(obs_pos).sum())
    reg = kl_divergence(beta, Beta(torch.ones(3), torch.ones(3))).sum() \\
        + kl_divergence(Normal(loc, 1.0), Normal(0.0, 2.0))
    loss = nll + reg
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), beta.entropy().sum().item(), dirich.mean.sum().item(),
               gamma.variance.item()]
'''

PATCHES = '''
class PatchNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(1 * 2 * 2, 6)
        self.mix = nn.Linear(6, 4)

    def forward(self, img):
        patches = F.unfold(img, kernel_size=2, stride=2)          # (B, 4, L)
        tokens = self.proj(patches.transpose(1, 2))              # (B, L, 6)
        mixed = self.mix(torch.tanh(tokens)).transpose(1, 2)     # (B, 4, L)
        return F.fold(mixed, output_size=(6, 6), kernel_size=2, stride=2)

rng = np.random.default_rng(71)
img = torch.tensor(rng.standard_normal((3, 1, 6, 6)))
target = F.pixel_shuffle(F.pixel_unshuffle(img, 2), 2).flip(-1)
model = init(PatchNet(), scale=0.3)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
for _ in range(6):
    out = model(img)
    loss = F.mse_loss(out, target) + 0.01 * out.abs().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    refolded = nn.Fold((6, 6), 3, padding=1)(nn.Unfold(3, padding=1)(out))
    losses += [loss.item(), refolded.sum().item()]
'''

PACKED = '''
from torch.nn.utils.rnn import pack_sequence, pad_sequence, pad_packed_sequence, unpack_sequence

rng = np.random.default_rng(72)
seqs = [torch.tensor(rng.standard_normal((n, 3))) for n in (5, 4, 2)]
targets = torch.tensor(rng.integers(0, 2, 3))
gru = nn.GRU(3, 4, batch_first=True, bidirectional=True)
head = nn.Linear(8, 2)
mods = nn.ModuleList([gru, head])
init(mods, scale=0.3)
opt = torch.optim.Adam(mods.parameters(), lr=1e-2)
for _ in range(5):
    packed = pack_sequence(seqs, enforce_sorted=True)
    out, h = gru(packed)
    padded, lengths = pad_packed_sequence(out, batch_first=True, padding_value=-1.0)
    unpacked = unpack_sequence(out)
    last = torch.stack([u[-1] for u in unpacked])
    loss = F.cross_entropy(head(torch.cat([h[0], h[1]], 1)), targets) + 0.01 * last.pow(2).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), padded.sum().item(), lengths.sum().item(),
               pad_sequence(seqs, batch_first=False, padding_value=2.0).sum().item()]
'''

KNN_LINALG = '''
rng = np.random.default_rng(73)
X = torch.tensor(rng.standard_normal((12, 3)))
Y = torch.tensor(rng.standard_normal((12,)))
W = torch.tensor(rng.standard_normal((3, 3)) * 0.3, requires_grad=True)
opt = torch.optim.SGD([W], lr=0.05)
for _ in range(5):
    Z = X @ W
    d = torch.cdist(Z, Z) + torch.eye(12) * 1e6
    vals, idx = d.topk(3, largest=False)
    weights = F.softmax(-vals, dim=1)
    pred = (weights * Y[idx]).sum(1)
    A = Z.T @ Z + torch.eye(3)
    sign, logabsdet = torch.linalg.slogdet(A)
    L = torch.linalg.cholesky(A)
    inv = torch.cholesky_inverse(L)
    sol = torch.linalg.solve_triangular(L, Z.T[:, :2], upper=False)
    loss = F.mse_loss(pred, Y) + 0.01 * logabsdet + 0.001 * inv.trace() + 0.001 * sol.pow(2).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    buckets = torch.bucketize(Y, torch.tensor([-1.0, 0.0, 1.0]))
    losses += [loss.item(), sign.item(), buckets.sum().item(), torch.logdet(A).item()]
'''

PRUNED_EMA = '''
import torch.nn.utils.prune as prune
from torch.utils.hooks import RemovableHandle

model = init(nn.Sequential(nn.Linear(6, 12), nn.LeakyReLU(0.1), nn.Linear(12, 12), nn.Hardtanh(),
                           nn.Linear(12, 3)), seed=80)
prune.l1_unstructured(model[0], "weight", amount=0.3)
prune.ln_structured(model[2], "weight", amount=2, n=2, dim=0)
prune.global_unstructured([(model[2], "weight"), (model[4], "weight")],
                          pruning_method=prune.L1Unstructured, amount=0.25)
ema = [p.detach().clone() for p in model.parameters()]
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
seen = []
handle = model[1].register_forward_hook(lambda m, i, o: seen.append(o.abs().mean().item()))
assert isinstance(handle, RemovableHandle)
rng = np.random.default_rng(81)
for step in range(5):
    x = torch.tensor(rng.standard_normal((16, 6)), requires_grad=True)
    y = torch.tensor(rng.integers(0, 3, 16))
    loss = F.cross_entropy(model(x), y)
    # an input-gradient penalty through LeakyReLU and Hardtanh, differentiated w.r.t. x too
    (gx,) = torch.autograd.grad(loss, x, create_graph=True)
    (hx,) = torch.autograd.grad(gx.pow(2).sum(), x, retain_graph=True)
    total = loss + 0.1 * gx.pow(2).sum()
    opt.zero_grad()
    total.backward()
    grads = [p.grad for p in model.parameters()]
    norms = torch._foreach_norm(grads)
    clip = min(1.0, 1.0 / (torch.stack(norms).norm().item() + 1e-6))
    torch._foreach_mul_(grads, clip)
    opt.step()
    with torch.no_grad():
        torch._foreach_lerp_(ema, [p.detach() for p in model.parameters()], 0.2)
    flat = torch.cat([g.view(-1) for g in grads])
    losses += [loss.item(), total.item(), hx.abs().sum().item(), flat.norm().item(),
               sum(e.sum().item() for e in ema)]
handle.remove()
model(torch.zeros(1, 6))
for module, name in [(model[0], "weight"), (model[2], "weight"), (model[4], "weight")]:
    prune.remove(module, name)
losses += seen + [float((model[2].weight == 0).sum()), float(prune.is_pruned(model))]
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
    ("STN_SR", STN_SR),
    ("SEQ_TRANSFORMER", SEQ_TRANSFORMER),
    ("RNN_VARIANTS", RNN_VARIANTS),
    ("SPECTRAL", SPECTRAL),
    ("AUDIO", AUDIO),
    ("PARAMETRIZED", PARAMETRIZED),
    ("MIXUP", MIXUP),
    ("ADAPTIVE", ADAPTIVE),
    ("COMPILED", COMPILED),
    ("BAYES", BAYES),
    ("PATCHES", PATCHES),
    ("PACKED", PACKED),
    ("KNN_LINALG", KNN_LINALG),
    ("PRUNED_EMA", PRUNED_EMA),
]}


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_program_matches_torch(name, monkeypatch):
    if name == "compiled":
        # torch's side traced by dynamo and run op by op, without inductor's C++ build (41 s
        # of the suite's time on 2 cores with a cold cache): the values are eager torch's
        import torch

        monkeypatch.setattr(torch, "compile", functools.partial(torch.compile,
                                                                backend="eager"))
    assert_matches_torch(PROGRAMS[name], trains=False)  # (several end on other figures)
