"""More real-world PyTorch programs run unchanged with `torch` mapped to flowgrad (as
test_torch_programs.py: the same shim and runner), each giving torch's losses and the other
figures it logs step for step: a VAE with a KL term, a GAN with two optimizers, a ResNet with
BatchNorm and OneCycleLR, a seq2seq GRU with attention, a padded TransformerEncoder with
scaled_dot_product_attention, a physics-informed net (second derivatives through the input),
MAML through functional_call, contrastive learning with distillation, a RealNVP flow, a graph
attention net on scatter_reduce/index_add, skip-gram on sparse embeddings with SparseAdam, a
toolbox (custom Function, checkpoint, module hooks, gradient accumulation, a save/load round
trip mid-training), a dilated-conv LSTMCell forecaster with ReduceLROnPlateau, WGAN-GP, a
truncated-BPTT language model with tied weights, SWA and EMA with update_bn, a mixture density
network, a small U-Net, a ViT with MultiheadAttention, DP-SGD by vmap(grad), and Newton steps
by torch.autograd.functional. Weights and data come from NumPy, so both runs start from the
same numbers."""
import pytest
from test_torch_programs import assert_matches_torch

VAE = '''
from torch.distributions import Normal, kl_divergence

class VAE(nn.Module):
    def __init__(self, d=12, h=16, z=3):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(d, h), nn.SiLU())
        self.mu, self.logvar = nn.Linear(h, z), nn.Linear(h, z)
        self.dec = nn.Sequential(nn.Linear(z, h), nn.Softplus(), nn.Linear(h, d))

    def forward(self, x, eps):
        hidden = self.enc(x)
        mu, logvar = self.mu(hidden), self.logvar(hidden).clamp(-6, 6)
        std = torch.exp(0.5 * logvar)
        return self.dec(mu + eps * std), mu, std

rng = np.random.default_rng(6)
x = torch.tensor((rng.random((16, 12)) > 0.5).astype(np.float64))
model = init(VAE())
opt = torch.optim.Adam(model.parameters(), lr=1e-2, amsgrad=True)
for _ in range(6):
    eps = torch.from_numpy(rng.standard_normal((16, 3)))
    logits, mu, std = model(x, eps)
    rec = F.binary_cross_entropy_with_logits(logits, x, reduction="sum") / x.shape[0]
    kl = kl_divergence(Normal(mu, std), Normal(torch.zeros_like(mu), 1.0)).sum(-1).mean()
    loss = rec + kl
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    losses.append(kl.item())
'''

GAN = '''
G = init(nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 2)), seed=7)
D = init(nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1)), seed=8)
opt_g = torch.optim.Adam(G.parameters(), lr=2e-3, betas=(0.5, 0.999))
opt_d = torch.optim.Adam(D.parameters(), lr=2e-3, betas=(0.5, 0.999))
criterion = nn.BCEWithLogitsLoss()
rng = np.random.default_rng(9)
for _ in range(6):
    real = torch.tensor(rng.standard_normal((16, 2)) * 0.5 + 2.0)
    noise = torch.tensor(rng.standard_normal((16, 2)))
    fake = G(noise)
    ones, zeros = torch.ones(16, 1), torch.zeros(16, 1)
    loss_d = criterion(D(real), ones) + criterion(D(fake.detach()), zeros)
    opt_d.zero_grad(set_to_none=True)
    loss_d.backward()
    opt_d.step()
    for p in D.parameters():
        p.requires_grad_(False)
    loss_g = criterion(D(fake), ones)
    opt_g.zero_grad(set_to_none=True)
    loss_g.backward()
    opt_g.step()
    for p in D.parameters():
        p.requires_grad_(True)
    assert all(p.grad is None or p.grad.abs().sum() >= 0 for p in D.parameters())
    losses += [loss_d.item(), loss_g.item()]
'''

