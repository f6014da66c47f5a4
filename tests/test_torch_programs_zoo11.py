"""An eleventh set of real-world PyTorch programs run unchanged with `torch` mapped to flowgrad
(the shim and runner of test_torch_programs.py), each giving torch's losses, gradient norms and
final parameters step for step in float64, here the everyday training-loop idioms in the
option combinations the earlier sets skip: a GRU seq2seq over pack_sequence with teacher
forcing, a conv VAE scored by distributions' kl_divergence, a hinge-loss GAN with spectral-norm
parametrizations, a ResNet block in channels_last through train/eval, a transformer encoder
with padding and causal masks next to hand-called scaled_dot_product_attention, the
cross-entropy family with smoothing, weights and ignore_index, every clipping helper, chained
LR schedulers, EMA by lerp_ and _foreach, tied weights with parameter groups, a DataLoader
with a custom sampler and collate_fn, and an optimizer/scheduler checkpoint round trip through
BytesIO. Weights, data and noise come from NumPy."""
import pytest
from test_torch_programs import assert_matches_torch

# a GRU seq2seq: variable-length sources through pack_sequence(enforce_sorted=False) into a
# bidirectional GRU, the two final directions merged into the decoder's state, a GRUCell decoder
# fed the target or its own argmax by a NumPy teacher-forcing mask, padding ignored by the loss
SEQ2SEQ_PACKED = '''
from torch.nn.utils.rnn import pack_sequence, pad_packed_sequence, pad_sequence

class Seq2Seq(nn.Module):
    def __init__(self, vocab=9, d=6, h=5):
        super().__init__()
        self.src_emb = nn.Embedding(vocab, d, padding_idx=0)
        self.enc = nn.GRU(d, h, batch_first=True, bidirectional=True)
        self.bridge = nn.Linear(2 * h, h)
        self.tgt_emb = nn.Embedding(vocab, d)
        self.cell = nn.GRUCell(d + 2 * h, h)
        self.out = nn.Linear(h, vocab)

    def forward(self, srcs, tgt, force):
        packed = pack_sequence([self.src_emb(s) for s in srcs], enforce_sorted=False)
        enc, h = self.enc(packed)
        enc, lengths = pad_packed_sequence(enc, batch_first=True, total_length=6)
        mask = torch.arange(6)[None] < lengths[:, None]
        ctx = (enc * mask[..., None]).sum(1) / lengths[:, None]
        state = torch.tanh(self.bridge(torch.cat([h[0], h[1]], -1)))
        tok = tgt[:, 0]
        logits = []
        for t in range(1, tgt.shape[1]):
            state = self.cell(torch.cat([self.tgt_emb(tok), ctx], -1), state)
            step = self.out(state)
            logits.append(step)
            tok = torch.where(force[:, t], tgt[:, t], step.argmax(-1))
        return torch.stack(logits, 1), lengths

model = init(Seq2Seq(), seed=1100, scale=0.4)
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
rng = np.random.default_rng(1101)
lens = [4, 6, 2, 5]
srcs = [torch.tensor(rng.integers(1, 9, n)) for n in lens]
tgt = pad_sequence([torch.cat([torch.tensor([1]), s.flip(0)]) for s in srcs], batch_first=True)
for step in range(6):
    force = torch.tensor(rng.random(tgt.shape) < 0.5)
    logits, lengths = model(srcs, tgt, force)
    loss = F.cross_entropy(logits.transpose(1, 2), tgt[:, 1:], ignore_index=0)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), float(model.enc.weight_hh_l0_reverse.grad.norm())]
losses += lengths.tolist() + [loss.item()]
'''

