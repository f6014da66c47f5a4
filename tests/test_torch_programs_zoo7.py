"""A seventh set of real-world PyTorch programs run unchanged with `torch` mapped to flowgrad
(the shim and runner of test_torch_programs.py), each giving torch's losses, gradient norms and
final parameters step for step in float64: a DiT block with adaLN-Zero and classifier-free label
dropout, a Perceiver's latent cross-attention over Fourier-featured inputs, RetNet's retention
(parallel, recurrent and chunkwise forms), RWKV's time mixing by its stable WKV recurrence, an
E(n)-equivariant GNN, SchNet with force matching, a C51 distributional DQN with noisy nets, and
TD3 with target smoothing, delayed actor updates and _foreach Polyak averaging. Weights, data
and noise come from NumPy."""
import pytest
from test_torch_programs import assert_matches_torch

# DiT (Peebles & Xie): patchify by a strided conv, sinusoidal timestep + class embeddings (a null
# class for classifier-free guidance, dropped by a given mask), adaLN-Zero modulation of a
# LayerNorm without affine, unpatchify by einsum, and a CFG-guided prediction
DIT_ADALN = '''
import math

def timestep_embedding(t, dim, max_period=10000):
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(0, half, dtype=torch.float64) / half)
    args = t[:, None].double() * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)

def modulate(x, shift, scale):
    return x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)

class DiTBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.norm1 = nn.LayerNorm(d, elementwise_affine=False, eps=1e-6)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(d, elementwise_affine=False, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(approximate="tanh"),
                                 nn.Linear(2 * d, d))
        self.ada = nn.Sequential(nn.SiLU(), nn.Linear(d, 6 * d))

    def forward(self, x, c):
        s1, sc1, g1, s2, sc2, g2 = self.ada(c).chunk(6, dim=1)
        h = modulate(self.norm1(x), s1, sc1)
        x = x + g1.unsqueeze(1) * self.attn(h, h, h, need_weights=False)[0]
        return x + g2.unsqueeze(1) * self.mlp(modulate(self.norm2(x), s2, sc2))

class DiT(nn.Module):
    def __init__(self, p=2, c=2, d=8, classes=3):
        super().__init__()
        self.p, self.c = p, c
        self.embed = nn.Conv2d(c, d, p, stride=p)
        self.pos = nn.Parameter(torch.zeros(1, 4, d))
        self.t_mlp = nn.Sequential(nn.Linear(8, d), nn.SiLU(), nn.Linear(d, d))
        self.y_emb = nn.Embedding(classes + 1, d)
        self.blocks = nn.ModuleList([DiTBlock(d, 2) for _ in range(2)])
        self.final_norm = nn.LayerNorm(d, elementwise_affine=False, eps=1e-6)
        self.final_ada = nn.Sequential(nn.SiLU(), nn.Linear(d, 2 * d))
        self.final = nn.Linear(d, p * p * c)

    def forward(self, x, t, y):
        x = self.embed(x).flatten(2).transpose(1, 2) + self.pos
        c = self.t_mlp(timestep_embedding(t, 8)) + self.y_emb(y)
        for b in self.blocks:
            x = b(x, c)
        shift, scale = self.final_ada(c).chunk(2, dim=1)
        x = self.final(modulate(self.final_norm(x), shift, scale))
        n, h = x.shape[0], 2
        x = x.reshape(n, h, h, self.p, self.p, self.c)
        return torch.einsum("nhwpqc->nchpwq", x).reshape(n, self.c, h * self.p, h * self.p)

model = init(DiT(), seed=700, scale=0.25)
opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
rng = np.random.default_rng(701)
betas = torch.linspace(1e-4, 0.2, 20)
abar = torch.cumprod(1 - betas, 0)
x0 = torch.tensor(rng.standard_normal((4, 2, 4, 4))) * 0.5
y = torch.tensor([0, 1, 2, 1])
for step in range(6):
    t = torch.tensor(rng.integers(0, 20, 4))
    noise = torch.tensor(rng.standard_normal((4, 2, 4, 4)))
    drop = torch.tensor(rng.random(4) < 0.25)
    yy = torch.where(drop, torch.full_like(y, 3), y)
    a = abar[t].view(-1, 1, 1, 1)
    xt = a.sqrt() * x0 + (1 - a).sqrt() * noise
    loss = F.mse_loss(model(xt, t, yy), noise)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), float(model.blocks[0].ada[1].weight.grad.norm())]
with torch.no_grad():
    t = torch.full((4,), 10, dtype=torch.long)
    cond = model(x0, t, y)
    uncond = model(x0, t, torch.full_like(y, 3))
    losses.append(float((uncond + 4.0 * (cond - uncond)).square().mean()))
losses.append(loss.item())
'''

