"""More real-world PyTorch programs run unchanged with `torch` mapped to flowgrad
(as test_torch_programs_zoo2.py): module and tensor hooks with state-dict round trips, a
DataLoader of padded batches over ConcatDataset/Subset, attention variants
(MultiheadAttention with kdim/vdim/bias_kv/zero_attn, SDPA masks), stacked and packed RNNs with
proj_size, a conv stack of every padding mode and norm, five more optimizers (LBFGS with strong
Wolfe, Rprop, ASGD, Adadelta, RAdam), ranking/quantile/FFT/cumprod losses, a Gaussian process
fitted through cholesky, a double DQN with a Polyak-averaged target net, GRU teacher forcing
and a beam search, in-place writes through views, SAC's transformed distributions, a
complex-valued network, checkpointing (both reentrant kinds), and orthogonal/spectral-norm
parametrizations. Weights and data come from NumPy."""
import pytest
from test_torch_programs import assert_matches_torch

HOOKS = '''
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 6), nn.Linear(6, 2)
        self.register_buffer("steps", torch.zeros(()), persistent=False)
        self.register_buffer("scale", torch.ones(6))

    def forward(self, x):
        self.steps += 1
        return self.b(F.relu(self.a(x)) * self.scale)

net = init(Net(), seed=83)
grad_norms = []
net.a.register_full_backward_hook(lambda m, gin, gout: grad_norms.append(float(gout[0].norm())))
net.b.register_forward_pre_hook(lambda m, args: (args[0] * 2,))
net.b.weight.register_hook(lambda g: g.clamp(-0.05, 0.05))
net.a.register_forward_hook(lambda m, args, out: out + 0.1)
def init_fn(m):
    if isinstance(m, nn.Linear):
        with torch.no_grad():
            m.bias.fill_(0.01)
net.apply(init_fn)
opt = torch.optim.SGD(net.parameters(), lr=0.2, momentum=0.9, nesterov=True)
rng = np.random.default_rng(84)
x = torch.tensor(rng.standard_normal((12, 4)))
y = torch.tensor(rng.standard_normal((12, 2)))
for _ in range(6):
    loss = F.huber_loss(net(x), y, delta=0.5)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
losses += grad_norms
sd = net.state_dict()
assert "steps" not in sd and "scale" in sd
fresh = Net()
partial = {k: v for k, v in sd.items() if k != "b.bias"} | {"extra": torch.zeros(1)}
result = fresh.load_state_dict(partial, strict=False)
losses.append(float(len(result.missing_keys) * 10 + len(result.unexpected_keys)))
losses.append(float(net.steps))
'''

DATALOADER = '''
from torch.utils.data import (DataLoader, ConcatDataset, Subset, BatchSampler,
                              SequentialSampler)

rng = np.random.default_rng(85)
seqs = [torch.tensor(rng.integers(1, 9, rng.integers(2, 6))) for _ in range(14)]
labels = torch.tensor(rng.integers(0, 2, 14))

class Seqs(torch.utils.data.Dataset):
    def __len__(self):
        return len(seqs)
    def __getitem__(self, i):
        return seqs[i], labels[i]

def collate(batch):
    xs, ys = zip(*batch)
    lengths = torch.tensor([len(s) for s in xs])
    return nn.utils.rnn.pad_sequence(xs, batch_first=True), lengths, torch.stack(ys)

data = ConcatDataset([Subset(Seqs(), range(0, 10)), Subset(Seqs(), [12, 13, 10, 11])])
loader = DataLoader(data, batch_sampler=BatchSampler(SequentialSampler(data), 4, drop_last=True),
                    collate_fn=collate)
emb = init(nn.Embedding(9, 5, padding_idx=0), seed=86)
with torch.no_grad():
    emb.weight[0].zero_()
clf = init(nn.Linear(5, 2), seed=87)
opt = torch.optim.Adam(list(emb.parameters()) + list(clf.parameters()), lr=2e-2)
for epoch in range(2):
    for x, lengths, y in loader:
        h = emb(x).sum(1) / lengths.unsqueeze(1)
        loss = F.cross_entropy(clf(h), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
losses.append(float(len(loader)))
'''