# a conv VAE: strided convs down, ConvTranspose2d with output_padding up, the posterior as an
# Independent Normal against a standard prior through kl_divergence (checked against the closed
# form), reparameterised with NumPy noise, a summed Bernoulli likelihood from logits
CONV_VAE = '''
from torch.distributions import Normal, Independent, kl_divergence, Bernoulli

class VAE(nn.Module):
    def __init__(self, z=3):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(1, 4, 3, stride=2, padding=1), nn.ELU(),
                                 nn.Conv2d(4, 6, 3, stride=2, padding=1), nn.ELU(), nn.Flatten())
        self.mu, self.logvar = nn.Linear(6 * 2 * 2, z), nn.Linear(6 * 2 * 2, z)
        self.fc = nn.Linear(z, 6 * 2 * 2)
        self.dec = nn.Sequential(
            nn.ConvTranspose2d(6, 4, 3, stride=2, padding=1, output_padding=1), nn.ELU(),
            nn.ConvTranspose2d(4, 1, 3, stride=2, padding=1, output_padding=1))

    def forward(self, x, eps):
        h = self.enc(x)
        mu, logvar = self.mu(h), self.logvar(h).clamp(-6, 4)
        q = Independent(Normal(mu, torch.exp(0.5 * logvar)), 1)
        z = mu + torch.exp(0.5 * logvar) * eps
        return self.dec(self.fc(z).view(-1, 6, 2, 2)), q, mu, logvar

model = init(VAE(), seed=1102, scale=0.3)
opt = torch.optim.Adam(model.parameters(), lr=5e-3)
rng = np.random.default_rng(1103)
x = torch.tensor((rng.random((5, 1, 8, 8)) < 0.3).astype(np.float64))
prior = Independent(Normal(torch.zeros(3), torch.ones(3)), 1)
for step in range(6):
    logits, q, mu, logvar = model(x, torch.tensor(rng.standard_normal((5, 3))))
    rec = -Bernoulli(logits=logits).log_prob(x).sum((1, 2, 3))
    kl = kl_divergence(q, prior)
    closed = -0.5 * (1 + logvar - mu ** 2 - logvar.exp()).sum(1)
    loss = (rec + kl).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), kl.mean().item(), float((kl - closed).abs().max() < 1e-10),
               float(model.dec[2].weight.grad.norm()), q.entropy().sum().item()]
losses += [tuple(logits.shape) == (5, 1, 8, 8), loss.item()]
'''

# a hinge-loss GAN: a discriminator under parametrizations.spectral_norm (its power-iteration
# vectors overwritten from NumPy, so both runs start equal), generator and discriminator each
# with their own Adam, the fake batch detached for the discriminator's step
HINGE_GAN = '''
from torch.nn.utils.parametrizations import spectral_norm

G = init(nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 3)), seed=1104, scale=0.4)
D = nn.Sequential(spectral_norm(nn.Linear(3, 8)), nn.LeakyReLU(0.1), spectral_norm(nn.Linear(8, 1)))
init(D, seed=1105, scale=0.4)
rng = np.random.default_rng(1106)
with torch.no_grad():
    for m in (D[0], D[2]):
        sn = m.parametrizations.weight[0]
        sn._u.copy_(F.normalize(torch.tensor(rng.standard_normal(sn._u.shape)), dim=0))
        sn._v.copy_(F.normalize(torch.tensor(rng.standard_normal(sn._v.shape)), dim=0))
opt_g = torch.optim.Adam(G.parameters(), lr=2e-3, betas=(0.0, 0.9))
opt_d = torch.optim.Adam(D.parameters(), lr=4e-3, betas=(0.0, 0.9))
for step in range(6):
    real = torch.tensor(rng.standard_normal((8, 3))) * 0.5 + 1.0
    fake = G(torch.tensor(rng.standard_normal((8, 2))))
    d_loss = F.relu(1 - D(real)).mean() + F.relu(1 + D(fake.detach())).mean()
    opt_d.zero_grad()
    d_loss.backward()
    opt_d.step()
    g_loss = -D(fake).mean()
    opt_g.zero_grad()
    g_loss.backward()
    opt_g.step()
    with torch.no_grad():
        sigma = torch.linalg.matrix_norm(D[0].weight, 2)
    losses += [d_loss.item(), g_loss.item(), float(sigma),
               float(D[0].parametrizations.weight.original.grad.norm())]
D.eval()
with torch.no_grad():
    losses.append(float(D(real).sum()))
losses.append(abs(d_loss.item()) + 0.5)
'''

# a ResNet basic block in channels_last: BatchNorm with momentum=None (cumulative averages),
# the model and input converted by memory_format, trained, then evaluated with its running
# statistics; the layout of activations is logged alongside the numbers
RESNET_CL = '''
class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout, momentum=None)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                   nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)), inplace=True)
        return F.relu(self.b2(self.c2(y)) + self.short(x))

model = nn.Sequential(Block(2, 4, 2), Block(4, 4, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                      nn.Linear(4, 3))
init(model, seed=1107, scale=0.4)
model = model.to(memory_format=torch.channels_last)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True,
                      weight_decay=1e-4)
rng = np.random.default_rng(1108)
x = torch.tensor(rng.standard_normal((6, 2, 6, 6))).contiguous(memory_format=torch.channels_last)
y = torch.tensor(rng.integers(0, 3, 6))
feat = model[0](x)
losses += [float(feat.is_contiguous(memory_format=torch.channels_last)),
           float(model[0].c1.weight.is_contiguous(memory_format=torch.channels_last))]
for step in range(5):
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), float(model[0].b1.running_var.sum()),
               int(model[0].b1.num_batches_tracked), float(model[0].c1.weight.grad.norm())]
model.eval()
with torch.no_grad():
    out = model(x)
    losses += out.flatten().tolist()
    losses.append(float(model[0].b1.running_mean.norm()))
losses.append(loss.item())
'''