# Perceiver (Jaegle et al.): a learned latent array cross-attends to a long input carrying
# Fourier position features (linspace, meshgrid), with a key padding mask, then a latent
# self-attention tower; the classifier averages the latents
PERCEIVER = '''
import math

def fourier_features(h, w, bands):
    ys, xs = torch.meshgrid(torch.linspace(-1, 1, h), torch.linspace(-1, 1, w), indexing="ij")
    pos = torch.stack([ys, xs], dim=-1).reshape(-1, 2)
    freqs = torch.linspace(1.0, 4.0, bands)
    ang = math.pi * pos[..., None] * freqs
    return torch.cat([pos, ang.sin().flatten(1), ang.cos().flatten(1)], dim=-1)

class Perceiver(nn.Module):
    def __init__(self, in_ch=2, latents=4, d=8, classes=3):
        super().__init__()
        self.latents = nn.Parameter(torch.randn(latents, d))
        kv = in_ch + 2 + 2 * 2 * 3
        self.ln_in, self.ln_lat = nn.LayerNorm(kv), nn.LayerNorm(d)
        self.cross = nn.MultiheadAttention(d, 1, kdim=kv, vdim=kv, batch_first=True)
        self.self_attn = nn.TransformerEncoderLayer(d, 2, 16, dropout=0.0, batch_first=True,
                                                    norm_first=True)
        self.head = nn.Linear(d, classes)

    def forward(self, img, pad):
        b, c, h, w = img.shape
        x = img.flatten(2).transpose(1, 2)
        x = torch.cat([x, fourier_features(h, w, 3).expand(b, -1, -1)], dim=-1)
        x = self.ln_in(x)
        lat = self.latents.unsqueeze(0).expand(b, -1, -1)
        q = self.ln_lat(lat)
        attn, weights = self.cross(q, x, x, key_padding_mask=pad)
        lat = lat + attn
        for _ in range(2):  # weight sharing across depth, as in the paper
            lat = self.self_attn(lat)
        return self.head(lat.mean(1)), weights

model = init(Perceiver(), seed=702, scale=0.3)
opt = torch.optim.Adam(model.parameters(), lr=5e-3)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
rng = np.random.default_rng(703)
img = torch.tensor(rng.standard_normal((5, 2, 3, 4)))
y = torch.tensor([0, 1, 2, 0, 1])
img[:, 0] += y.double().view(-1, 1, 1)
pad = torch.zeros(5, 12, dtype=torch.bool)
pad[1, -3:] = True
pad[3, :2] = True
for step in range(6):
    logits, weights = model(img, pad)
    loss = F.cross_entropy(logits, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()
    losses += [loss.item(), float(weights[1, :, -3:].sum()), float(model.latents.grad.norm())]
losses.append(loss.item())
'''

