"""More real-world PyTorch programs run unchanged with `torch` mapped to flowgrad
(the shim and runner of test_torch_programs.py), each giving torch's figures step for step:
a mixture of experts routed by topk and index_add_, LoRA adapters through
register_parametrization (frozen base, parameter groups, merged on removal), a CTC speech
model (Conv1d + bidirectional GRU), an nn.Transformer seq2seq with masks and label
smoothing, a VQ-VAE (cdist codebook, straight-through, EMA updates in no_grad), a spatial
transformer (affine_grid + grid_sample), a pruned weight-normed TCN, a PointNet with masked
max pooling and a focal loss, CLIP with a learned 0-d logit scale over EmbeddingBag, a model
ensemble by stack_module_state + vmap(grad), and custom autograd Functions (a
non-differentiable output, a gradient penalty through them, gradcheck). Weights and data come
from NumPy, so both runs start from the same numbers."""
import pytest
from test_torch_programs import assert_matches_torch

MOE = '''
class MoE(nn.Module):
    def __init__(self, d=8, hidden=12, experts=4, k=2):
        super().__init__()
        self.gate = nn.Linear(d, experts, bias=False)
        self.w1 = nn.Parameter(torch.empty(experts, d, hidden))
        self.w2 = nn.Parameter(torch.empty(experts, hidden, d))
        self.k, self.experts = k, experts

    def forward(self, x):
        logits = self.gate(x)
        probs = logits.softmax(-1)
        top_p, top_i = probs.topk(self.k, dim=-1)
        top_p = top_p / top_p.sum(-1, keepdim=True)
        out = torch.zeros_like(x)
        for e in range(self.experts):
            rows, slot = (top_i == e).nonzero(as_tuple=True)
            if rows.numel() == 0:
                continue
            h = F.gelu(x[rows] @ self.w1[e]) @ self.w2[e]
            out.index_add_(0, rows, h * top_p[rows, slot].unsqueeze(-1))
        load = F.one_hot(top_i[:, 0], self.experts).float().mean(0)
        aux = self.experts * (load * probs.mean(0)).sum()
        return out, aux

rng = np.random.default_rng(11)
model = init(MoE(), seed=11)
head = init(nn.Linear(8, 3), seed=12)
opt = torch.optim.Adam(list(model.parameters()) + list(head.parameters()), lr=5e-3)
x = torch.tensor(rng.standard_normal((24, 8)))
y = torch.tensor(rng.integers(0, 3, 24))
for _ in range(6):
    h, aux = model(x)
    loss = F.cross_entropy(head(h + x), y) + 0.01 * aux
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    losses.append(aux.item())
'''

LORA = '''
import torch.nn.utils.parametrize as P

class LoRA(nn.Module):
    def __init__(self, fan_out, fan_in, rank=2, alpha=4.0):
        super().__init__()
        self.A = nn.Parameter(torch.zeros(rank, fan_in))
        self.B = nn.Parameter(torch.zeros(fan_out, rank))
        self.scale = alpha / rank

    def forward(self, W):
        return W + (self.B @ self.A) * self.scale

base = init(nn.Sequential(nn.Linear(6, 10), nn.Tanh(), nn.Linear(10, 2)), seed=13)
for p in base.parameters():
    p.requires_grad_(False)
for layer in (base[0], base[2]):
    P.register_parametrization(layer, "weight", LoRA(*layer.weight.shape))
    with torch.no_grad():
        lora = layer.parametrizations.weight[0]
        noise = np.random.default_rng(14).standard_normal(tuple(lora.A.shape))
        lora.A.copy_(torch.tensor(noise * 0.1))
trainable = [p for n, p in base.named_parameters() if p.requires_grad]
assert len(trainable) == 4, [n for n, _ in base.named_parameters()]
named = list(base.named_parameters())
opt = torch.optim.AdamW([{"params": [p for n, p in named if n.endswith(".A")], "lr": 1e-2},
                         {"params": [p for n, p in named if n.endswith(".B")],
                          "weight_decay": 0.0}],
                        lr=2e-2, weight_decay=0.05)
rng = np.random.default_rng(15)
x = torch.tensor(rng.standard_normal((32, 6)))
y = torch.tensor(rng.standard_normal((32, 2)))
for _ in range(6):
    loss = F.mse_loss(base(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
with torch.no_grad():
    merged = base[0].weight.clone()
P.remove_parametrizations(base[0], "weight", leave_parametrized=True)
losses.append(float((base[0].weight - merged).abs().max()))
losses.append(float(base[0].weight.sum()))
'''