RESNET = '''
class Residual(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.short = nn.Sequential()
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                       nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)), inplace=True)
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.short(x))

model = init(nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8),
                           nn.ReLU(inplace=True), Residual(8, 8, 1), Residual(8, 12, 2),
                           nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten(), nn.Linear(12, 5)),
             scale=0.25)
rng = np.random.default_rng(10)
x = torch.tensor(rng.standard_normal((10, 3, 8, 8)))
y = torch.tensor(rng.integers(0, 5, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True,
                      weight_decay=5e-4)
sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.2, total_steps=8)
criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
model.train()
for _ in range(6):
    loss = criterion(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()
    losses += [loss.item(), sched.get_last_lr()[0]]
model.eval()
with torch.no_grad():
    out = model(x)
    losses += [criterion(out, y).item(), (out.argmax(1) == y).float().mean().item()]
losses += [b.sum().item() for b in model.buffers() if b.is_floating_point()]
'''

SEQ2SEQ = '''
class Seq2Seq(nn.Module):
    def __init__(self, vocab=9, d=10, h=12):
        super().__init__()
        self.emb = nn.Embedding(vocab, d, padding_idx=0)
        self.enc = nn.GRU(d, h, batch_first=True)
        self.dec = nn.GRUCell(d + h, h)
        self.attn = nn.Linear(h, h, bias=False)
        self.out = nn.Linear(2 * h, vocab)

    def forward(self, src, tgt_in, src_mask):
        enc, hidden = self.enc(self.emb(src))
        state = hidden[0]
        logits = []
        for t in range(tgt_in.size(1)):
            scores = torch.bmm(enc, self.attn(state).unsqueeze(2)).squeeze(2)
            weights = scores.masked_fill(~src_mask, -1e9).softmax(dim=1)
            context = (weights.unsqueeze(2) * enc).sum(1)
            state = self.dec(torch.cat([self.emb(tgt_in[:, t]), context], 1), state)
            logits.append(self.out(torch.cat([state, context], 1)))
        return torch.stack(logits, 1)

rng = np.random.default_rng(11)
src = torch.tensor(rng.integers(1, 9, (5, 6)))
src_len = torch.tensor([6, 4, 5, 2, 6])
src_mask = torch.arange(6)[None, :] < src_len[:, None]
src = src.masked_fill(~src_mask, 0)
tgt = torch.tensor(rng.integers(1, 9, (5, 5)))
tgt[1, 3:] = 0
tgt_in = torch.cat([torch.ones(5, 1, dtype=torch.long), tgt[:, :-1]], 1)
model = init(Seq2Seq())
opt = torch.optim.RMSprop(model.parameters(), lr=5e-3, alpha=0.95, centered=True)
for _ in range(6):
    logits = model(src, tgt_in, src_mask)
    loss = F.nll_loss(F.log_softmax(logits, -1).reshape(-1, 9), tgt.reshape(-1),
                      ignore_index=0)
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_value_(model.parameters(), 0.5)
    opt.step()
    losses.append(loss.item())
'''

TRANSFORMER = '''
class Classifier(nn.Module):
    def __init__(self, vocab=13, d=16, classes=3):
        super().__init__()
        self.emb = nn.Embedding(vocab, d, padding_idx=0)
        layer = nn.TransformerEncoderLayer(d, nhead=2, dim_feedforward=32, dropout=0.0,
                                           activation="gelu", batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.q = nn.Linear(d, d)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        pad = x == 0
        h = self.encoder(self.emb(x), src_key_padding_mask=pad)
        q = self.q(h).unsqueeze(1)
        ctx = F.scaled_dot_product_attention(q, h.unsqueeze(1), h.unsqueeze(1), is_causal=True)
        h = h + ctx.squeeze(1)
        keep = (~pad).unsqueeze(-1).to(h.dtype)
        return self.head((h * keep).sum(1) / keep.sum(1))

rng = np.random.default_rng(12)
x = torch.tensor(rng.integers(1, 13, (6, 7)))
for i, n in enumerate([7, 3, 5, 7, 2, 6]):
    x[i, n:] = 0
y = torch.tensor(rng.integers(0, 3, 6))
model = init(Classifier(), scale=0.2)
opt = torch.optim.AdamW(model.parameters(), lr=5e-3)
warmup = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 3))
for _ in range(6):
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    warmup.step()
    losses.append(loss.item())
'''