# RetNet (Sun et al.): multi-scale retention with per-head decays, the parallel form against the
# recurrent state update and the chunkwise form, a GroupNorm over heads and a swish gate
RETNET = '''
class Retention(nn.Module):
    def __init__(self, d=8, heads=2):
        super().__init__()
        self.h, self.hd = heads, d // heads
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.g = nn.Linear(d, d, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.gn = nn.GroupNorm(heads, d, affine=False)
        gamma = 1 - 2.0 ** (-5 - torch.arange(heads, dtype=torch.float64))
        self.register_buffer("gamma", gamma)

    def split(self, x):
        B, T, _ = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.h, self.hd).unbind(2)
        return q.transpose(1, 2), k.transpose(1, 2) * self.hd ** -0.5, v.transpose(1, 2)

    def parallel(self, x):
        q, k, v = self.split(x)
        T = x.shape[1]
        n = torch.arange(T)
        diff = (n[:, None] - n[None, :]).double()
        D = self.gamma.view(-1, 1, 1) ** diff.clamp(min=0) * (diff >= 0)
        return (q @ k.transpose(-1, -2) * D) @ v

    def recurrent(self, x):
        q, k, v = self.split(x)
        B, H, T, hd = q.shape
        S = x.new_zeros(B, H, hd, hd)
        outs = []
        for t in range(T):
            S = self.gamma.view(1, -1, 1, 1) * S + k[:, :, t, :, None] * v[:, :, t, None, :]
            outs.append(torch.einsum("bhd,bhde->bhe", q[:, :, t], S))
        return torch.stack(outs, 2)

    def chunkwise(self, x, chunk=2):
        q, k, v = self.split(x)
        B, H, T, hd = q.shape
        g = self.gamma.view(1, -1, 1, 1)
        n = torch.arange(chunk)
        diff = (n[:, None] - n[None, :]).double()
        D = self.gamma.view(-1, 1, 1) ** diff.clamp(min=0) * (diff >= 0)
        inner_decay = self.gamma.view(-1, 1) ** (n + 1).double()
        S = x.new_zeros(B, H, hd, hd)
        outs = []
        for s in range(0, T, chunk):
            qc, kc, vc = q[:, :, s:s + chunk], k[:, :, s:s + chunk], v[:, :, s:s + chunk]
            inner = (qc @ kc.transpose(-1, -2) * D) @ vc
            cross = (qc @ S) * inner_decay[None, :, :, None]
            outs.append(inner + cross)
            decay_k = (self.gamma.view(-1, 1) ** (chunk - 1 - n).double())[None, :, :, None]
            S = g ** chunk * S + (kc * decay_k).transpose(-1, -2) @ vc
        return torch.cat(outs, 2)

    def forward(self, x, mode="parallel"):
        B, T, C = x.shape
        y = getattr(self, mode)(x).transpose(1, 2).reshape(B * T, C)
        y = self.gn(y).view(B, T, C)
        return self.o(F.silu(self.g(x)) * y)

class RetNetLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(7, 8)
        self.ret, self.ln1, self.ln2 = Retention(), nn.LayerNorm(8), nn.LayerNorm(8)
        self.ffn = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8))
        self.head = nn.Linear(8, 7)

    def forward(self, idx, mode="parallel"):
        x = self.emb(idx)
        x = x + self.ret(self.ln1(x), mode)
        return self.head(x + self.ffn(self.ln2(x)))

model = init(RetNetLM(), seed=704, scale=0.4)
opt = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.9, 0.98), weight_decay=0.05)
rng = np.random.default_rng(705)
data = torch.tensor(rng.integers(0, 7, (3, 7)))
for step in range(6):
    logits = model(data[:, :-1])
    loss = F.cross_entropy(logits.transpose(1, 2), data[:, 1:])
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), float(model.ret.qkv.weight.grad.norm())]
with torch.no_grad():
    p = model(data[:, :-1])
    for mode in ("recurrent", "chunkwise"):
        losses.append(float((model(data[:, :-1], mode) - p).abs().max() < 1e-10))
losses.append(loss.item())
'''