ATTENTION = '''
mha = nn.MultiheadAttention(8, 2, kdim=5, vdim=3, add_bias_kv=True, add_zero_attn=True,
                            batch_first=True)
init(mha, seed=88)
proj = init(nn.Linear(8, 1), seed=89)
opt = torch.optim.Adam(list(mha.parameters()) + list(proj.parameters()), lr=1e-2)
rng = np.random.default_rng(90)
q = torch.tensor(rng.standard_normal((3, 4, 8)))
k = torch.tensor(rng.standard_normal((3, 6, 5)))
v = torch.tensor(rng.standard_normal((3, 6, 3)))
pad = torch.tensor(rng.random((3, 6)) > 0.7)
pad[:, 0] = False
bias = torch.tensor(rng.standard_normal((4, 4)))
y = torch.tensor(rng.standard_normal((3, 4, 1)))
for _ in range(6):
    out, w = mha(q, k, v, key_padding_mask=pad, need_weights=True, average_attn_weights=False)
    qh = q.view(3, 4, 2, 4).transpose(1, 2)
    sdpa = F.scaled_dot_product_attention(qh, qh, qh, attn_mask=bias, scale=0.3)
    sdpa_c = F.scaled_dot_product_attention(qh, qh, qh, is_causal=True)
    extra = (sdpa + sdpa_c).transpose(1, 2).reshape(3, 4, 8)
    loss = F.mse_loss(proj(out + 0.1 * extra), y) + 0.01 * w.pow(2).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
losses.append(float(w.sum()))
'''

RNNS = '''
lstm = init(nn.LSTM(3, 6, num_layers=2, proj_size=4, batch_first=False), seed=91)
cell = init(nn.LSTMCell(4, 5), seed=92)
rnn = init(nn.RNN(5, 3, nonlinearity="relu", bias=False), seed=93)
params = list(lstm.parameters()) + list(cell.parameters()) + list(rnn.parameters())
opt = torch.optim.RMSprop(params, lr=5e-3)
rng = np.random.default_rng(94)
x = torch.tensor(rng.standard_normal((7, 2, 3)))
h0 = (torch.zeros(2, 2, 4), torch.tensor(rng.standard_normal((2, 2, 6)) * 0.1))
y = torch.tensor(rng.standard_normal((7, 2, 3)))
lengths = torch.tensor([7, 5])
for _ in range(6):
    out, (h, c) = lstm(x, h0)
    hx, cx = torch.zeros(2, 5), torch.zeros(2, 5)
    steps = []
    for t in range(out.shape[0]):
        hx, cx = cell(out[t], (hx, cx))
        steps.append(hx)
    seq = torch.stack(steps)
    packed = nn.utils.rnn.pack_padded_sequence(seq, lengths, enforce_sorted=True)
    r, hn = rnn(packed)
    r, _ = nn.utils.rnn.pad_packed_sequence(r, total_length=7)
    loss = F.mse_loss(r, y) + hn.abs().mean() + c.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
'''

CONVS = '''
model = nn.Sequential(
    nn.Conv2d(2, 4, 3, padding="same", padding_mode="reflect", dilation=1),
    nn.GroupNorm(2, 4), nn.SiLU(),
    nn.Conv2d(4, 4, 3, padding=2, dilation=2, groups=2, padding_mode="circular"),
    nn.InstanceNorm2d(4, affine=True), nn.Hardswish(),
    nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1, output_padding=1),
    nn.PixelUnshuffle(2), nn.Conv2d(12, 8, 1), nn.PixelShuffle(2),
    nn.Upsample(scale_factor=0.5, mode="bilinear", align_corners=True),
    nn.Dropout2d(0.0), nn.Conv2d(2, 1, 1))
init(model, seed=95, scale=0.3)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, dampening=0.1, weight_decay=1e-3)
sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[2, 4], gamma=0.5)
rng = np.random.default_rng(96)
x = torch.tensor(rng.standard_normal((2, 2, 6, 6)))
y = torch.tensor(rng.standard_normal((2, 1, 6, 6)))
for _ in range(6):
    loss = F.l1_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()
    losses.append(loss.item())
'''

OPTIMS = '''
rng = np.random.default_rng(97)
X = torch.tensor(rng.standard_normal((20, 3)))
Y = X @ torch.tensor([[1.0], [-2.0], [0.5]]) + 0.3
def fit(make_opt, closure_style=False):
    m = init(nn.Linear(3, 1), seed=98)
    opt = make_opt(m.parameters())
    for _ in range(3):
        def closure():
            opt.zero_grad()
            loss = F.mse_loss(m(X), Y)
            loss.backward()
            return loss
        loss = opt.step(closure) if closure_style else (closure(), opt.step())[0]
        losses.append(float(loss))
fit(lambda p: torch.optim.LBFGS(p, lr=0.5, max_iter=5, history_size=3,
                                line_search_fn="strong_wolfe"), True)
fit(lambda p: torch.optim.Rprop(p, lr=0.05, etas=(0.4, 1.3), step_sizes=(1e-4, 1.0)))
fit(lambda p: torch.optim.ASGD(p, lr=0.05, t0=1))
fit(lambda p: torch.optim.Adadelta(p, lr=1.0, rho=0.8))
fit(lambda p: torch.optim.RAdam(p, lr=0.1, decoupled_weight_decay=True, weight_decay=0.1))
'''