PINN = '''
import math

# u(x, t) for the heat equation u_t = 0.1 u_xx: derivatives by autograd, create_graph
net = init(nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(),
                         nn.Linear(16, 1)), scale=0.5)
opt = torch.optim.Adam(net.parameters(), lr=5e-3)
rng = np.random.default_rng(13)
xt = torch.tensor(rng.uniform(0, 1, (32, 2)), requires_grad=True)
x0 = torch.tensor(rng.uniform(0, 1, (16, 1)))
for _ in range(6):
    u = net(xt)
    du = torch.autograd.grad(u.sum(), xt, create_graph=True)[0]
    u_x, u_t = du[:, :1], du[:, 1:]
    u_xx = torch.autograd.grad(u_x.sum(), xt, create_graph=True)[0][:, :1]
    residual = u_t - 0.1 * u_xx
    initial = net(torch.cat([x0, torch.zeros_like(x0)], 1)) - torch.sin(math.pi * x0)
    loss = residual.pow(2).mean() + initial.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), xt.grad is None]
'''

MAML = '''
from torch.func import functional_call

model = init(nn.Sequential(nn.Linear(1, 20), nn.ReLU(), nn.Linear(20, 1)), scale=0.5)
meta_opt = torch.optim.Adam(model.parameters(), lr=1e-2)
rng = np.random.default_rng(14)
for _ in range(5):
    meta_loss = 0.0
    for _ in range(3):
        amp, phase = rng.uniform(0.5, 2), rng.uniform(0, 3)
        xs = torch.tensor(rng.uniform(-3, 3, (10, 1)))
        xq = torch.tensor(rng.uniform(-3, 3, (10, 1)))
        ys, yq = amp * torch.sin(xs + phase), amp * torch.sin(xq + phase)
        params = dict(model.named_parameters())
        for _ in range(2):
            inner = F.mse_loss(functional_call(model, params, (xs,)), ys)
            grads = torch.autograd.grad(inner, list(params.values()), create_graph=True)
            params = {k: p - 0.05 * g for (k, p), g in zip(params.items(), grads)}
        meta_loss = meta_loss + F.mse_loss(functional_call(model, params, (xq,)), yq)
    meta_opt.zero_grad()
    (meta_loss / 3).backward()
    meta_opt.step()
    losses.append(meta_loss.item())
'''

CONTRASTIVE = '''
student = init(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 6)), seed=15)
teacher = init(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 6)), seed=16).eval()
for p in teacher.parameters():
    p.requires_grad = False
proj = init(nn.Linear(6, 4, bias=False), seed=17)
opt = torch.optim.SGD(list(student.parameters()) + list(proj.parameters()), lr=0.1)
rng = np.random.default_rng(18)
T, tau = 2.0, 0.5
for _ in range(6):
    x = torch.tensor(rng.standard_normal((8, 8)))
    views = torch.cat([x + 0.1 * torch.tensor(rng.standard_normal((8, 8))),
                       x + 0.1 * torch.tensor(rng.standard_normal((8, 8)))])
    z = F.normalize(proj(student(views)), dim=1)
    sim = (z @ z.T / tau).masked_fill(torch.eye(16, dtype=torch.bool), float("-inf"))
    targets = torch.cat([torch.arange(8, 16), torch.arange(8)])
    nce = F.cross_entropy(sim, targets)
    with torch.no_grad():
        soft = F.softmax(teacher(x) / T, dim=-1)
    kd = F.kl_div(F.log_softmax(student(x) / T, dim=-1), soft, reduction="batchmean") * T * T
    loss = nce + kd
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [nce.item(), kd.item()]
'''

FLOW = '''
from torch.distributions import Independent, Normal

class Coupling(nn.Module):
    def __init__(self, mask):
        super().__init__()
        self.register_buffer("mask", mask)
        self.net = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 8))

    def forward(self, x):
        s, t = self.net(x * self.mask).chunk(2, dim=1)
        s = torch.tanh(s) * (1 - self.mask)
        t = t * (1 - self.mask)
        return x * torch.exp(s) + t, s.sum(1)

masks = [torch.tensor([1.0, 0, 1, 0]), torch.tensor([0, 1.0, 0, 1])] * 2
layers = nn.ModuleList([Coupling(m) for m in masks])
init(layers, scale=0.2)
base = Independent(Normal(torch.zeros(4), torch.ones(4)), 1)
opt = torch.optim.Adam(layers.parameters(), lr=1e-2)
rng = np.random.default_rng(19)
data = torch.tensor(rng.standard_normal((64, 4)) @ np.array(
    [[1.0, 0.5, 0, 0], [0, 1, 0.3, 0], [0, 0, 1, -0.4], [0.2, 0, 0, 1]]))
for _ in range(6):
    z, log_det = data, torch.zeros(64)
    for layer in layers:
        z, ld = layer(z)
        log_det = log_det + ld
    loss = -(base.log_prob(z) + log_det).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
losses.append(torch.logsumexp(base.log_prob(z), 0).item())
'''