CTC = '''
class Speech(nn.Module):
    def __init__(self, feats=5, hidden=8, vocab=6):
        super().__init__()
        self.conv = nn.Conv1d(feats, hidden, 3, padding=1)
        self.rnn = nn.GRU(hidden, hidden, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * hidden, vocab)

    def forward(self, x):  # (B, T, F)
        h = F.relu(self.conv(x.transpose(1, 2))).transpose(1, 2)
        h, _ = self.rnn(h)
        return self.out(h).log_softmax(-1).transpose(0, 1)  # (T, B, C)

rng = np.random.default_rng(16)
model = init(Speech(), seed=16)
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
x = torch.tensor(rng.standard_normal((3, 12, 5)))
input_lengths = torch.tensor([12, 10, 7])
target_lengths = torch.tensor([4, 3, 2])
targets = torch.tensor(rng.integers(1, 6, (3, 4)))
ctc = nn.CTCLoss(blank=0, zero_infinity=True)
for _ in range(6):
    loss = ctc(model(x), targets, input_lengths, target_lengths)
    opt.zero_grad()
    loss.backward()
    nn.utils.clip_grad_value_(model.parameters(), 0.5)
    opt.step()
    losses.append(loss.item())
flat = torch.cat([targets[i, :n] for i, n in enumerate(target_lengths.tolist())])
losses.append(F.ctc_loss(model(x), flat, input_lengths, target_lengths, reduction="sum").item())
'''

SEQ2SEQ_TRANSFORMER = '''
model = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                       dim_feedforward=16, dropout=0.0, batch_first=True, norm_first=True)
emb, out = nn.Embedding(9, 8, padding_idx=0), nn.Linear(8, 9)
for i, m in enumerate((model, emb, out)):
    init(m, seed=20 + i, scale=0.3)
params = list(model.parameters()) + list(emb.parameters()) + list(out.parameters())
opt = torch.optim.AdamW(params, lr=1e-2)
warm = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 3))
rng = np.random.default_rng(21)
src = torch.tensor(rng.integers(1, 9, (4, 6)))
src[0, 4:] = 0
tgt = torch.tensor(rng.integers(1, 9, (4, 5)))
tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
causal = nn.Transformer.generate_square_subsequent_mask(4)
for _ in range(6):
    h = model(emb(src), emb(tgt_in), tgt_mask=causal, src_key_padding_mask=src == 0,
              memory_key_padding_mask=src == 0, tgt_is_causal=True)
    loss = F.cross_entropy(out(h).reshape(-1, 9), tgt_out.reshape(-1), label_smoothing=0.1)
    opt.zero_grad()
    loss.backward()
    opt.step()
    warm.step()
    losses.append(loss.item())
losses.append(warm.get_last_lr()[0])
'''

VQ_VAE = '''
class VQ(nn.Module):
    def __init__(self, codes=6, dim=3, decay=0.9):
        super().__init__()
        start = np.random.default_rng(30).standard_normal((codes, dim))
        self.register_buffer("codebook", torch.tensor(start))
        self.register_buffer("counts", torch.ones(codes))
        self.decay = decay

    def forward(self, z):
        d = torch.cdist(z, self.codebook)
        idx = d.argmin(-1)
        q = self.codebook[idx]
        if self.training:
            with torch.no_grad():
                onehot = F.one_hot(idx, self.codebook.shape[0]).to(z.dtype)
                self.counts.mul_(self.decay).add_(onehot.sum(0), alpha=1 - self.decay)
                sums = torch.zeros_like(self.codebook).index_add_(0, idx, z.detach())
                means = sums / self.counts.unsqueeze(1)
                self.codebook.mul_(self.decay).add_(means, alpha=1 - self.decay)
        commit = F.mse_loss(z, q.detach())
        return z + (q - z).detach(), commit, idx

enc = init(nn.Sequential(nn.Linear(7, 10), nn.ReLU(), nn.Linear(10, 3)), seed=31)
dec = init(nn.Sequential(nn.Linear(3, 10), nn.ReLU(), nn.Linear(10, 7)), seed=32)
vq = VQ()
opt = torch.optim.Adam(list(enc.parameters()) + list(dec.parameters()), lr=1e-2)
x = torch.tensor(np.random.default_rng(33).standard_normal((20, 7)))
for _ in range(6):
    zq, commit, idx = vq(enc(x))
    loss = F.mse_loss(dec(zq), x) + 0.25 * commit
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    losses.append(float(idx.float().mean()))
losses.append(float(vq.codebook.sum()))
'''