# a transformer encoder: TransformerEncoderLayer (GELU, post-norm) under a key-padding mask
# and the causal mask from generate_square_subsequent_mask, then the same attention recomputed
# by scaled_dot_product_attention with a boolean mask, a float mask, and is_causal
TRANSFORMER_MASKS = '''
d, heads = 8, 2
layer = nn.TransformerEncoderLayer(d, heads, 16, dropout=0.0, activation="gelu",
                                   batch_first=True)
enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
head = nn.Linear(d, 3)
init(enc, seed=1109, scale=0.3)
init(head, seed=1110, scale=0.3)
opt = torch.optim.AdamW([*enc.parameters(), *head.parameters()], lr=3e-3)
rng = np.random.default_rng(1111)
x = torch.tensor(rng.standard_normal((3, 5, d)))
pad = torch.tensor([[False] * 5, [False] * 3 + [True] * 2, [False] * 4 + [True]])
causal = nn.Transformer.generate_square_subsequent_mask(5)
y = torch.tensor(rng.integers(0, 3, (3, 5)))
for step in range(5):
    h = enc(x, mask=causal, src_key_padding_mask=pad, is_causal=True)
    logits = head(h)
    loss = F.cross_entropy(logits[~pad], y[~pad])
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), float(enc.layers[0].self_attn.in_proj_weight.grad.norm())]
q, k, v = (torch.tensor(rng.standard_normal((3, 2, 5, 4))) for _ in range(3))
q.requires_grad_(True)
keep = ~pad[:, None, None, :] & (causal == 0)
a = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
b = F.scaled_dot_product_attention(q, k, v, attn_mask=causal + torch.where(
    pad, float("-inf"), 0.0)[:, None, None, :])
c = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3)
g, = torch.autograd.grad((a * b).sum() + c.pow(2).sum(), q)
losses += [float((a - b).abs().max() < 1e-12), float(c.sum()), float(g.norm()), loss.item()]
'''

# the cross-entropy family: label smoothing with class weights and ignore_index on (N, C, d)
# logits in every reduction, probability targets with smoothing and weights, and nll_loss on
# log_softmax, each with its input gradient
CE_FAMILY = '''
rng = np.random.default_rng(1112)
logits = torch.tensor(rng.standard_normal((4, 5, 3)), requires_grad=True)
target = torch.tensor(rng.integers(0, 5, (4, 3)))
target[0, 1] = -100
target[2, 0] = -100
target[3, 2] = 2
w = torch.tensor([1.0, 2.0, 0.5, 1.5, 0.25])
for red in ("mean", "sum", "none"):
    for ls in (0.0, 0.2):
        for weight in (None, w):
            crit = nn.CrossEntropyLoss(weight=weight, label_smoothing=ls, reduction=red)
            out = crit(logits, target)
            g, = torch.autograd.grad(out.sum(), logits)
            losses += [float(out.sum()), float(g.norm())]
probs = torch.softmax(torch.tensor(rng.standard_normal((4, 5, 3))), 1)
for ls in (0.0, 0.1):
    out = F.cross_entropy(logits, probs, weight=w, label_smoothing=ls)
    g, = torch.autograd.grad(out, logits)
    losses += [out.item(), float(g.norm())]
try:
    F.nll_loss(F.log_softmax(logits, 1), target, weight=w, ignore_index=2)
    losses.append(0.0)
except IndexError as e:
    losses.append(float("out of bounds" in str(e)))
nll = F.nll_loss(F.log_softmax(logits, 1), target.where(target != 2, -100), weight=w)
g, = torch.autograd.grad(nll, logits)
losses += [nll.item(), float(g.norm())]
flat = F.cross_entropy(logits.permute(0, 2, 1).reshape(-1, 5), target.reshape(-1),
                       weight=w, label_smoothing=0.2)
losses += [flat.item(), losses[6]]
'''