MISC_MATH = '''
rng = np.random.default_rng(99)
w = torch.tensor(rng.standard_normal(6) * 0.5, requires_grad=True)
x = torch.tensor(rng.standard_normal((30, 6)))
y = torch.tensor(rng.standard_normal(30))
opt = torch.optim.Adam([w], lr=0.05)
edges = torch.linspace(-2, 2, 5)
for _ in range(6):
    pred = x @ w
    err = y - pred
    q = torch.tensor([0.1, 0.5, 0.9]).unsqueeze(1)
    pinball = torch.maximum(q * err, (q - 1) * err).mean()
    ranks = torch.sort(pred, descending=True).indices
    top = y.gather(0, ranks[:5]).mean()
    bins = torch.bucketize(pred.detach(), edges)
    per_bin = torch.zeros(6, dtype=pred.dtype).scatter_add(0, bins, err.abs())
    spec = torch.fft.rfft(pred).abs().pow(2)[1:4].sum() / 30
    lse = torch.logsumexp(torch.stack([pred, y]), 0).mean()
    cp = torch.cumprod(1 + 0.01 * torch.tanh(pred), 0)[-1]
    safe = torch.where(pred > 0, torch.sqrt(pred.clamp(min=1e-12)), torch.zeros_like(pred)).mean()
    loss = (pinball - 0.1 * top + 0.01 * spec + 0.1 * lse + cp + 0.1 * safe
            + 0.001 * torch.lerp(w, w.pow(2), 0.3).sum())
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    losses.append(float(per_bin.sum()))
'''

GP = '''
rng = np.random.default_rng(100)
X = torch.tensor(np.sort(rng.uniform(-3, 3, 15))).unsqueeze(1)
Y = torch.sin(X).squeeze(1) + 0.1 * torch.tensor(rng.standard_normal(15))
log_ell = torch.tensor(0.0, requires_grad=True)
log_sf = torch.tensor(0.0, requires_grad=True)
log_sn = torch.tensor(-1.0, requires_grad=True)
opt = torch.optim.Adam([log_ell, log_sf, log_sn], lr=0.1)
for _ in range(6):
    d2 = torch.cdist(X, X).pow(2)
    noise = (log_sn.exp() ** 2 + 1e-6) * torch.eye(15)
    K = log_sf.exp() ** 2 * torch.exp(-0.5 * d2 / log_ell.exp() ** 2) + noise
    L = torch.linalg.cholesky(K)
    alpha = torch.cholesky_solve(Y.unsqueeze(1), L)
    nll = 0.5 * (Y.unsqueeze(0) @ alpha).squeeze() + torch.log(torch.diagonal(L)).sum()
    _, logdet = torch.linalg.slogdet(K)
    check = torch.linalg.solve(K, Y) - alpha.squeeze(1)
    loss = nll + 0.0 * logdet + check.abs().sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    losses.append(logdet.item())
'''

DQN = '''
import copy
q = init(nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3)), seed=101)
target = copy.deepcopy(q)
for p in target.parameters():
    p.requires_grad_(False)
opt = torch.optim.Adam(q.parameters(), lr=5e-3)
rng = np.random.default_rng(102)
for step in range(6):
    s = torch.tensor(rng.standard_normal((32, 4)))
    a = torch.tensor(rng.integers(0, 3, 32))
    r = torch.tensor(rng.standard_normal(32))
    s2 = torch.tensor(rng.standard_normal((32, 4)))
    done = torch.tensor(rng.random(32) < 0.1)
    q_sa = q(s).gather(1, a.unsqueeze(1)).squeeze(1)
    with torch.no_grad():
        best = q(s2).argmax(1, keepdim=True)
        next_q = target(s2).gather(1, best).squeeze(1)
        y = r + 0.99 * next_q * (~done).to(r.dtype)
    loss = F.smooth_l1_loss(q_sa, y)
    opt.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(q.parameters(), 10.0, norm_type=2.0)
    opt.step()
    with torch.no_grad():
        for pt, p in zip(target.parameters(), q.parameters()):
            pt.data.mul_(0.9).add_(0.1 * p.data)
        torch._foreach_lerp_(list(target.parameters()), list(q.parameters()), 0.05)
    losses.append(loss.item())
    losses.append(float(q(s).max(1)[0].mean()))
'''