STN = '''
class STN(nn.Module):
    def __init__(self):
        super().__init__()
        self.loc = nn.Sequential(nn.Conv2d(1, 4, 3), nn.MaxPool2d(2), nn.ReLU(), nn.Flatten(),
                                 nn.Linear(4 * 3 * 3, 6))
        self.cls = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveMaxPool2d(2),
                                 nn.Flatten(), nn.Linear(16, 3))

    def forward(self, x):
        theta = self.loc(x).view(-1, 2, 3) + torch.tensor([[1.0, 0, 0], [0, 1.0, 0]])
        grid = F.affine_grid(theta, x.size(), align_corners=False)
        warped = F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)
        return self.cls(warped), theta

model = init(STN(), seed=40, scale=0.2)
opt = torch.optim.RMSprop(model.parameters(), lr=5e-3, momentum=0.5, centered=True)
rng = np.random.default_rng(41)
x = torch.tensor(rng.standard_normal((6, 1, 8, 8)))
y = torch.tensor(rng.integers(0, 3, 6))
for _ in range(6):
    logits, theta = model(x)
    loss = F.cross_entropy(logits, y) + 0.1 * (theta - torch.eye(2, 3)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
'''

TCN_PRUNE = '''
from torch.nn.utils.parametrizations import weight_norm
import torch.nn.utils.prune as prune

class Causal(nn.Module):
    def __init__(self, cin, cout, dilation):
        super().__init__()
        self.pad = 2 * dilation
        self.conv = weight_norm(nn.Conv1d(cin, cout, 3, dilation=dilation))
        self.skip = nn.Conv1d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x):
        return F.elu(self.conv(F.pad(x, (self.pad, 0)))) + self.skip(x)

model = nn.Sequential(Causal(2, 6, 1), Causal(6, 6, 2), Causal(6, 1, 4))
init(model, seed=50, scale=0.3)
rng = np.random.default_rng(51)
x = torch.tensor(rng.standard_normal((4, 2, 16)))
y = torch.roll(x[:, :1], 1, dims=-1)
opt = torch.optim.Adagrad(model.parameters(), lr=0.05, lr_decay=0.01)
for step in range(6):
    if step == 3:
        prune.l1_unstructured(model[0].skip, "weight", amount=0.5)
    loss = F.smooth_l1_loss(model(x), y, beta=0.5)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
prune.remove(model[0].skip, "weight")
losses.append(float((model[0].skip.weight == 0).sum()))
'''

POINTNET = '''
class PointNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(nn.Conv1d(3, 8, 1), nn.BatchNorm1d(8), nn.ReLU(),
                                 nn.Conv1d(8, 16, 1), nn.BatchNorm1d(16), nn.ReLU())
        self.head = nn.Sequential(nn.Linear(16, 8), nn.LayerNorm(8), nn.ReLU(), nn.Linear(8, 4))

    def forward(self, pts, mask):  # pts (B, N, 3), mask (B, N)
        h = self.mlp(pts.transpose(1, 2))
        h = h.masked_fill(~mask.unsqueeze(1), float("-inf"))
        return self.head(h.amax(-1))

model = init(PointNet(), seed=60)
opt = torch.optim.NAdam(model.parameters(), lr=1e-2, momentum_decay=4e-3)
sched = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=3, T_mult=2)
rng = np.random.default_rng(61)
pts = torch.tensor(rng.standard_normal((5, 9, 3)))
mask = torch.tensor(rng.random((5, 9)) > 0.3)
mask[:, 0] = True
y = torch.tensor(rng.integers(0, 4, 5))
focal_gamma = 2.0
for _ in range(6):
    logp = F.log_softmax(model(pts, mask), -1).gather(1, y.unsqueeze(1)).squeeze(1)
    loss = (-(1 - logp.exp()) ** focal_gamma * logp).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()
    losses.append(loss.item())
model.eval()
losses.append(float(model(pts, mask).sum()))
losses.append(float(model.mlp[1].running_var.sum()))
'''