# RWKV-4 time mixing: token shift by ZeroPad2d, the WKV recurrence in its numerically stable
# running-max form, receptance gating, and channel mixing with squared ReLU
RWKV = '''
class TimeMix(nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.shift = nn.ZeroPad2d((0, 0, 1, -1))
        self.mix_k = nn.Parameter(torch.ones(1, 1, d))
        self.mix_v = nn.Parameter(torch.ones(1, 1, d))
        self.mix_r = nn.Parameter(torch.ones(1, 1, d))
        self.decay = nn.Parameter(torch.zeros(d))
        self.first = nn.Parameter(torch.zeros(d))
        self.k, self.v, self.r = (nn.Linear(d, d, bias=False) for _ in range(3))
        self.o = nn.Linear(d, d, bias=False)

    def forward(self, x):
        B, T, C = x.shape
        xx = self.shift(x)
        k = self.k(x * self.mix_k + xx * (1 - self.mix_k))
        v = self.v(x * self.mix_v + xx * (1 - self.mix_v))
        r = torch.sigmoid(self.r(x * self.mix_r + xx * (1 - self.mix_r)))
        w, u = -torch.exp(self.decay), self.first
        aa = torch.zeros(B, C)
        bb = torch.zeros(B, C)
        pp = torch.full((B, C), -1e38)
        out = []
        for t in range(T):
            kt, vt = k[:, t], v[:, t]
            ww = u + kt
            p = torch.maximum(pp, ww)
            e1, e2 = torch.exp(pp - p), torch.exp(ww - p)
            out.append((e1 * aa + e2 * vt) / (e1 * bb + e2))
            ww = pp + w
            p = torch.maximum(ww, kt)
            e1, e2 = torch.exp(ww - p), torch.exp(kt - p)
            aa, bb, pp = e1 * aa + e2 * vt, e1 * bb + e2, p
        return self.o(r * torch.stack(out, 1))

class ChannelMix(nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.shift = nn.ZeroPad2d((0, 0, 1, -1))
        self.mix_k = nn.Parameter(torch.ones(1, 1, d))
        self.k, self.v, self.r = nn.Linear(d, 16, bias=False), nn.Linear(16, d, bias=False), \\
            nn.Linear(d, d, bias=False)

    def forward(self, x):
        xx = self.shift(x)
        k = torch.square(torch.relu(self.k(x * self.mix_k + xx * (1 - self.mix_k))))
        return torch.sigmoid(self.r(x)) * self.v(k)

class RWKV(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(6, 8)
        self.ln0, self.ln1, self.ln2, self.lnf = (nn.LayerNorm(8) for _ in range(4))
        self.att, self.ffn = TimeMix(), ChannelMix()
        self.head = nn.Linear(8, 6, bias=False)

    def forward(self, idx):
        x = self.ln0(self.emb(idx))
        x = x + self.att(self.ln1(x))
        x = x + self.ffn(self.ln2(x))
        return self.head(self.lnf(x))

model = RWKV()
init(model, seed=706, scale=0.3)
with torch.no_grad():
    model.att.decay.copy_(torch.linspace(-2, 1, 8))
    for m in (model.att.mix_k, model.att.mix_v, model.att.mix_r, model.ffn.mix_k):
        m.copy_(torch.tensor(np.linspace(0.2, 0.9, 8)))
opt = torch.optim.Adam(model.parameters(), lr=8e-3, eps=1e-8)
rng = np.random.default_rng(707)
data = torch.tensor(rng.integers(0, 6, (2, 8)))
for step in range(6):
    loss = F.cross_entropy(model(data[:, :-1]).reshape(-1, 6), data[:, 1:].flatten())
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), float(model.att.decay.grad.norm()), float(model.att.first.grad.sum())]
losses.append(loss.item())
'''

# EGNN (Satorras et al.): messages from squared distances, coordinate updates along relative
# vectors by index_add_, invariant readout; the output is checked for E(n) equivariance under a
# rotation and translation
EGNN = '''
class EGCL(nn.Module):
    def __init__(self, h=6):
        super().__init__()
        self.edge = nn.Sequential(nn.Linear(2 * h + 1, h), nn.SiLU(), nn.Linear(h, h), nn.SiLU())
        self.coord = nn.Sequential(nn.Linear(h, h), nn.SiLU(), nn.Linear(h, 1, bias=False))
        self.node = nn.Sequential(nn.Linear(2 * h, h), nn.SiLU(), nn.Linear(h, h))

    def forward(self, h, x, row, col):
        rel = x[row] - x[col]
        d2 = (rel ** 2).sum(-1, keepdim=True)
        m = self.edge(torch.cat([h[row], h[col], d2], dim=-1))
        trans = rel * self.coord(m)
        count = torch.zeros(x.shape[0], 1).index_add_(0, row, torch.ones(len(row), 1))
        x = x + torch.zeros_like(x).index_add_(0, row, trans) / count.clamp(min=1)
        agg = torch.zeros_like(h).index_add_(0, row, m)
        return h + self.node(torch.cat([h, agg], dim=-1)), x

class EGNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Linear(3, 6)
        self.layers = nn.ModuleList([EGCL(), EGCL()])
        self.out = nn.Linear(6, 1)

    def forward(self, feats, x, row, col, batch, graphs):
        h = self.emb(feats)
        for layer in self.layers:
            h, x = layer(h, x, row, col)
        pooled = torch.zeros(graphs, 6).index_add_(0, batch, h)
        return self.out(pooled).squeeze(-1), x

rng = np.random.default_rng(708)
sizes = [4, 5, 3]
batch = torch.tensor(np.repeat(np.arange(3), sizes))
edges, off = [], 0
for n in sizes:
    edges += [(off + i, off + j) for i in range(n) for j in range(n) if i != j]
    off += n
row, col = torch.tensor(edges).T
feats = torch.tensor(rng.standard_normal((12, 3)))
pos = torch.tensor(rng.standard_normal((12, 3)))
target = torch.tensor([1.0, -0.5, 0.3])
model = init(EGNN(), seed=709, scale=0.3)
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(6):
    pred, _ = model(feats, pos, row, col, batch, 3)
    loss = F.smooth_l1_loss(pred, target, beta=0.5)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), float(model.layers[0].coord[2].weight.grad.norm())]
with torch.no_grad():
    Q, _ = torch.linalg.qr(torch.tensor(rng.standard_normal((3, 3))))
    shift = torch.tensor([0.5, -1.0, 2.0])
    p1, x1 = model(feats, pos, row, col, batch, 3)
    p2, x2 = model(feats, pos @ Q.T + shift, row, col, batch, 3)
    losses += [float((p1 - p2).abs().max() < 1e-10),
               float((x1 @ Q.T + shift - x2).abs().max() < 1e-10)]
losses.append(loss.item())
'''