# gradient clipping every way torch offers: clip_grad_norm_ for the 2-, 1- and inf-norms (the
# foreach path too), the two-part get_total_norm + clip_grads_with_norm_, clip_grad_value_, and
# the parameters_to_vector view of the result
CLIPPING = '''
from torch.nn.utils import parameters_to_vector, vector_to_parameters

model = init(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)), seed=1113, scale=0.8)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
rng = np.random.default_rng(1114)
X = torch.tensor(rng.standard_normal((16, 4))) * 3
Y = torch.tensor(rng.standard_normal((16, 2)))
modes = [(2.0, False), (1.0, True), (float("inf"), False), (2.0, True), ("split", None),
         ("value", None)]
for step, (kind, foreach) in enumerate(modes):
    loss = F.mse_loss(model(X), Y)
    opt.zero_grad()
    loss.backward()
    if kind == "split":
        grads = [p.grad for p in model.parameters()]
        total = nn.utils.get_total_norm(grads, norm_type=2.0)
        nn.utils.clip_grads_with_norm_(model.parameters(), 0.5, total)
    elif kind == "value":
        nn.utils.clip_grad_value_(model.parameters(), clip_value=0.05)
        total = torch.tensor(0.0)
    else:
        total = nn.utils.clip_grad_norm_(model.parameters(), 0.5, norm_type=kind,
                                         foreach=foreach)
    flat = parameters_to_vector(p.grad for p in model.parameters())
    opt.step()
    losses += [loss.item(), float(total), float(flat.norm()), float(flat.abs().max())]
vec = parameters_to_vector(model.parameters())
vector_to_parameters(vec * 0.5, model.parameters())
losses += [float(model[0].weight.sum()), F.mse_loss(model(X), Y).item() * 0 + loss.item()]
'''

# LR schedules chained: LinearLR warm-up handed to CosineAnnealingLR by SequentialLR, OneCycleLR
# (three phases, linear annealing, cycled Adam beta1), ChainedScheduler of ExponentialLR and
# MultiStepLR, CosineAnnealingWarmRestarts stepped by fractional epochs, and a scheduler's
# state_dict carried into a fresh one
SCHEDULES = '''
from torch.optim import lr_scheduler as S

def make(lr=0.1, adam=False):
    p = nn.Parameter(torch.ones(3))
    return p, (torch.optim.Adam([p], lr=lr) if adam else torch.optim.SGD([p], lr=lr,
                                                                          momentum=0.9))

p, o = make()
warm = S.LinearLR(o, start_factor=0.1, total_iters=3)
cos = S.CosineAnnealingLR(o, T_max=5, eta_min=0.01)
seq = S.SequentialLR(o, [warm, cos], milestones=[3])
p2, o2 = make(adam=True)
one = S.OneCycleLR(o2, max_lr=0.5, total_steps=10, pct_start=0.3, anneal_strategy="linear",
                   three_phase=True, div_factor=10, final_div_factor=100)
p3, o3 = make()
chain = S.ChainedScheduler([S.ExponentialLR(o3, 0.9), S.MultiStepLR(o3, [2, 5], gamma=0.5)])
p4, o4 = make()
warm_restart = S.CosineAnnealingWarmRestarts(o4, T_0=3, T_mult=2, eta_min=0.001)
for i in range(10):
    for pp, oo in ((p, o), (p2, o2), (p3, o3), (p4, o4)):
        oo.zero_grad()
        (pp ** 2).sum().backward()
        oo.step()
    seq.step()
    one.step()
    chain.step()
    warm_restart.step(i + 0.5)
    losses += [seq.get_last_lr()[0], one.get_last_lr()[0], o2.param_groups[0]["betas"][0],
               chain.get_last_lr()[0], warm_restart.get_last_lr()[0]]
p5, o5 = make()
fresh = S.CosineAnnealingWarmRestarts(o5, T_0=3, T_mult=2, eta_min=0.001)
fresh.load_state_dict(warm_restart.state_dict())
fresh.step()
losses += [fresh.get_last_lr()[0], fresh.T_cur, float(p.sum()), float(p2.sum()), 0.0]
losses.insert(0, 1.0)
'''