BEAM = '''
emb = init(nn.Embedding(7, 6), seed=103)
cell = init(nn.GRUCell(6, 6), seed=104)
out = init(nn.Linear(6, 7), seed=105)
opt = torch.optim.SGD([*emb.parameters(), *cell.parameters(), *out.parameters()], lr=0.5)
rng = np.random.default_rng(106)
tgt = torch.tensor(rng.integers(1, 7, (4, 5)))
for _ in range(5):
    h = torch.zeros(4, 6)
    tok = torch.zeros(4, dtype=torch.long)
    loss = 0
    for t in range(5):
        h = cell(emb(tok), h)
        loss = loss + F.cross_entropy(out(h), tgt[:, t])
        tok = tgt[:, t]
    opt.zero_grad()
    (loss / 5).backward()
    opt.step()
    losses.append(loss.item())
with torch.no_grad():
    beams, k = torch.zeros(1, 0, dtype=torch.long), 3
    scores = torch.zeros(1)
    h = torch.zeros(1, 6)
    tok = torch.zeros(1, dtype=torch.long)
    for t in range(4):
        h = cell(emb(tok), h)
        logp = out(h).log_softmax(-1)
        flat = (scores.unsqueeze(1) + logp).view(-1)
        scores, idx = flat.topk(k)
        parent, tok = idx // 7, idx % 7
        beams = torch.cat([beams.index_select(0, parent), tok.unsqueeze(1)], 1)
        h = h.index_select(0, parent)
    losses += scores.tolist() + beams.flatten().double().tolist()
'''

VIEWS_INPLACE = '''
lin = init(nn.Linear(5, 6), seed=107)
opt = torch.optim.SGD(lin.parameters(), lr=0.1)
rng = np.random.default_rng(108)
x = torch.tensor(rng.standard_normal((8, 5)))
for _ in range(6):
    h = lin(x)
    h[:, 0] += 1.0
    h.narrow(1, 1, 2).mul_(0.5)
    cols = h.t()
    cols[3].clamp_(min=-0.2)
    h.retain_grad()
    z = h.unsqueeze(0).expand(2, -1, -1).sum(0)
    d = h.diagonal()
    d.sub_(0.1)
    w = h.detach()
    w.requires_grad_(True)
    with torch.enable_grad():
        aux = (w * 2).sum()
    with torch.no_grad():
        unused = h * 3
    loss = z.pow(2).mean() + h[::2, ::3].abs().sum() * 0.1 + aux * 0.0
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    losses.append(float(h.grad.sum()))
    losses.append(float(h._version))
'''

SAC_DISTS = '''
from torch.distributions import Normal, TransformedDistribution, MultivariateNormal, Dirichlet, Beta
from torch.distributions.transforms import TanhTransform, AffineTransform

pi = init(nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 4)), seed=109)
opt = torch.optim.Adam(pi.parameters(), lr=1e-2)
rng = np.random.default_rng(110)
s = torch.tensor(rng.standard_normal((10, 3)))
actions = torch.tensor(rng.uniform(-0.9, 0.9, (10, 2)))
for _ in range(6):
    mu, log_std = pi(s).chunk(2, -1)
    base = Normal(mu, log_std.clamp(-3, 1).exp())
    dist = TransformedDistribution(base, [TanhTransform(cache_size=1), AffineTransform(0.0, 1.0)])
    lp = dist.log_prob(actions).sum(-1)
    scale_tril = torch.diag_embed(log_std.exp()) + torch.tril(torch.ones(2, 2), -1) * 0.1
    mvn = MultivariateNormal(mu, scale_tril=scale_tril)
    conc = F.softplus(mu) + 0.5
    dir_lp = Dirichlet(conc).log_prob(torch.tensor([[0.3, 0.7]]).expand(10, 2))
    beta = Beta(conc[:, 0], conc[:, 1])
    loss = -(lp.mean() + 0.1 * mvn.log_prob(actions).mean() + 0.1 * dir_lp.mean()
             + 0.1 * beta.log_prob(torch.full((10,), 0.4)).mean()) + 0.01 * mvn.entropy().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    losses.append(float(beta.entropy().mean()))
'''