GNN = '''
rng = np.random.default_rng(20)
n, feats = 10, 5
edges = torch.tensor(rng.integers(0, n, (2, 30)))
src, dst = edges[0], edges[1]
x = torch.tensor(rng.standard_normal((n, feats)))
labels = torch.tensor(rng.integers(0, 3, n))

class GATLayer(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.lin = nn.Linear(cin, cout, bias=False)
        self.att = nn.Parameter(torch.zeros(2 * cout))

    def forward(self, h):
        h = self.lin(h)
        e = F.leaky_relu(torch.cat([h[src], h[dst]], 1) @ self.att, 0.2)
        e_max = torch.full((n,), float("-inf")).scatter_reduce(0, dst, e, "amax")
        w = torch.exp(e - e_max[dst])
        denom = torch.zeros(n).index_add(0, dst, w)
        alpha = w / (denom[dst] + 1e-12)
        out = torch.zeros_like(h).index_add_(0, dst, alpha.unsqueeze(1) * h[src])
        deg = torch.bincount(dst, minlength=n).clamp(min=1).unsqueeze(1)
        return out + h / deg

model = nn.ModuleList([GATLayer(feats, 8), GATLayer(8, 3)])
init(model, scale=0.4)
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for _ in range(6):
    h = F.elu(model[0](x))
    loss = F.nll_loss(F.log_softmax(model[1](h), dim=1), labels)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
'''

WORD2VEC = '''
class SkipGram(nn.Module):
    def __init__(self, vocab=20, d=6):
        super().__init__()
        self.inp = nn.Embedding(vocab, d, sparse=True)
        self.ctx = nn.Embedding(vocab, d, sparse=True)

    def forward(self, center, context, negatives):
        c = self.inp(center).unsqueeze(2)
        pos = F.logsigmoid(torch.bmm(self.ctx(context).unsqueeze(1), c).squeeze())
        neg = F.logsigmoid(-torch.bmm(self.ctx(negatives), c).squeeze(2)).sum(1)
        return -(pos + neg).mean()

model = init(SkipGram())
opt = torch.optim.SparseAdam(list(model.parameters()), lr=0.05)
rng = np.random.default_rng(21)
for _ in range(6):
    center = torch.tensor(rng.integers(0, 20, 12))
    context = torch.tensor(rng.integers(0, 20, 12))
    negatives = torch.tensor(rng.integers(0, 20, (12, 4)))
    loss = model(center, context, negatives)
    opt.zero_grad()
    loss.backward()
    assert model.inp.weight.grad.is_sparse
    opt.step()
    losses.append(loss.item())
'''

TOOLBOX = '''
import io
from torch.utils.checkpoint import checkpoint

class RoundSTE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return torch.round(x * 4) / 4

    @staticmethod
    def backward(ctx, g):
        return g

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(6, 12)
        self.b = nn.Sequential(nn.Linear(12, 12), nn.GELU(approximate="tanh"), nn.LayerNorm(12))
        self.c = nn.Linear(12, 2)

    def forward(self, x):
        h = RoundSTE.apply(torch.sigmoid(self.a(x)))
        h = checkpoint(self.b, h, use_reentrant=False)
        return self.c(h)

model = init(Net(), scale=0.4)
seen = []
model.b.register_forward_hook(lambda m, i, o: seen.append(o.detach().abs().sum().item()))
grads_out = []
model.c.register_full_backward_hook(lambda m, gi, go: grads_out.append(go[0].abs().sum().item()))
opt = torch.optim.Adamax(model.parameters(), lr=2e-2)
rng = np.random.default_rng(22)
X = torch.tensor(rng.standard_normal((24, 6)))
Y = torch.tensor(rng.standard_normal((24, 2)))
for step in range(6):
    opt.zero_grad()
    for chunk_x, chunk_y in zip(X.chunk(3), Y.chunk(3)):
        loss = F.smooth_l1_loss(model(chunk_x), chunk_y, beta=0.5) / 3
        loss.backward()
        losses.append(loss.item())
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5, error_if_nonfinite=True)
    opt.step()
    losses.append(norm.item())
    if step == 2:
        buf = io.BytesIO()
        torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, buf)
        buf.seek(0)
        state = torch.load(buf)
        model = init(Net(), seed=99)
        model.load_state_dict(state["model"])
        opt = torch.optim.Adamax(model.parameters(), lr=2e-2)
        opt.load_state_dict(state["opt"])
losses += seen + grads_out
'''