# an exponential moving average of the weights: a shadow copy updated under no_grad with lerp_
# (and, for buffers, copy_), the same by torch._foreach_lerp_, and AveragedModel with the EMA
# multi-average function, evaluated against the live model
EMA_LERP = '''
import copy
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

model = init(nn.Sequential(nn.Linear(3, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 1)),
             seed=1115, scale=0.4)
ema = copy.deepcopy(model).requires_grad_(False)
ema2 = copy.deepcopy(model).requires_grad_(False)
avg = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.8), use_buffers=True)
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
rng = np.random.default_rng(1116)
X = torch.tensor(rng.standard_normal((12, 3)))
Y = X.sum(1, keepdim=True).sin()
for step in range(6):
    loss = F.mse_loss(model(X), Y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    decay = min(0.8, (1 + step) / (10 + step))
    with torch.no_grad():
        for pe, pm in zip(ema.parameters(), model.parameters()):
            pe.lerp_(pm, 1 - decay)
        for be, bm in zip(ema.buffers(), model.buffers()):
            be.copy_(bm)
        torch._foreach_lerp_(list(ema2.parameters()), list(model.parameters()), 1 - decay)
    avg.update_parameters(model)
    losses += [loss.item(), float(ema[0].weight.sum()), float(avg.module[0].weight.sum()),
               float((ema[3].bias - ema2[3].bias).abs().max() < 1e-12), int(avg.n_averaged)]
for m in (model, ema, avg):
    m.eval()
with torch.no_grad():
    losses += [F.mse_loss(m(X), Y).item() for m in (model, ema, avg)]
losses.append(loss.item())
'''

# a tied-weight language model: the decoder's weight is the embedding's, so parameters()
# yields it once; AdamW parameter groups without decay for biases, norms and the embedding,
# amsgrad on, a group added mid-training
TIED_GROUPS = '''
class LM(nn.Module):
    def __init__(self, vocab=11, d=6):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.rnn = nn.LSTM(d, d, batch_first=True)
        self.norm = nn.LayerNorm(d)
        self.dec = nn.Linear(d, vocab)
        self.dec.weight = self.emb.weight
        self.extra = nn.Linear(d, d)

    def forward(self, x, use_extra):
        h, _ = self.rnn(self.emb(x))
        if use_extra:
            h = h + self.extra(h)
        return self.dec(self.norm(h))

model = init(LM(), seed=1117, scale=0.3)
names = [n for n, _ in model.named_parameters()]
all_names = [n for n, _ in model.named_parameters(remove_duplicate=False)]
decay = [p for n, p in model.named_parameters()
         if p.ndim >= 2 and "emb" not in n and "extra" not in n]
no_decay = [p for n, p in model.named_parameters()
            if (p.ndim < 2 or "emb" in n) and "extra" not in n]
opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                         {"params": no_decay, "weight_decay": 0.0}], lr=1e-2, amsgrad=True)
rng = np.random.default_rng(1118)
data = torch.tensor(rng.integers(0, 11, (3, 7)))
losses += [len(names), len(all_names), len(decay), len(no_decay)]
for step in range(6):
    if step == 3:
        opt.add_param_group({"params": list(model.extra.parameters()), "lr": 5e-3,
                             "weight_decay": 0.5})
    logits = model(data[:, :-1], step >= 3)
    loss = F.cross_entropy(logits.reshape(-1, 11), data[:, 1:].reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), float(model.emb.weight.grad.norm()),
               float(model.dec.weight is model.emb.weight)]
losses += [len(opt.param_groups), float(model.extra.weight.norm()), loss.item()]
'''

# a data pipeline: a map-style Dataset of ragged sequences, a custom Sampler ordering by length
# in buckets, a collate_fn padding and returning a dict, drop_last, then default_collate on
# nested tuples and a BatchSampler-driven loader
DATA_PIPELINE = '''
from torch.utils.data import (BatchSampler, DataLoader, Dataset, Sampler, SequentialSampler,
                              TensorDataset, default_collate)
from torch.nn.utils.rnn import pad_sequence

class Ragged(Dataset):
    def __init__(self, rng, n=11):
        self.items = [(torch.tensor(rng.standard_normal((int(rng.integers(2, 6)), 3))),
                       int(rng.integers(0, 2))) for _ in range(n)]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]

class LengthBuckets(Sampler):
    def __init__(self, ds):
        self.order = sorted(range(len(ds)), key=lambda i: (len(ds[i][0]), i))

    def __iter__(self):
        return iter(self.order)

    def __len__(self):
        return len(self.order)

def collate(batch):
    xs, ys = zip(*batch)
    return {"x": pad_sequence(xs, batch_first=True), "len": torch.tensor([len(x) for x in xs]),
            "y": torch.tensor(ys)}

rng = np.random.default_rng(1119)
ds = Ragged(rng)
loader = DataLoader(ds, batch_size=3, sampler=LengthBuckets(ds), collate_fn=collate,
                    drop_last=True)
model = init(nn.GRU(3, 4, batch_first=True), seed=1120, scale=0.4)
head = init(nn.Linear(4, 2), seed=1121, scale=0.4)
opt = torch.optim.SGD([*model.parameters(), *head.parameters()], lr=0.2)
losses.append(len(loader))
for epoch in range(2):
    for batch in loader:
        out, _ = model(batch["x"])
        last = out[torch.arange(len(batch["len"])), batch["len"] - 1]
        loss = F.cross_entropy(head(last), batch["y"])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses += [loss.item(), tuple(batch["x"].shape)[1]]
nested = default_collate([(torch.ones(2) * i, {"a": i, "b": np.float64(i) / 2}) for i in range(3)])
losses += nested[0].sum(0).tolist() + nested[1]["a"].tolist() + nested[1]["b"].tolist()
tds = TensorDataset(torch.arange(10.0), torch.arange(10) % 3)
bl = DataLoader(tds, batch_sampler=BatchSampler(SequentialSampler(tds), 4, drop_last=False))
losses += [float(xb.sum() + yb.sum()) for xb, yb in bl]
losses.append(loss.item())
'''