COMPLEX_NET = '''
class ComplexLinear(nn.Module):
    def __init__(self, n, m, seed):
        super().__init__()
        rng = np.random.default_rng(seed)
        w = rng.standard_normal((m, n)) + 1j * rng.standard_normal((m, n))
        self.w = nn.Parameter(torch.tensor(w * 0.3))

    def forward(self, z):
        return z @ self.w.t()

a, b = ComplexLinear(8, 6, 111), ComplexLinear(6, 4, 112)
opt = torch.optim.Adam(list(a.parameters()) + list(b.parameters()), lr=1e-2)
rng = np.random.default_rng(113)
sig = torch.tensor(rng.standard_normal((5, 16)))
y = torch.tensor(rng.standard_normal((5, 4)))
for _ in range(6):
    spec = torch.fft.fft(sig, dim=-1)[:, :8]
    h = a(spec)
    h = h * torch.sigmoid(h.abs())
    o = b(h)
    pred = torch.view_as_real(o).pow(2).sum(-1).sqrt() + o.angle() * 0.1
    loss = F.mse_loss(pred, y) + 0.01 * torch.fft.ifft(o, n=6).real.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
'''

CHECKPOINT = '''
from torch.utils.checkpoint import checkpoint, checkpoint_sequential
block = init(nn.Sequential(nn.Linear(6, 6), nn.GELU(), nn.LayerNorm(6), nn.Linear(6, 6)), seed=114)
seq = init(nn.Sequential(*[nn.Sequential(nn.Linear(6, 6), nn.Tanh()) for _ in range(4)]), seed=115)
opt = torch.optim.AdamW(list(block.parameters()) + list(seq.parameters()), lr=1e-2)
rng = np.random.default_rng(116)
x = torch.tensor(rng.standard_normal((7, 6)), requires_grad=True)
y = torch.tensor(rng.standard_normal((7, 6)))
for _ in range(6):
    h = checkpoint(block, x, use_reentrant=False)
    h = checkpoint(lambda t: block(t) + t, h, use_reentrant=True)
    h = checkpoint_sequential(seq, 2, h, use_reentrant=False)
    loss = F.mse_loss(h, y)
    opt.zero_grad()
    x.grad = None
    loss.backward()
    opt.step()
    losses.append(loss.item())
    losses.append(float(x.grad.abs().sum()))
'''

ORTHO = '''
from torch.nn.utils.parametrizations import orthogonal, spectral_norm
rnn_w = init(nn.Linear(5, 5, bias=False), seed=117)
orthogonal(rnn_w, orthogonal_map="matrix_exp")
cay = init(nn.Linear(4, 4, bias=False), seed=118)
orthogonal(cay, orthogonal_map="cayley")
disc = spectral_norm(init(nn.Linear(5, 4), seed=119), n_power_iterations=3)
with torch.no_grad():
    power = disc.parametrizations.weight[0]
    power._u.copy_(torch.tensor(np.random.default_rng(120).standard_normal(4)))
    power._v.copy_(torch.tensor(np.random.default_rng(121).standard_normal(5)))
params = list(rnn_w.parameters()) + list(cay.parameters()) + list(disc.parameters())
opt = torch.optim.SGD(params, lr=0.1)
rng = np.random.default_rng(122)
x = torch.tensor(rng.standard_normal((9, 5)))
for _ in range(6):
    h = x
    for _ in range(3):
        h = torch.tanh(rnn_w(h))
    out = cay(disc(h))
    loss = (out - 0.5).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    losses.append(float((rnn_w.weight @ rnn_w.weight.t() - torch.eye(5)).abs().max() < 1e-9))
disc.eval()
losses.append(float(torch.linalg.matrix_norm(disc.weight, 2)))
'''


PROGRAMS = {name.lower(): source for name, source in [
    ("HOOKS", HOOKS),
    ("DATALOADER", DATALOADER),
    ("ATTENTION", ATTENTION),
    ("RNNS", RNNS),
    ("CONVS", CONVS),
    ("OPTIMS", OPTIMS),
    ("MISC_MATH", MISC_MATH),
    ("GP", GP),
    ("DQN", DQN),
    ("BEAM", BEAM),
    ("VIEWS_INPLACE", VIEWS_INPLACE),
    ("SAC_DISTS", SAC_DISTS),
    ("COMPLEX_NET", COMPLEX_NET),
    ("CHECKPOINT", CHECKPOINT),
    ("ORTHO", ORTHO),
]}

# programs whose last logged figure is not their loss (an accuracy, a count, a norm)
NOT_TRAINING = {"attention", "dataloader", "hooks", "misc_math", "ortho", "views_inplace"}


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_program_matches_torch(name):
    assert_matches_torch(PROGRAMS[name], trains=name not in NOT_TRAINING)