TIMESERIES = '''
class Forecaster(nn.Module):
    def __init__(self, h=8):
        super().__init__()
        self.conv = nn.Conv1d(1, h, kernel_size=3, dilation=2)
        self.cell = nn.LSTMCell(h, h)
        self.out = nn.Linear(h, 1)

    def forward(self, x):
        feats = F.relu(self.conv(F.pad(x.unsqueeze(1), (4, 0)))).transpose(1, 2)
        hx = cx = torch.zeros(x.size(0), self.cell.hidden_size)
        preds = []
        for t in range(feats.size(1)):
            hx, cx = self.cell(feats[:, t], (hx, cx))
            preds.append(self.out(hx))
        return torch.cat(preds, 1)

t = np.linspace(0, 6, 21)
series = torch.tensor(np.sin(t)[None, :] * np.linspace(0.5, 1.5, 4)[:, None])
model = init(Forecaster(), scale=0.4)
opt = torch.optim.SGD(model.parameters(), lr=0.3)
plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=0)
for _ in range(6):
    pred = model(series[:, :-1])
    loss = F.huber_loss(pred, series[:, 1:], delta=0.3)
    opt.zero_grad()
    loss.backward()
    opt.step()
    plateau.step(loss.item() + 1.0)
    losses += [loss.item(), opt.param_groups[0]["lr"]]
'''

WGAN_GP = '''
critic = init(nn.Sequential(nn.Linear(3, 16), nn.Softplus(), nn.Linear(16, 1)), seed=30)
opt = torch.optim.Adam(critic.parameters(), lr=1e-3, betas=(0.0, 0.9))
rng = np.random.default_rng(31)
for _ in range(6):
    real = torch.tensor(rng.standard_normal((8, 3)) + 1.0)
    fake = torch.tensor(rng.standard_normal((8, 3)))
    alpha = torch.tensor(rng.random((8, 1)))
    mixed = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
    score = critic(mixed)
    grads = torch.autograd.grad(outputs=score, inputs=mixed, grad_outputs=torch.ones_like(score),
                                create_graph=True, retain_graph=True)[0]
    penalty = ((grads.norm(2, dim=1) - 1) ** 2).mean()
    loss = critic(fake).mean() - critic(real).mean() + 10 * penalty
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), penalty.item()]
'''

BPTT_LM = '''
import math
class LM(nn.Module):
    def __init__(self, vocab=15, d=10):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.rnn = nn.LSTM(d, d, num_layers=2)
        self.dec = nn.Linear(d, vocab)
        self.dec.weight = self.emb.weight  # weight tying

    def forward(self, x, hidden):
        out, hidden = self.rnn(self.emb(x), hidden)
        return self.dec(out), hidden

model = init(LM(), scale=0.3)
assert model.dec.weight is model.emb.weight
opt = torch.optim.SGD(model.parameters(), lr=0.5)
corpus = torch.tensor(np.random.default_rng(32).integers(0, 15, 41))
hidden = (torch.zeros(2, 4, 10), torch.zeros(2, 4, 10))
stream = corpus[:40].view(4, 10).t().contiguous()  # (time, batch)
targets_all = corpus[1:41].view(4, 10).t().contiguous()
for epoch in range(2):
    hidden = tuple(h.zero_() for h in hidden)
    for start in range(0, 9, 3):
        hidden = tuple(h.detach() for h in hidden)
        logits, hidden = model(stream[start:start + 3], hidden)
        loss = F.cross_entropy(logits.view(-1, 15), targets_all[start:start + 3].reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        opt.step()
        losses += [loss.item(), math.exp(loss.item())]
'''