# a checkpoint round trip: model, optimizer and scheduler state through torch.save into a
# BytesIO and torch.load(weights_only=True) into fresh objects mid-training, the resumed run
# checked against the uninterrupted one; load_state_dict(strict=False) reports its keys
CHECKPOINT_IO = '''
import io

def build():
    m = init(nn.Sequential(nn.Linear(3, 5), nn.BatchNorm1d(5), nn.GELU(), nn.Linear(5, 2)),
             seed=1122, scale=0.4)
    o = torch.optim.NAdam(m.parameters(), lr=1e-2, weight_decay=1e-3, momentum_decay=4e-3)
    s = torch.optim.lr_scheduler.StepLR(o, step_size=2, gamma=0.7)
    return m, o, s

rng = np.random.default_rng(1123)
X = torch.tensor(rng.standard_normal((10, 3)))
Y = torch.tensor(rng.integers(0, 2, 10))

def train(m, o, s, steps):
    out = []
    for _ in range(steps):
        loss = F.cross_entropy(m(X), Y)
        o.zero_grad()
        loss.backward()
        o.step()
        s.step()
        out.append(loss.item())
    return out

m, o, s = build()
straight = train(m, o, s, 6)
m, o, s = build()
first = train(m, o, s, 3)
buf = io.BytesIO()
torch.save({"model": m.state_dict(), "opt": o.state_dict(), "sched": s.state_dict(),
            "step": 3}, buf)
buf.seek(0)
ck = torch.load(buf, weights_only=True)
m2, o2, s2 = build()
m2.load_state_dict(ck["model"])
o2.load_state_dict(ck["opt"])
s2.load_state_dict(ck["sched"])
resumed = first + train(m2, o2, s2, 3)
losses += straight + [abs(a - b) < 1e-12 for a, b in zip(straight, resumed)]
sd = dict(ck["model"])
sd.pop("1.running_var")
sd["extra.weight"] = torch.zeros(1)
res = m2.load_state_dict(sd, strict=False)
losses += [len(res.missing_keys), len(res.unexpected_keys), ck["step"],
           int(ck["model"]["1.num_batches_tracked"]), s2.get_last_lr()[0], straight[-1]]
'''