# SchNet (Schütt et al.): Gaussian radial basis on interatomic distances, a cosine cutoff,
# continuous-filter convolutions with shifted softplus, energies summed per molecule, forces as
# -dE/dx by autograd.grad(create_graph=True), and a joint energy + force matching loss
SCHNET = '''
import math

def ssp(x):
    return F.softplus(x) - math.log(2.0)

class CFConv(nn.Module):
    def __init__(self, h=6, rbf=8):
        super().__init__()
        self.filt = nn.Sequential(nn.Linear(rbf, h), nn.Softplus(), nn.Linear(h, h))
        self.lin1, self.lin2 = nn.Linear(h, h, bias=False), nn.Linear(h, h)

    def forward(self, h, rbf, cut, src, dst):
        W = self.filt(rbf) * cut.unsqueeze(-1)
        msg = self.lin1(h)[src] * W
        agg = torch.zeros_like(h).index_add(0, dst, msg)
        return self.lin2(ssp(agg))

class SchNet(nn.Module):
    def __init__(self, cutoff=2.5):
        super().__init__()
        self.cutoff = cutoff
        self.emb = nn.Embedding(3, 6)
        self.register_buffer("mu", torch.linspace(0, cutoff, 8))
        self.convs = nn.ModuleList([CFConv(), CFConv()])
        self.out = nn.Sequential(nn.Linear(6, 4), nn.Softplus(), nn.Linear(4, 1))

    def forward(self, z, pos, src, dst, batch, n_mol):
        d = (pos[src] - pos[dst]).norm(dim=-1)
        rbf = torch.exp(-4.0 * (d.unsqueeze(-1) - self.mu) ** 2)
        cut = 0.5 * (torch.cos(d * math.pi / self.cutoff) + 1.0) * (d < self.cutoff)
        h = self.emb(z)
        for conv in self.convs:
            h = h + conv(h, rbf, cut, src, dst)
        e = self.out(h).squeeze(-1)
        return torch.zeros(n_mol).scatter_add(0, batch, e)

rng = np.random.default_rng(710)
sizes = [3, 4]
batch = torch.tensor(np.repeat(np.arange(2), sizes))
pairs, off = [], 0
for n in sizes:
    pairs += [(off + i, off + j) for i in range(n) for j in range(n) if i != j]
    off += n
src, dst = torch.tensor(pairs).T.contiguous()
z = torch.tensor([0, 1, 1, 2, 0, 1, 1])
pos0 = torch.tensor(rng.standard_normal((7, 3)))
E_ref = torch.tensor([-1.0, 0.5])
F_ref = torch.tensor(rng.standard_normal((7, 3))) * 0.3
model = init(SchNet(), seed=711, scale=0.3)
opt = torch.optim.Adam(model.parameters(), lr=5e-3, amsgrad=True)
for step in range(6):
    pos = pos0.clone().requires_grad_(True)
    E = model(z, pos, src, dst, batch, 2)
    forces = -torch.autograd.grad(E.sum(), pos, create_graph=True)[0]
    loss = F.mse_loss(E, E_ref) + 10.0 * F.mse_loss(forces, F_ref)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), float(forces.norm()), float(model.convs[0].filt[0].weight.grad.norm())]
losses.append(loss.item())
'''