SWA_EMA = '''
from torch.optim.swa_utils import AveragedModel, SWALR, get_ema_multi_avg_fn, update_bn

model = init(nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 1)))
ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.9))
swa = AveragedModel(model)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
swa_sched = SWALR(opt, swa_lr=0.02, anneal_epochs=3, anneal_strategy="cos")
rng = np.random.default_rng(33)
X = torch.tensor(rng.standard_normal((24, 4)))
Y = X[:, :1] * 2 - X[:, 1:2]
loader = [(X[i:i + 8], Y[i:i + 8]) for i in range(0, 24, 8)]
for epoch in range(4):
    for xb, yb in loader:
        loss = F.mse_loss(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        ema.update_parameters(model)
        losses.append(loss.item())
    swa.update_parameters(model)
    swa_sched.step()
    losses.append(opt.param_groups[0]["lr"])
update_bn(loader, swa)
swa.eval(); ema.eval()
with torch.no_grad():
    losses += [F.mse_loss(swa(X), Y).item(), F.mse_loss(ema(X), Y).item(),
               swa.n_averaged.item()]
'''

MDN = '''
from torch.distributions import Categorical, MixtureSameFamily, Normal

class MDN(nn.Module):
    def __init__(self, k=3):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(1, 16), nn.Tanh())
        self.pi, self.mu, self.sigma = nn.Linear(16, k), nn.Linear(16, k), nn.Linear(16, k)

    def forward(self, x):
        h = self.body(x)
        return MixtureSameFamily(Categorical(logits=self.pi(h)),
                                 Normal(self.mu(h), F.softplus(self.sigma(h)) + 1e-3))

rng = np.random.default_rng(34)
x = torch.tensor(rng.uniform(-1, 1, (40, 1)))
y = torch.sin(3 * x) + torch.tensor(rng.standard_normal((40, 1))) * 0.1
model = init(MDN(), scale=0.5)
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for _ in range(6):
    dist = model(x)
    loss = -dist.log_prob(y.squeeze(1)).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), dist.mean.sum().item(), dist.variance.sum().item()]
'''

UNET = '''
class Down(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.GroupNorm(2, cout),
                                  nn.SiLU())

    def forward(self, x):
        return self.conv(x)

class UNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.d1, self.d2 = Down(2, 4), Down(4, 8)
        self.pool = nn.MaxPool2d(2)
        self.up = nn.ConvTranspose2d(8, 4, 2, stride=2)
        self.fuse = Down(8, 4)
        self.norm = nn.InstanceNorm2d(4, affine=True)
        self.out = nn.Conv2d(4, 1, 1)

    def forward(self, x):
        a = self.d1(x)
        b = self.d2(self.pool(a))
        up = self.up(b)
        side = F.interpolate(b, scale_factor=2, mode="bilinear", align_corners=False)
        h = self.fuse(torch.cat([a, up + side[:, :4]], 1))
        return self.out(self.norm(h))

rng = np.random.default_rng(35)
x = torch.tensor(rng.standard_normal((3, 2, 8, 8)))
target = (x[:, :1] > 0).to(x.dtype)
model = init(UNet(), scale=0.3)
opt = torch.optim.Adam(model.parameters(), lr=5e-3, weight_decay=1e-4)
for _ in range(6):
    logits = model(x)
    loss = F.binary_cross_entropy_with_logits(logits, target, pos_weight=torch.tensor([1.5]))
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
'''