# an LSTM tagger with a projection (proj_size) over a pack of unsorted sequences, its initial
# state given in the caller's batch order (torch permutes it by sorted_indices), the same for
# a GRU and a ReLU RNN, the outputs unpacked by unpack_sequence and unpad_sequence
PACKED_STATE = '''
from torch.nn.utils.rnn import (pack_padded_sequence, pad_packed_sequence, unpack_sequence,
                                unpad_sequence)

rng = np.random.default_rng(1124)
x = torch.tensor(rng.standard_normal((4, 5, 3)))
lengths = torch.tensor([3, 5, 1, 4])
y = torch.tensor(rng.integers(0, 2, (4, 5)))
valid = torch.arange(5)[None] < lengths[:, None]
nets = [(nn.LSTM(3, 4, num_layers=2, bidirectional=True, batch_first=True, proj_size=2), 2),
        (nn.GRU(3, 4, num_layers=2, bidirectional=True, batch_first=True), 4),
        (nn.RNN(3, 4, num_layers=2, bidirectional=True, batch_first=True, nonlinearity="relu"), 4)]
for i, (rnn, hs) in enumerate(nets):
    init(rnn, seed=1125 + i, scale=0.4)
    head = init(nn.Linear(2 * hs, 2), seed=1128 + i, scale=0.4)
    h0 = torch.tensor(rng.standard_normal((4, 4, hs))) * 0.5
    hx = (h0, torch.tensor(rng.standard_normal((4, 4, 4))) * 0.5) if i == 0 else h0
    opt = torch.optim.Adam([*rnn.parameters(), *head.parameters()], lr=1e-2)
    for step in range(3):
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, hn = rnn(packed, hx)
        pad, lens = pad_packed_sequence(out, batch_first=True, padding_value=-1.0)
        hn = hn[0] if i == 0 else hn
        loss = F.cross_entropy(head(pad)[valid], y[valid]) + 0.01 * hn.pow(2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses += [loss.item(), float(hn[:, :, 0].sum()),
                   float(rnn.weight_hh_l1_reverse.grad.norm())]
    losses += [float(s.sum()) for s in unpack_sequence(out)]
    losses += [len(s) for s in unpad_sequence(pad, lens, batch_first=True)]
losses.insert(0, 1.0)
'''

# a metric-learning head trained on the rarer losses together: triplet margin with a custom
# distance and swap, cosine embedding, margin ranking, multi-label soft margin and multi-margin
# with class weights, Poisson and Gaussian NLL (full), Huber, and KLDiv with log targets
RARE_LOSSES = '''
rng = np.random.default_rng(1131)
net = init(nn.Sequential(nn.Linear(4, 8), nn.SiLU(), nn.Linear(8, 4)), seed=1132, scale=0.4)
opt = torch.optim.Adam(net.parameters(), lr=1e-2)
A, P, N = (torch.tensor(rng.standard_normal((6, 4))) for _ in range(3))
sim = torch.tensor(rng.integers(0, 2, 6)) * 2 - 1
cls = torch.tensor(rng.integers(0, 4, 6))
multi = torch.tensor(rng.random((6, 4)) < 0.4).double()
counts = torch.tensor(rng.poisson(2.0, (6, 4))).double()
w = torch.tensor([1.0, 2.0, 0.5, 1.5])
trip = nn.TripletMarginWithDistanceLoss(
    distance_function=lambda u, v: 1 - F.cosine_similarity(u, v), margin=0.3, swap=True)
for step in range(6):
    a, p, n = net(A), net(P), net(N)
    terms = [trip(a, p, n), nn.TripletMarginLoss(margin=0.5, p=1, swap=True)(a, p, n),
             nn.CosineEmbeddingLoss(margin=0.2)(a, p, sim),
             nn.MarginRankingLoss(margin=0.1)(a[:, 0], p[:, 0], sim.double()),
             nn.MultiLabelSoftMarginLoss(weight=w)(a, multi),
             nn.MultiMarginLoss(p=2, margin=0.7, weight=w)(a, cls),
             nn.PoissonNLLLoss(log_input=True, full=True)(a, counts),
             nn.GaussianNLLLoss(full=True, eps=1e-3)(a, p.detach(), n.abs() + 0.1),
             nn.HuberLoss(delta=0.4)(a, p), nn.SmoothL1Loss(beta=0.0)(a, n),
             nn.KLDivLoss(reduction="batchmean", log_target=True)(F.log_softmax(a, 1),
                                                                  F.log_softmax(p.detach(), 1))]
    loss = sum(terms)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item()] + [t.item() for t in terms[::3]] + [float(net[0].weight.grad.norm())]
losses.append(loss.item())
'''