CLIP = '''
img = init(nn.Sequential(nn.Linear(10, 12), nn.GELU(approximate="tanh"), nn.Linear(12, 6)), seed=70)
txt = init(nn.EmbeddingBag(15, 6, mode="mean"), seed=71)
logit_scale = nn.Parameter(torch.tensor(np.log(1 / 0.07)))
params = list(img.parameters()) + list(txt.parameters()) + [logit_scale]
opt = torch.optim.Adamax(params, lr=1e-2)
rng = np.random.default_rng(72)
images = torch.tensor(rng.standard_normal((8, 10)))
tokens = torch.tensor(rng.integers(0, 15, 24))
offsets = torch.tensor([0, 2, 5, 6, 10, 13, 17, 20])
labels = torch.arange(8)
for _ in range(6):
    a = F.normalize(img(images), dim=-1)
    b = F.normalize(txt(tokens, offsets), dim=-1)
    logits = logit_scale.clamp(max=np.log(100)).exp() * a @ b.t()
    loss = (F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)) / 2
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
losses.append(logit_scale.item())
'''

ENSEMBLE = '''
from torch.func import stack_module_state, functional_call, vmap, grad

def make(seed):
    return init(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1)), seed=seed)

models = [make(s) for s in range(3)]
params, buffers = stack_module_state(models)
base = make(99)

def loss_fn(p, b, x, y):
    return F.mse_loss(functional_call(base, (p, b), (x,)), y)

rng = np.random.default_rng(80)
x = torch.tensor(rng.standard_normal((16, 4)))
y = torch.tensor(rng.standard_normal((16, 1)))
step = vmap(grad(loss_fn), in_dims=(0, 0, None, None))
per_model = vmap(loss_fn, in_dims=(0, 0, None, None))
for _ in range(6):
    g = step(params, buffers, x, y)
    with torch.no_grad():
        for k in params:
            params[k] -= 0.1 * g[k]
    l = per_model(params, buffers, x, y)
    losses.append(float(l.mean()))
    losses.append(float(l.max()))
'''

CUSTOM_FN = '''
class Clamp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, lo, hi):
        ctx.save_for_backward(x)
        ctx.lo, ctx.hi = lo, hi
        return x.clamp(lo, hi)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        inside = (x >= ctx.lo) & (x <= ctx.hi)
        # straight-through outside the range, scaled
        return torch.where(inside, g, 0.1 * g), None, None

class SoftArgmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits):
        p = logits.softmax(-1)
        idx = p.argmax(-1)
        ctx.mark_non_differentiable(idx)
        ctx.save_for_backward(p)
        return p, idx

    @staticmethod
    def backward(ctx, gp, gidx):
        (p,) = ctx.saved_tensors
        return p * (gp - (gp * p).sum(-1, keepdim=True))

net = init(nn.Sequential(nn.Linear(5, 7), nn.Linear(7, 4)), seed=81)
opt = torch.optim.SGD(net.parameters(), lr=0.3)
rng = np.random.default_rng(82)
x = torch.tensor(rng.standard_normal((10, 5)), requires_grad=True)
y = torch.tensor(rng.integers(0, 4, 10))
for _ in range(6):
    h = Clamp.apply(net[0](x), -0.5, 0.5)
    p, idx = SoftArgmax.apply(net[1](h))
    assert not idx.requires_grad
    loss = F.nll_loss(torch.log(p + 1e-9), y)
    (gx,) = torch.autograd.grad(loss, x, create_graph=True)
    total = loss + 0.1 * gx.pow(2).sum()
    opt.zero_grad()
    total.backward()
    opt.step()
    losses.append(total.item())
    losses.append(float((idx == y).double().mean()))
probe = x.detach()[:2, :3].clone().requires_grad_()
exact = torch.autograd.gradcheck(lambda t: Clamp.apply(t, -0.5, 0.5), (probe,),
                                 raise_exception=False)
losses.append(float(exact))  # False: the straight-through backward is not the derivative
'''


PROGRAMS = {name.lower(): source for name, source in [
    ("MOE", MOE),
    ("LORA", LORA),
    ("CTC", CTC),
    ("SEQ2SEQ_TRANSFORMER", SEQ2SEQ_TRANSFORMER),
    ("VQ_VAE", VQ_VAE),
    ("STN", STN),
    ("TCN_PRUNE", TCN_PRUNE),
    ("POINTNET", POINTNET),
    ("CLIP", CLIP),
    ("ENSEMBLE", ENSEMBLE),
    ("CUSTOM_FN", CUSTOM_FN),
]}

# programs whose last logged figure is not their loss (an accuracy, a count, a norm)
NOT_TRAINING = {"ctc", "lora", "pointnet", "tcn_prune", "vq_vae"}


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_program_matches_torch(name):
    assert_matches_torch(PROGRAMS[name], trains=name not in NOT_TRAINING)