# Rainbow's pieces: a C51 distributional head on a dueling net with factorised NoisyLinear layers
# (noise set from NumPy into buffers), the categorical projection of the Bellman target by
# floor/ceil and index_add_ on the flattened support, a double-DQN target net by load_state_dict
C51_NOISY = '''
import math

class NoisyLinear(nn.Module):
    def __init__(self, i, o, sigma0=0.5):
        super().__init__()
        self.i, self.o = i, o
        self.w_mu, self.w_sigma = nn.Parameter(torch.empty(o, i)), nn.Parameter(torch.empty(o, i))
        self.b_mu, self.b_sigma = nn.Parameter(torch.empty(o)), nn.Parameter(torch.empty(o))
        self.register_buffer("eps_in", torch.zeros(i))
        self.register_buffer("eps_out", torch.zeros(o))

    @staticmethod
    def f(x):
        return x.sign() * x.abs().sqrt()

    def reset_noise(self, rng):
        self.eps_in.copy_(self.f(torch.tensor(rng.standard_normal(self.i))))
        self.eps_out.copy_(self.f(torch.tensor(rng.standard_normal(self.o))))

    def forward(self, x):
        if self.training:
            w = self.w_mu + self.w_sigma * torch.outer(self.eps_out, self.eps_in)
            return F.linear(x, w, self.b_mu + self.b_sigma * self.eps_out)
        return F.linear(x, self.w_mu, self.b_mu)

class C51(nn.Module):
    def __init__(self, s=4, a=3, atoms=11):
        super().__init__()
        self.a, self.atoms = a, atoms
        self.body = nn.Sequential(nn.Linear(s, 16), nn.ReLU())
        self.value = NoisyLinear(16, atoms)
        self.adv = NoisyLinear(16, a * atoms)

    def forward(self, x, log=False):
        h = self.body(x)
        v = self.value(h).view(-1, 1, self.atoms)
        adv = self.adv(h).view(-1, self.a, self.atoms)
        q = v + adv - adv.mean(1, keepdim=True)
        return F.log_softmax(q, -1) if log else F.softmax(q, -1)

    def reset_noise(self, rng):
        self.value.reset_noise(rng)
        self.adv.reset_noise(rng)

v_min, v_max, atoms = -5.0, 5.0, 11
support = torch.linspace(v_min, v_max, atoms)
dz = (v_max - v_min) / (atoms - 1)
online, target = C51(), C51()
init(online, seed=712, scale=0.3)
target.load_state_dict(online.state_dict())
opt = torch.optim.Adam(online.parameters(), lr=5e-3, eps=1.5e-4)
rng = np.random.default_rng(713)
B = 8
for step in range(6):
    online.reset_noise(rng)
    target.reset_noise(rng)
    s = torch.tensor(rng.standard_normal((B, 4)))
    s2 = torch.tensor(rng.standard_normal((B, 4)))
    a = torch.tensor(rng.integers(0, 3, B))
    r = torch.tensor(rng.standard_normal(B)).clamp(-2, 2)
    done = torch.tensor(rng.random(B) < 0.3)
    with torch.no_grad():
        a2 = (online(s2) * support).sum(-1).argmax(1)
        p2 = target(s2)[torch.arange(B), a2]
        Tz = (r.unsqueeze(1) + 0.9 * (~done).double().unsqueeze(1) * support).clamp(v_min, v_max)
        b = (Tz - v_min) / dz
        l, u = b.floor().long(), b.ceil().long()
        l[(u > 0) & (l == u)] -= 1
        u[(l < atoms - 1) & (l == u)] += 1
        m = torch.zeros(B, atoms)
        offset = (torch.arange(B) * atoms).unsqueeze(1).expand(B, atoms)
        m.view(-1).index_add_(0, (l + offset).view(-1), (p2 * (u.double() - b)).view(-1))
        m.view(-1).index_add_(0, (u + offset).view(-1), (p2 * (b - l.double())).view(-1))
    logp = online(s, log=True)[range(B), a]
    loss = -(m * logp).sum(1).mean()
    opt.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(online.parameters(), 10.0)
    opt.step()
    if step % 3 == 2:
        target.load_state_dict(online.state_dict())
    losses += [loss.item(), float(m.sum()), float(online.adv.w_sigma.grad.norm())]
online.eval()
with torch.no_grad():
    losses += (online(s) * support).sum(-1).argmax(1).tolist()
losses.append(loss.item())
'''