# a super-resolution net: the low-resolution input made by antialiased bicubic downsampling,
# upsampled by pixel_shuffle and by interpolate (bicubic with align_corners, nearest-exact,
# area), a max-pool/unpool skip with ceil_mode and padding, LP and count_include_pad=False
# average pools in the loss
SUPER_RES = '''
class SR(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Conv2d(1, 8, 3, padding=1)
        self.shuffle = nn.Sequential(nn.Conv2d(8, 4, 3, padding=1), nn.PixelShuffle(2))
        self.mix = nn.Conv2d(3, 1, 3, padding=1)

    def forward(self, lr):
        h = F.relu(self.head(lr))
        a = self.shuffle(h)
        b = F.interpolate(lr, scale_factor=2, mode="bicubic", align_corners=True)
        c = F.interpolate(lr, size=(12, 10), mode="nearest-exact")
        pooled, idx = F.max_pool2d(a, 3, stride=2, padding=1, ceil_mode=True, return_indices=True)
        skip = F.max_unpool2d(pooled, idx, 3, stride=2, padding=1, output_size=a.shape[-2:])
        return self.mix(torch.cat([a + skip, b, c], 1))

rng = np.random.default_rng(1133)
hr = torch.tensor(rng.standard_normal((3, 1, 12, 10))).cumsum(-1).cumsum(-2) * 0.1
lr = F.interpolate(hr, size=(6, 5), mode="bicubic", antialias=True)
model = init(SR(), seed=1134, scale=0.3)
opt = torch.optim.Adam(model.parameters(), lr=5e-3)
for step in range(6):
    out = model(lr)
    pix = F.l1_loss(out, hr)
    coarse = F.mse_loss(F.avg_pool2d(out, 3, 2, 1, count_include_pad=False),
                        F.interpolate(hr, scale_factor=0.5, mode="area"))
    energy = F.lp_pool2d(out.abs() + 0.1, 2.5, (2, 3), stride=2, ceil_mode=True).mean()
    loss = pix + coarse + 0.01 * energy
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), pix.item(), coarse.item(), float(model.shuffle[0].weight.grad.norm())]
losses += [float(lr.sum()), loss.item()]
'''

# a spatial transformer over a conv stack using every padding mode: circular with stride and
# groups, reflect with dilation, replicate, 'same' with an even kernel, a transposed conv with
# output_size, then grid_sample (bicubic, reflection) on the predicted affine grid
CONV_PADDING = '''
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.loc = nn.Sequential(nn.Conv2d(2, 4, 3, padding=2, padding_mode="circular", stride=2,
                                           groups=2), nn.Tanh(),
                                 nn.Conv2d(4, 4, 3, padding=(1, 2), padding_mode="reflect",
                                           dilation=2), nn.Tanh(),
                                 nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 6))
        self.body = nn.Sequential(nn.Conv2d(2, 4, (2, 4), padding="same", dilation=(2, 1)),
                                  nn.ELU(), nn.Conv2d(4, 4, 3, padding=1, padding_mode="replicate",
                                                      stride=2))
        self.up = nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1)

    def forward(self, x):
        theta = self.loc(x).view(-1, 2, 3) + torch.tensor([[1.0, 0, 0], [0, 1.0, 0]])
        grid = F.affine_grid(theta, x.shape, align_corners=False)
        x = F.grid_sample(x, grid, mode="bicubic", padding_mode="reflection", align_corners=False)
        return self.up(self.body(x), output_size=x.shape[-2:])

rng = np.random.default_rng(1135)
x = torch.tensor(rng.standard_normal((3, 2, 7, 6)))
target = x.roll(1, -1) * 0.5
model = init(Net(), seed=1136, scale=0.2)
opt = torch.optim.Adam(model.parameters(), lr=5e-3)
for step in range(6):
    out = model(x)
    loss = F.mse_loss(out, target)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), float(model.loc[-1].weight.grad.norm()),
               float(model.body[0].weight.grad.norm())]
losses += list(out.shape) + [loss.item()]
'''

PROGRAMS = {name.lower(): source for name, source in [
    ("SEQ2SEQ_PACKED", SEQ2SEQ_PACKED),
    ("CONV_VAE", CONV_VAE),
    ("HINGE_GAN", HINGE_GAN),
    ("RESNET_CL", RESNET_CL),
    ("TRANSFORMER_MASKS", TRANSFORMER_MASKS),
    ("CE_FAMILY", CE_FAMILY),
    ("CLIPPING", CLIPPING),
    ("SCHEDULES", SCHEDULES),
    ("EMA_LERP", EMA_LERP),
    ("TIED_GROUPS", TIED_GROUPS),
    ("DATA_PIPELINE", DATA_PIPELINE),
    ("CHECKPOINT_IO", CHECKPOINT_IO),
    ("PACKED_STATE", PACKED_STATE),
    ("RARE_LOSSES", RARE_LOSSES),
    ("SUPER_RES", SUPER_RES),
    ("CONV_PADDING", CONV_PADDING),
]}

# programs whose logged figures are not a falling loss (a table of losses under every option,
# a hinge GAN's balance, learning rates)
NOT_TRAINING = {"ce_family", "hinge_gan", "schedules", "data_pipeline", "checkpoint_io",
                "clipping", "packed_state"}


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_program_matches_torch(name):
    assert_matches_torch(PROGRAMS[name], trains=name not in NOT_TRAINING)