VIT = '''
class ViT(nn.Module):
    def __init__(self, patch=4, d=16, classes=3):
        super().__init__()
        self.patch = nn.Conv2d(1, d, patch, stride=patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        self.pos = nn.Parameter(torch.zeros(1, 5, d))
        self.attn = nn.MultiheadAttention(d, 4, batch_first=True)
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
        self.head = nn.Linear(d, classes)

    def forward(self, img):
        tokens = self.patch(img).flatten(2).transpose(1, 2)
        tokens = torch.cat([self.cls.expand(img.size(0), -1, -1), tokens], 1) + self.pos
        h = self.norm1(tokens)
        attended, weights = self.attn(h, h, h, need_weights=True, average_attn_weights=True)
        tokens = tokens + attended
        tokens = tokens + self.mlp(self.norm2(tokens))
        return self.head(tokens[:, 0]), weights

rng = np.random.default_rng(36)
imgs = torch.tensor(rng.standard_normal((6, 1, 8, 8)))
labels = torch.tensor(rng.integers(0, 3, 6))
model = init(ViT(), scale=0.3)
opt = torch.optim.NAdam(model.parameters(), lr=5e-3)
sched = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=2)
for step in range(6):
    logits, weights = model(imgs)
    loss = F.cross_entropy(logits, labels)
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()
    losses += [loss.item(), weights.sum().item(), sched.get_last_lr()[0]]
'''

DP_SGD = '''
from torch.func import functional_call, grad, vmap

model = init(nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 2)))
params = {k: v.detach() for k, v in model.named_parameters()}
rng = np.random.default_rng(37)
X = torch.tensor(rng.standard_normal((12, 5)))
Y = torch.tensor(rng.integers(0, 2, 12))

def loss_of(p, x, y):
    return F.cross_entropy(functional_call(model, p, (x.unsqueeze(0),)), y.unsqueeze(0))

per_sample = vmap(grad(loss_of), in_dims=(None, 0, 0))
for _ in range(5):
    grads = per_sample(params, X, Y)
    norms = torch.sqrt(sum(g.flatten(1).pow(2).sum(1) for g in grads.values()))
    scale = (1.0 / (norms / 1.0).clamp(min=1.0)).view(-1, 1)
    noise = {k: torch.tensor(rng.standard_normal(tuple(v.shape)) * 0.01)
             for k, v in params.items()}
    params = {k: v - 0.5 * ((grads[k].flatten(1) * scale).view_as(grads[k]).mean(0) + noise[k])
              for k, v in params.items()}
    losses += [norms.max().item(), F.cross_entropy(functional_call(model, params, (X,)), Y).item()]
'''

NEWTON = '''
from torch.autograd.functional import hessian, hvp, jacobian

rng = np.random.default_rng(38)
A = torch.tensor(rng.standard_normal((6, 3)))
b = torch.tensor(rng.standard_normal(6))

def objective(w):
    r = A @ w - b
    return (r ** 2).sum() + 0.1 * (w ** 4).sum() + torch.logsumexp(w, 0)

w = torch.zeros(3)
for _ in range(4):
    g = jacobian(objective, w)
    H = hessian(objective, w)
    _, Hv = hvp(objective, w, g)
    step = torch.linalg.solve(H, g)
    w = w - step
    losses += [objective(w).item(), Hv.norm().item(), torch.linalg.eigvalsh(H).min().item()]
'''


PROGRAMS = {name.lower(): source for name, source in [
    ("VAE", VAE),
    ("GAN", GAN),
    ("RESNET", RESNET),
    ("SEQ2SEQ", SEQ2SEQ),
    ("TRANSFORMER", TRANSFORMER),
    ("PINN", PINN),
    ("MAML", MAML),
    ("CONTRASTIVE", CONTRASTIVE),
    ("FLOW", FLOW),
    ("GNN", GNN),
    ("WORD2VEC", WORD2VEC),
    ("TOOLBOX", TOOLBOX),
    ("TIMESERIES", TIMESERIES),
    ("WGAN_GP", WGAN_GP),
    ("BPTT_LM", BPTT_LM),
    ("SWA_EMA", SWA_EMA),
    ("MDN", MDN),
    ("UNET", UNET),
    ("VIT", VIT),
    ("DP_SGD", DP_SGD),
    ("NEWTON", NEWTON),
]}

# programs whose last logged figure is not below their first (they end on another figure:
# a perplexity, an eval metric, a variance, a learning rate)
NOT_TRAINING = {"bptt_lm", "mdn", "newton", "resnet", "timeseries"}


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_program_matches_torch(name):
    assert_matches_torch(PROGRAMS[name], trains=name not in NOT_TRAINING)