# TD3 (Fujimoto et al.): twin critics with min-clipped double Q, target policy smoothing by
# clipped noise (from NumPy), delayed actor updates, and Polyak averaging by torch._foreach_lerp_
# / _foreach_mul_ + _foreach_add_ on the target networks
TD3 = '''
import copy

class Actor(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, 2), nn.Tanh())

    def forward(self, s):
        return 2.0 * self.net(s)

class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.q1 = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 1))
        self.q2 = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 1))

    def forward(self, s, a):
        sa = torch.cat([s, a], 1)
        return self.q1(sa), self.q2(sa)

actor, critic = init(Actor(), seed=714, scale=0.3), init(Critic(), seed=715, scale=0.3)
actor_t, critic_t = copy.deepcopy(actor), copy.deepcopy(critic)
for p in [*actor_t.parameters(), *critic_t.parameters()]:
    p.requires_grad_(False)
a_opt = torch.optim.Adam(actor.parameters(), lr=3e-3)
c_opt = torch.optim.Adam(critic.parameters(), lr=3e-3)
rng = np.random.default_rng(716)
tau, gamma = 0.05, 0.99
for it in range(8):
    s = torch.tensor(rng.standard_normal((10, 3)))
    a = torch.tensor(rng.uniform(-2, 2, (10, 2)))
    r = -(s ** 2).sum(1, keepdim=True) - 0.1 * (a ** 2).sum(1, keepdim=True)
    s2 = torch.tensor(rng.standard_normal((10, 3)))
    nd = torch.tensor(rng.random((10, 1)) > 0.1).double()
    with torch.no_grad():
        noise = (torch.tensor(rng.standard_normal((10, 2))) * 0.2).clamp(-0.5, 0.5)
        a2 = (actor_t(s2) + noise).clamp(-2.0, 2.0)
        q1t, q2t = critic_t(s2, a2)
        y = r + nd * gamma * torch.min(q1t, q2t)
    q1, q2 = critic(s, a)
    c_loss = F.mse_loss(q1, y) + F.mse_loss(q2, y)
    c_opt.zero_grad()
    c_loss.backward()
    c_opt.step()
    losses += [c_loss.item()]
    if it % 2 == 1:
        a_loss = -critic(s, actor(s))[0].mean()
        a_opt.zero_grad()
        a_loss.backward()
        a_opt.step()
        losses += [a_loss.item(), float(critic.q1[0].weight.grad.norm())]
        with torch.no_grad():
            torch._foreach_lerp_(list(critic_t.parameters()), list(critic.parameters()), tau)
            at, ao = list(actor_t.parameters()), list(actor.parameters())
            torch._foreach_mul_(at, 1 - tau)
            torch._foreach_add_(at, ao, alpha=tau)
losses += [float(sum(p.sum() for p in critic_t.parameters())),
           float(sum(p.sum() for p in actor_t.parameters()))]
'''


PROGRAMS = {name.lower(): source for name, source in [
    ("DIT_ADALN", DIT_ADALN),
    ("PERCEIVER", PERCEIVER),
    ("RETNET", RETNET),
    ("RWKV", RWKV),
    ("EGNN", EGNN),
    ("SCHNET", SCHNET),
    ("C51_NOISY", C51_NOISY),
    ("TD3", TD3),
]}

# programs whose last logged figure is not below their first (a loss under fresh noise, a
# target net's parameter sum)
NOT_TRAINING = {"c51_noisy", "td3"}


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_program_matches_torch(name):
    assert_matches_torch(PROGRAMS[name], trains=name not in NOT_TRAINING)
