"""A twelfth set of real-world PyTorch programs run unchanged with `torch` mapped to flowgrad
(the shim and runner of test_torch_programs.py), each giving torch's losses, gradient norms and
final parameters step for step in float64: a WGAN-GP critic whose penalty is trained through
autograd.grad(create_graph=True), bfloat16 autocast on CPU, forward/pre/backward hooks that
collect and rewrite activations, orthogonal/weight-norm/spectral-norm parametrizations,
per-sample gradients by torch.func (vmap of grad, jacrev, jacfwd, hessian), einsum-heavy
attention in every spelling, scatter/gather losses, EmbeddingBag in each mode, top-k and
nucleus sampling from a seeded Generator (compared by shape and support only, the stream being
torch's own), and the error messages a training script trips over. Weights, data and noise
come from NumPy."""
import pytest
from test_torch_programs import assert_matches_torch

# WGAN-GP (Gulrajani et al.): the critic's gradient penalty on interpolates through
# autograd.grad(create_graph=True) with grad_outputs, five critic steps per generator step,
# RMSprop for the critic and Adam for the generator, the fake batch detached for the critic
WGAN_GP = '''
G = init(nn.Sequential(nn.Linear(2, 8), nn.ELU(), nn.Linear(8, 2)), seed=1200, scale=0.4)
C = init(nn.Sequential(nn.Linear(2, 8), nn.Softplus(beta=2.0), nn.Linear(8, 8), nn.SiLU(),
                       nn.Linear(8, 1)), seed=1201, scale=0.4)
opt_c = torch.optim.RMSprop(C.parameters(), lr=2e-3, centered=True, momentum=0.5)
opt_g = torch.optim.Adam(G.parameters(), lr=2e-3, betas=(0.5, 0.9))
rng = np.random.default_rng(1202)
for it in range(3):
    for _ in range(3):
        real = torch.tensor(rng.standard_normal((6, 2))) + torch.tensor([2.0, -1.0])
        fake = G(torch.tensor(rng.standard_normal((6, 2)))).detach()
        alpha = torch.tensor(rng.random((6, 1)))
        inter = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
        out = C(inter)
        g, = torch.autograd.grad(out, inter, grad_outputs=torch.ones_like(out),
                                 create_graph=True, retain_graph=True)
        gp = ((g.norm(2, dim=1) - 1) ** 2).mean()
        c_loss = C(fake).mean() - C(real).mean() + 10 * gp
        opt_c.zero_grad()
        c_loss.backward()
        opt_c.step()
        losses += [c_loss.item(), gp.item()]
    g_loss = -C(G(torch.tensor(rng.standard_normal((6, 2))))).mean()
    opt_g.zero_grad()
    g_loss.backward()
    opt_g.step()
    losses += [g_loss.item(), float(G[0].weight.grad.norm()), float(C[0].weight.grad.norm())]
losses.append(abs(losses[0]) - 1)
'''

# bfloat16 autocast on CPU: matmuls and convs run in bfloat16 while the losses stay float32,
# the parameters' gradients come back in their own dtype, the bfloat16 figures to torch's last
# bit (the float32 accumulation rounded once); the model and data are float32 here since
# autocast only lowers float32
AUTOCAST_BF16 = '''
torch.set_default_dtype(torch.float32)
model = init(nn.Sequential(nn.Conv1d(2, 4, 3, padding=1), nn.ReLU(), nn.Flatten(),
                           nn.Linear(4 * 6, 3)), seed=1203, scale=0.25)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
rng = np.random.default_rng(1204)
x = torch.tensor(rng.standard_normal((4, 2, 6)), dtype=torch.float32)
y = torch.tensor(rng.integers(0, 3, 4))
for step in range(4):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        h = model[0](x)
        logits = model[3](model[2](model[1](h)))
        loss = F.cross_entropy(logits, y)
        soft = torch.softmax(logits, -1)
    losses += [h.dtype == torch.bfloat16, logits.dtype == torch.bfloat16,
               loss.dtype == torch.float32, soft.dtype == torch.bfloat16]
    opt.zero_grad()
    loss.backward()
    # (the float32 loss to 1e-5: its log-softmax may round 1 ulp apart from torch's kernel)
    losses += [model[3].weight.grad.dtype == torch.float32, round(loss.item(), 5),
               float(h.float().sum()), float(model[0].weight.grad.sum()), float(soft.sum(0)[0])]
    opt.step()
with torch.autocast("cpu", dtype=torch.bfloat16, enabled=False):
    losses.append(model(x).dtype == torch.float32)
with torch.autocast("cpu", dtype=torch.bfloat16):
    a = torch.tensor([[1.0, 2.0], [3.0, 4.0]]) @ torch.tensor([[0.5], [0.25]])
    losses += a.float().flatten().tolist() + [torch.is_autocast_enabled("cpu")]
losses += [torch.is_autocast_enabled("cpu"), 0.5]
losses.insert(0, 1.0)
'''

# activation hooks: forward pre-hooks rescaling inputs (with_kwargs), forward hooks collecting
# activations and replacing an output, one prepended, full backward pre-hooks scaling the
# gradient, a post-accumulate-grad hook, and a handle removed mid-training
HOOKS = '''
model = init(nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 4), nn.ReLU(),
                           nn.Linear(4, 1)), seed=1205, scale=0.5)
acts, order, accum = {}, [], []

def save(name):
    def hook(module, args, output):
        acts[name] = output.detach()
        order.append(name)
    return hook

def pre(module, args, kwargs):
    return (args[0] * 0.5,), kwargs

def replace(module, args, output):
    order.append("replace")
    return output + 0.1

def grad_pre(module, grad_output):
    return (grad_output[0] * 2.0,)

handles = [model[i].register_forward_hook(save(str(i))) for i in (1, 3)]
handles.append(model[0].register_forward_pre_hook(pre, with_kwargs=True))
handles.append(model[3].register_forward_hook(replace, prepend=True))
handles.append(model[4].register_full_backward_pre_hook(grad_pre))
handles.append(model[0].weight.register_post_accumulate_grad_hook(
    lambda p: accum.append(float(p.grad.norm()))))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
rng = np.random.default_rng(1206)
X = torch.tensor(rng.standard_normal((8, 3)))
Y = torch.tensor(rng.standard_normal((8, 1)))
for step in range(6):
    if step == 3:
        handles[3].remove()
    loss = F.mse_loss(model(X), Y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), float(acts["1"].sum()), float(acts["3"].sum()), accum[-1]]
losses += [order.count("replace"), order[:3] == ["replace", "1", "3"], len(order), loss.item()]
'''

# parametrizations: orthogonal under each map (matrix_exp, cayley, householder) trained to a
# rotation, weight_norm's g/v split, parametrize.cached() reusing one weight, and
# remove_parametrizations leaving the trained weight behind
PARAMETRIZATIONS = '''
from torch.nn.utils import parametrize
from torch.nn.utils.parametrizations import orthogonal, weight_norm

rng = np.random.default_rng(1207)
target = torch.tensor(np.linalg.qr(rng.standard_normal((4, 4)))[0])
X = torch.tensor(rng.standard_normal((10, 4)))
for kind in ("matrix_exp", "cayley", "householder"):
    lin = init(nn.Linear(4, 4, bias=False), seed=1208, scale=0.3)
    orthogonal(lin, orthogonal_map=kind, use_trivialization=kind != "householder")
    opt = torch.optim.Adam(lin.parameters(), lr=0.05)
    for step in range(4):
        loss = F.mse_loss(lin(X), X @ target.T)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    w = lin.weight
    losses += [float((w @ w.T - torch.eye(4)).abs().max() < 1e-9)]
lin = init(weight_norm(nn.Linear(4, 3), dim=0), seed=1209, scale=0.4)
opt = torch.optim.SGD(lin.parameters(), lr=0.1)
for step in range(4):
    with parametrize.cached():
        out = lin(X) + lin(X * 0.5)
    loss = out.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), float(lin.parametrizations.weight.original0.grad.norm())]
w = lin.weight.detach().clone()
parametrize.remove_parametrizations(lin, "weight", leave_parametrized=True)
losses += [float((lin.weight - w).abs().max()), isinstance(lin.weight, nn.Parameter),
           len(list(lin.parameters())), loss.item()]
'''

# per-sample gradients by torch.func: vmap of grad over functional_call (checked against a loop
# of backward calls), grad_and_value with has_aux, jacrev and jacfwd of the model's output, and
# the Hessian of the loss in one parameter; then a clipped, noised (NumPy) DP-style step
FUNC_PERSAMPLE = '''
from torch.func import functional_call, grad, grad_and_value, hessian, jacfwd, jacrev, vmap

model = init(nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)), seed=1210, scale=0.5)
params = {k: v.detach() for k, v in model.named_parameters()}
rng = np.random.default_rng(1211)
X = torch.tensor(rng.standard_normal((5, 3)))
Y = torch.tensor(rng.integers(0, 2, 5))

def loss_fn(p, x, y):
    out = functional_call(model, p, (x[None],))
    return F.cross_entropy(out, y[None]), out

for step in range(4):
    per = vmap(grad(lambda p, x, y: loss_fn(p, x, y)[0]), in_dims=(None, 0, 0))(params, X, Y)
    (g1, (l1, out1)) = grad_and_value(loss_fn, has_aux=True)(params, X[0], Y[0])
    model.zero_grad()
    F.cross_entropy(model(X[:1]), Y[:1]).backward()
    same = max(float((per[k][0] - model.get_parameter(k).grad).abs().max()) for k in params)
    norms = torch.stack([g.flatten(1).norm(dim=1) for g in per.values()]).norm(dim=0)
    factor = (1.0 / norms).clamp(max=1.0)
    noise = {k: torch.tensor(rng.standard_normal(tuple(v.shape))) * 0.01 for k, v in params.items()}
    params = {k: v - 0.5 * ((per[k] * factor.view(-1, *[1] * (per[k].ndim - 1))).mean(0)
                            + noise[k]) for k, v in params.items()}
    with torch.no_grad():
        for k, v in params.items():
            model.get_parameter(k).copy_(v)
    losses += [float(same < 1e-12), float(norms.sum()), l1.item(), float(g1["0.weight"].norm())]
f = lambda x: functional_call(model, params, (x,))
jr, jf = jacrev(f)(X[0]), jacfwd(f)(X[0])
H = hessian(lambda b: F.cross_entropy(functional_call(model, {**params, "2.bias": b}, (X,)), Y))(
    params["2.bias"])
bj = vmap(jacrev(f))(X)
losses += jr.flatten().tolist() + [float((jr - jf).abs().max() < 1e-12)] + H.flatten().tolist()
losses += [float(bj.norm()), tuple(bj.shape) == (5, 2, 3)]
losses.append(F.cross_entropy(model(X), Y).item())
losses.insert(0, 2.0)
'''

# attention written with einsum in every spelling: explicit heads, ellipsis batch dims, the
# sublist form, a bilinear score with three operands, a diagonal trace, and a batched outer
# product; trained as a small classifier
EINSUM_ATTN = '''
class EinAttn(nn.Module):
    def __init__(self, d=6, h=2):
        super().__init__()
        self.h = h
        self.wq = nn.Parameter(torch.randn(h, d, d // h))
        self.wk = nn.Parameter(torch.randn(h, d, d // h))
        self.wv = nn.Parameter(torch.randn(h, d, d // h))
        self.wo = nn.Parameter(torch.randn(h, d // h, d))
        self.bil = nn.Parameter(torch.randn(d, d))
        self.head = nn.Linear(d, 2)

    def forward(self, x):
        q = torch.einsum("btd,hde->bhte", x, self.wq)
        k = torch.einsum("...td,hde->...hte", x, self.wk)
        v = torch.einsum(x, [0, 1, 2], self.wv, [3, 2, 4], [0, 3, 1, 4])
        s = torch.einsum("bhqe,bhke->bhqk", q, k) / (q.shape[-1] ** 0.5)
        a = s.softmax(-1)
        o = torch.einsum("bhqk,bhke,hed->bqd", a, v, self.wo)
        pooled = o.mean(1)
        score = torch.einsum("bi,ij,bj->b", pooled, self.bil, pooled)
        return self.head(pooled) + score[:, None] * 0.01, a

model = init(EinAttn(), seed=1212, scale=0.4)
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
rng = np.random.default_rng(1213)
X = torch.tensor(rng.standard_normal((4, 5, 6)))
Y = torch.tensor([0, 1, 1, 0])
for step in range(6):
    logits, a = model(X)
    loss = F.cross_entropy(logits, Y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), float(model.wv.grad.norm()), float(model.bil.grad.norm())]
M = torch.tensor(rng.standard_normal((3, 3)))
losses += [float(torch.einsum("ii", M)), float(torch.einsum("ii->i", M).sum()),
           float(torch.einsum("bi,bj->bij", X[:, 0], X[:, 1]).sum()),
           float(torch.einsum("i,i->", X[0, 0], X[0, 1])), a.sum().item(), loss.item()]
'''

# losses built from scatter and gather: per-class centroids by scatter_reduce (mean, amax,
# amin, prod with and without include_self), a segment softmax by index_add_, a gather of the
# target log-probability, a bincount-weighted loss, and index_reduce
SCATTER_LOSSES = '''
rng = np.random.default_rng(1214)
net = init(nn.Sequential(nn.Linear(3, 6), nn.Tanh(), nn.Linear(6, 4)), seed=1215, scale=0.5)
opt = torch.optim.Adam(net.parameters(), lr=1e-2)
X = torch.tensor(rng.standard_normal((12, 3)))
cls = torch.tensor(rng.integers(0, 3, 12))
seg = torch.tensor(np.sort(rng.integers(0, 4, 12)))
for step in range(6):
    z = net(X)
    idx = cls[:, None].expand(-1, 4)
    cent = torch.zeros(3, 4).scatter_reduce(0, idx, z, "mean", include_self=False)
    hi = torch.full((3, 4), -5.0).scatter_reduce(0, idx, z, "amax")
    lo = torch.zeros(3, 4).scatter_reduce(0, idx, z, "amin", include_self=False)
    pr = torch.ones(3, 4).scatter_reduce(0, idx, z.tanh(), "prod")
    pull = (z - cent.gather(0, idx)).pow(2).sum(1).mean()
    spread = (hi - lo).mean() + pr.sum() * 0.1
    e = z[:, 0].exp()
    denom = torch.zeros(4).index_add_(0, seg, e)
    seg_soft = e / denom[seg]
    logp = F.log_softmax(z[:, :3], 1).gather(1, cls[:, None]).squeeze(1)
    counts = torch.bincount(cls, minlength=3).double()
    wl = -(logp / counts[cls]).sum()
    red = torch.zeros(4, 4).index_reduce(0, seg, z, "amax", include_self=False)
    loss = pull + 0.1 * spread + wl - 0.1 * (seg_soft * z[:, 1]).sum() + 0.01 * red.sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), pull.item(), float(spread), float(net[0].weight.grad.norm())]
losses.append(loss.item())
'''

# EmbeddingBag in every mode: sum with per_sample_weights and padding_idx, mean over 2-d
# input, max over offsets with include_last_offset, plus F.embedding_bag and an Embedding with
# max_norm renormalising its rows in place
EMBEDDING_BAG = '''
rng = np.random.default_rng(1216)
bag_sum = init(nn.EmbeddingBag(10, 4, mode="sum", padding_idx=0), seed=1217, scale=0.5)
bag_mean = init(nn.EmbeddingBag(10, 4, mode="mean"), seed=1218, scale=0.5)
bag_max = init(nn.EmbeddingBag(10, 4, mode="max", include_last_offset=True), seed=1219,
               scale=0.5)
emb = init(nn.Embedding(10, 4, max_norm=1.0), seed=1220, scale=1.0)
head = init(nn.Linear(16, 2), seed=1221, scale=0.4)
mods = nn.ModuleList([bag_sum, bag_mean, bag_max, emb, head])
opt = torch.optim.Adagrad(mods.parameters(), lr=0.1, lr_decay=0.01,
                          initial_accumulator_value=0.1)
flat = torch.tensor([1, 0, 3, 4, 4, 2, 7, 0, 9, 5])
offsets = torch.tensor([0, 3, 3, 6])
psw = torch.tensor(rng.random(10))
grid = torch.tensor(rng.integers(0, 10, (4, 3)))
y = torch.tensor([0, 1, 1, 0])
for step in range(6):
    a = bag_sum(flat, offsets, per_sample_weights=psw)
    b = bag_mean(grid)
    c = bag_max(flat, torch.tensor([0, 3, 3, 6, 10]))
    d = emb(grid).sum(1)
    e = F.embedding_bag(grid, emb.weight, mode="sum")
    loss = F.cross_entropy(head(torch.cat([a, b, c, d], 1)), y) + 0.01 * e.pow(2).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), float(bag_sum.weight.grad.norm()), float(bag_max.weight.grad.norm()),
               float(emb.weight.norm(dim=1).max())]
losses += [float(bag_sum.weight[0].abs().sum()), loss.item()]
'''

# sampling from a language model's logits: top-k and nucleus filtering by topk/sort/cumsum/
# scatter, temperature, then multinomial from a seeded Generator; torch's stream is its own,
# so the draws are compared by shape, support and repeatability, the filtering by value
SAMPLING = '''
lm = init(nn.Sequential(nn.Embedding(12, 6), nn.Linear(6, 12)), seed=1222, scale=0.6)
rng = np.random.default_rng(1223)
ctx = torch.tensor(rng.integers(0, 12, 5))

def filter_logits(logits, k, p, temp):
    logits = logits / temp
    kth = torch.topk(logits, k, dim=-1).values[..., -1, None]
    logits = logits.masked_fill(logits < kth, float("-inf"))
    srt, idx = torch.sort(logits, descending=True, dim=-1)
    cum = srt.softmax(-1).cumsum(-1)
    drop = cum - srt.softmax(-1) > p
    return logits.masked_fill(drop.scatter(-1, idx, drop), float("-inf"))

with torch.no_grad():
    logits = lm(ctx)
    for k, p, temp in ((5, 0.9, 1.0), (3, 0.5, 0.7), (12, 0.3, 1.3)):
        f = filter_logits(logits, k, p, temp)
        probs = f.softmax(-1)
        gen = torch.Generator().manual_seed(7)
        draw = torch.multinomial(probs, 20, replacement=True, generator=gen)
        again = torch.multinomial(probs, 20, replacement=True,
                                  generator=torch.Generator().manual_seed(7))
        ok = probs.gather(1, draw) > 0
        losses += [float(torch.isinf(f).sum()), float(probs.max()), float(ok.all()),
                   float((draw == again).all()), tuple(draw.shape) == (5, 20)]
    gen = torch.Generator().manual_seed(3)
    greedy = torch.multinomial(F.one_hot(torch.arange(4), 12).double(), 1, generator=gen)
    losses += greedy.flatten().tolist()
    nr = torch.multinomial(torch.ones(3, 6), 6, replacement=False, generator=gen)
    losses += nr.sort(-1).values.flatten().tolist()
'''

# the errors a training script trips over, each caught and logged by type and by the words its
# message shares with torch's: a shape mismatch in Linear, backward through a freed graph, an
# in-place write on a leaf that requires grad, a saved tensor changed in place, a loss that is
# not scalar, and cross_entropy's out-of-range target
ERRORS = '''
rng = np.random.default_rng(1224)
lin = init(nn.Linear(3, 2), seed=1225)

def caught(fn, kind, *words):
    try:
        fn()
    except kind as e:
        msg = str(e)
        losses.append(1.0 + sum(w in msg for w in words))
        return
    except Exception as e:
        losses.append(-1.0)
        return
    losses.append(0.0)

caught(lambda: lin(torch.ones(4, 5)), RuntimeError, "4x5", "3x2")
def twice():
    y = (lin(torch.ones(2, 3)) ** 2).sum()
    y.backward()
    y.backward()
caught(twice, RuntimeError, "second time")
def leaf():
    w = torch.ones(3, requires_grad=True)
    w.add_(1)
caught(leaf, RuntimeError, "leaf", "in-place")
def saved():
    a = torch.ones(3, requires_grad=True)
    b = a.exp()
    c = b.sum() * 1.0
    b.mul_(2)
    (b.exp().sum() + a.sigmoid().sum()).backward()
    d = a * 2
    e = d.sigmoid()
    d.add_(1)
    e.sum().backward()
caught(saved, RuntimeError, "modified by an in", "version 1")
caught(lambda: lin(torch.ones(2, 3)).backward(), RuntimeError, "scalar outputs")
caught(lambda: F.cross_entropy(torch.zeros(2, 3), torch.tensor([0, 3])), IndexError,
       "out of bounds")
caught(lambda: torch.ones(2, 3) @ torch.ones(2, 3), RuntimeError, "2x3")
caught(lambda: torch.cat([torch.ones(2, 3), torch.ones(3, 2)]), RuntimeError, "Sizes of tensors")
caught(lambda: torch.ones(2, 3).view(4, 2), RuntimeError, "shape '[4, 2]'", "size 6")
caught(lambda: nn.BatchNorm1d(3)(torch.ones(1, 3)), ValueError, "more than 1 value")
losses.insert(0, 9.0)
'''

# gradients at kinks and ties, where a script's loss sits on a boundary: relu/relu6/hardtanh/
# clamp at their edges, the shrinks at lambda, amax/max/median over tied values (split evenly,
# or to the one index picked), topk of two equal maxima (torch's kernel reports the later one
# first), maximum of equal operands, norms and distances at zero, quantiles between tied
# values; each value and weighted input gradient logged
BOUNDARY_GRADS = '''
x = torch.tensor([-3.0, -1.0, 0.0, 0.0, 1.0, 3.0, 6.0, 6.0, 0.5, -0.5], requires_grad=True)
fns = [F.relu, F.relu6, lambda v: F.hardtanh(v, -1.0, 1.0), lambda v: v.clamp(-1.0, 1.0),
       lambda v: F.leaky_relu(v, 0.1), F.elu, lambda v: F.celu(v, 0.5), F.selu, torch.abs,
       F.hardsigmoid, F.hardswish, lambda v: F.softshrink(v, 0.5), lambda v: F.hardshrink(v, 0.5),
       lambda v: F.threshold(v, 0.0, -2.0), lambda v: F.rrelu(v, training=False),
       lambda v: v.amax().expand(3), lambda v: v.max().expand(3), lambda v: v.amin().expand(2),
       lambda v: v.view(2, 5).max(1).values, lambda v: v.view(2, 5).amax(1),
       lambda v: torch.maximum(v, v.flip(0)), lambda v: torch.fmax(v, torch.zeros(10)),
       lambda v: v.cummax(0).values, lambda v: v.median().expand(2),
       lambda v: v.view(2, 5).median(1).values, lambda v: v.kthvalue(3).values.expand(2),
       lambda v: (v - v.detach()).norm(), lambda v: torch.dist(v, v.detach()),
       lambda v: torch.cdist(v.view(5, 2), v.view(5, 2)), lambda v: F.pdist(v.view(5, 2)),
       lambda v: v.view(5, 2).norm(dim=1, p=float("inf")), lambda v: v.view(5, 2).norm(dim=1, p=1),
       lambda v: v.quantile(torch.tensor([0.25, 0.7]), interpolation="midpoint"),
       lambda v: v.mode().values.expand(1), lambda v: v.topk(4).values,
       lambda v: v.prod().expand(1), lambda v: v.cumprod(0),
       lambda v: torch.std(v.view(2, 5)[:, 2:4], dim=1), lambda v: v.view(2, 5).logsumexp(1),
       lambda v: torch.special.entr(v), lambda v: torch.xlogy(v.abs(), v.abs())]
for f in fns:
    o = f(x)
    weights = torch.arange(1.0, o.numel() + 1).view(o.shape)
    g, = torch.autograd.grad((o * weights).sum(), x)
    losses += [float(torch.nan_to_num(o, nan=7.0).sum())] + torch.nan_to_num(g, nan=7.0).tolist()
losses.insert(0, 5.0)
'''

# maximum-likelihood fits of a dozen distributions' parameters (through softplus), each step's
# negative log-likelihood, entropy and closed-form KL to a reference, then the fitted
# distributions' means, variances, cdfs and icdfs
DIST_MLE = '''
import torch.distributions as D

rng = np.random.default_rng(1226)
x01 = torch.tensor(rng.beta(2.0, 5.0, 30))
xpos = torch.tensor(rng.gamma(2.0, 1.5, 30))
xr = torch.tensor(rng.standard_t(4.0, 30))
cnt = torch.tensor(rng.poisson(3.0, 30)).double()
raw = nn.Parameter(torch.zeros(12, 2))
opt = torch.optim.Adam([raw], lr=0.1)

def dists():
    a, b = F.softplus(raw[:, 0]) + 0.05, F.softplus(raw[:, 1]) + 0.05
    return [(D.Beta(a[0], b[0]), x01), (D.Kumaraswamy(a[1], b[1]), x01),
            (D.Gamma(a[2], b[2]), xpos), (D.Weibull(b[3], a[3]), xpos),
            (D.LogNormal(raw[4, 0], b[4]), xpos), (D.StudentT(a[5], raw[5, 1], b[5]), xr),
            (D.Laplace(raw[6, 0], b[6]), xr), (D.Gumbel(raw[7, 0], b[7]), xr),
            (D.Cauchy(raw[8, 0], b[8]), xr), (D.NegativeBinomial(a[9], logits=raw[9, 1]), cnt),
            (D.Poisson(a[10]), cnt), (D.ContinuousBernoulli(logits=raw[11, 0]), x01)]

ref = D.Gamma(torch.tensor(2.0), torch.tensor(1.0))
for step in range(6):
    ds = dists()
    nll = sum(-d.log_prob(v).mean() for d, v in ds)
    kl = D.kl_divergence(ds[2][0], ref) + D.kl_divergence(ds[0][0], D.Beta(2.0, 2.0))
    loss = nll + 0.1 * kl
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), kl.item(), float(raw.grad.norm()),
               float(sum(d.entropy() for d, _ in ds if not isinstance(d, (D.Poisson,
                                                                       D.NegativeBinomial))))]
with torch.no_grad():
    for d, v in dists():
        losses += [float(d.mean), float(torch.nan_to_num(d.variance, posinf=-1.0))]
        for fn in ("cdf", "icdf"):
            try:
                losses.append(float(getattr(d, fn)(torch.tensor(0.3)).sum()))
            except NotImplementedError:
                losses.append(-1.0)
losses.append(loss.item())
'''

# a translation decoder: TransformerDecoder (pre-norm, SiLU, a final norm) under a causal mask
# with tgt_is_causal and key-padding masks on both sides, cross-attention weights read from a
# separate MultiheadAttention with add_bias_kv/add_zero_attn and per-head weights, and one with
# kdim/vdim for a differently sized memory
TRANSFORMER_DECODER = '''
class Decoder(nn.Module):
    def __init__(self, d=8, vocab=7):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        layer = nn.TransformerDecoderLayer(d, 2, 16, dropout=0.0, batch_first=True,
                                           norm_first=True, activation=F.silu)
        self.dec = nn.TransformerDecoder(layer, 2, norm=nn.LayerNorm(d))
        self.mem_proj = nn.MultiheadAttention(d, 2, kdim=5, vdim=3, batch_first=True)
        self.probe = nn.MultiheadAttention(d, 2, add_bias_kv=True, add_zero_attn=True,
                                           batch_first=True)
        self.out = nn.Linear(d, vocab)

    def forward(self, tgt, mem_k, mem_v, tgt_pad, mem_pad):
        q = self.emb(tgt)
        mem, _ = self.mem_proj(q[:, :1].expand(-1, mem_k.shape[1], -1), mem_k, mem_v)
        mask = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1])
        h = self.dec(q, mem, tgt_mask=mask, tgt_is_causal=True, tgt_key_padding_mask=tgt_pad,
                     memory_key_padding_mask=mem_pad)
        ctx, w = self.probe(h, mem, mem, key_padding_mask=mem_pad, average_attn_weights=False)
        return self.out(h + 0.5 * ctx), w

rng = np.random.default_rng(1227)
model = init(Decoder(), seed=1228, scale=0.3)
opt = torch.optim.Adam(model.parameters(), lr=5e-3)
tgt = torch.tensor(rng.integers(1, 7, (2, 5)))
tgt_pad = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
mem_pad = torch.tensor([[False] * 4, [False] * 2 + [True] * 2])
mem_k = torch.tensor(rng.standard_normal((2, 4, 5)))
mem_v = torch.tensor(rng.standard_normal((2, 4, 3)))
for step in range(6):
    logits, w = model(tgt[:, :-1], mem_k, mem_v, tgt_pad[:, :-1], mem_pad)
    keep = ~tgt_pad[:, 1:]
    loss = F.cross_entropy(logits[keep], tgt[:, 1:][keep])
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), float(w.sum()), float(model.probe.bias_k.grad.norm()),
               float(model.mem_proj.k_proj_weight.grad.norm())]
losses += list(w.shape) + [loss.item()]
'''

# nn.Module's bookkeeping: ModuleDict/ParameterList/ParameterDict, a non-persistent and a None
# buffer, an aliased submodule, state_dict keys with a prefix and keep_vars, load_state_dict
# with assign=True, state-dict hooks, deepcopy keeping the alias, zero_grad(set_to_none=False),
# half()/to(float64), apply, Sequential insert/append/extend/pop
MODULE_API = '''
import copy

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 4)
        self.b = nn.ModuleDict({"x": nn.Linear(4, 4), "y": nn.BatchNorm1d(4)})
        self.plist = nn.ParameterList([nn.Parameter(torch.ones(2)), nn.Parameter(torch.zeros(3))])
        self.pdict = nn.ParameterDict({"s": nn.Parameter(torch.tensor(2.0))})
        self.register_buffer("tmp", torch.arange(3.0), persistent=False)
        self.register_buffer("none", None)
        self.register_buffer("keep", torch.ones(2))
        self.shared = self.a

    def forward(self, x):
        h = self.b["y"](self.b["x"](self.a(x).relu()))
        return h.sum(1) * self.pdict["s"] + self.plist[0].sum() + self.keep.sum()

net = init(Net(), seed=1229)
sd = net.state_dict()
losses += [len(sd), len(list(net.parameters())),
           len(list(net.named_parameters(remove_duplicate=False))), len(list(net.modules())),
           len(list(net.named_modules(remove_duplicate=False))), len(list(net.buffers()))]
losses += [float(k in sd) for k in ("tmp", "none", "shared.weight", "b.y.num_batches_tracked")]
losses += [len(k) for k in sd]
sd2 = net.state_dict(prefix="pre.", keep_vars=True)
losses += [float(sd2["pre.a.weight"].requires_grad), float(sd["a.weight"].requires_grad)]
net2 = Net()
res = net2.load_state_dict(sd, assign=True)
losses += [float(net2.a.weight.data_ptr() == sd["a.weight"].data_ptr()), len(res.missing_keys)]
calls = []
net.register_state_dict_pre_hook(lambda m, prefix, keep_vars: calls.append(prefix))
net.a.register_state_dict_post_hook(lambda m, sd, prefix, meta: sd.update({prefix + "x": 1}))
losses += [len(net.state_dict()), len(calls)]
x = torch.tensor(np.random.default_rng(1230).standard_normal((5, 3)))
opt = torch.optim.SGD(net.parameters(), lr=0.05)
for step in range(4):
    out = net(x)
    loss = out.pow(2).mean()
    opt.zero_grad(set_to_none=False)
    loss.backward()
    opt.step()
    losses += [loss.item(), float(net.shared.weight.grad.norm()), float(net.pdict["s"])]
c = copy.deepcopy(net)
losses += c(x).tolist() + [float(c.shared is c.a)]
net.zero_grad(set_to_none=False)
losses.append(float(net.a.weight.grad.abs().sum()))
net.half()
losses += [float(net.a.weight.dtype == torch.float16), float(net.keep.dtype == torch.float16),
           float(net.b.y.num_batches_tracked.dtype == torch.int64)]
net.to(torch.float64)
net.apply(lambda m: nn.init.zeros_(m.bias) if isinstance(m, nn.Linear) else None)
net.eval()
losses += [float(net.a.bias.abs().sum()), float(net.get_submodule("b.x").weight.sum()),
           float(net.get_parameter("pdict.s")), float(net.b.y.training), net(x).sum().item()]
seq = nn.Sequential(nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 1))
seq.insert(1, nn.Tanh())
seq.append(nn.Sigmoid())
seq.extend([nn.Identity()])
losses += [len(seq), len(seq[1:3]), float(isinstance(seq[-2], nn.Sigmoid))]
seq.pop(0)
losses += [len(seq), loss.item()]
'''

# custom autograd Functions as libraries write them now: setup_context with a
# non-differentiable second output and a jvp, generate_vmap_rule under vmap, forward-mode AD
# through modules with dual tensors, checkpoint(use_reentrant=False) with keyword arguments,
# hooks on non-leaf tensors and create_graph backward into .grad
AUTOGRAD_FUNCS = '''
import torch.autograd.forward_ad as fwAD
from torch.func import vmap
from torch.utils.checkpoint import checkpoint

class LeakyClip(torch.autograd.Function):
    @staticmethod
    def forward(x, lo):
        return x.clamp(min=lo), x < lo

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.mark_non_differentiable(output[1])
        ctx.save_for_backward(output[1])

    @staticmethod
    def backward(ctx, g, g_mask):
        m, = ctx.saved_tensors
        return g * (~m) + 0.1 * g * m, None

    @staticmethod
    def jvp(ctx, t, _):
        return t, None

class Cube(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return x ** 3

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 3 * x ** 2 * g

def block(u, lin, scale=1.0):
    return torch.tanh(lin(u) * scale)

rng = np.random.default_rng(1231)
lin = init(nn.Linear(4, 4), seed=1232, scale=0.5)
head = init(nn.Linear(4, 1), seed=1233, scale=0.5)
opt = torch.optim.SGD([*lin.parameters(), *head.parameters()], lr=0.1)
X = torch.tensor(rng.standard_normal((6, 4)))
Y = torch.tensor(rng.standard_normal((6, 1)))
for step in range(5):
    h = checkpoint(block, X, lin, use_reentrant=False, scale=2.0)
    c, mask = LeakyClip.apply(h, -0.2)
    c.register_hook(lambda g: g * 1.5)
    out = head(vmap(Cube.apply)(c) * 0.3 + c)
    loss = F.mse_loss(out, Y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), float(mask.sum()), float(lin.weight.grad.norm()),
               float(mask.requires_grad)]
with fwAD.dual_level():
    dx = fwAD.make_dual(X[0], torch.ones(4))
    y = F.softplus(LeakyClip.apply(lin(dx), 0.0)[0]).log_softmax(-1)
    p, t = fwAD.unpack_dual(y)
    losses += p.tolist() + t.tolist()
w = torch.tensor(rng.standard_normal(4), requires_grad=True)
(w.exp() * w).sum().backward(create_graph=True)
gg, = torch.autograd.grad(w.grad.sum(), w)
losses += gg.tolist() + [loss.item()]
'''

# one regression fitted by every optimizer in its rarer settings (amsgrad with weight decay,
# a tensor lr, decoupled NAdam/RAdam, Adamax, Adagrad, dampened and nesterov SGD, ASGD, Rprop
# with its bounds, centered RMSprop, Adadelta, maximize, Adafactor), with the state's size
OPTIMIZERS = '''
rng = np.random.default_rng(1234)
X = torch.tensor(rng.standard_normal((8, 3)))
Y = torch.tensor(rng.standard_normal((8, 2)))
O = torch.optim
makers = [lambda p: O.Adam(p, lr=1e-2, amsgrad=True, weight_decay=0.1, foreach=False),
          lambda p: O.Adam(p, lr=torch.tensor(0.01), betas=(0.8, 0.9)),
          lambda p: O.NAdam(p, lr=1e-2, weight_decay=0.1, decoupled_weight_decay=True),
          lambda p: O.RAdam(p, lr=1e-2, weight_decay=0.1, decoupled_weight_decay=True),
          lambda p: O.Adamax(p, lr=1e-2, weight_decay=0.05),
          lambda p: O.Adagrad(p, lr=0.1, weight_decay=0.1),
          lambda p: O.SGD(p, lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.01),
          lambda p: O.SGD(p, lr=0.05, momentum=0.9, nesterov=True),
          lambda p: O.ASGD(p, lr=0.05, t0=2, lambd=1e-3),
          lambda p: O.Rprop(p, lr=0.01, etas=(0.3, 1.5), step_sizes=(1e-4, 0.1)),
          lambda p: O.RMSprop(p, lr=1e-2, alpha=0.8, eps=1e-6, weight_decay=0.1, momentum=0.3,
                              centered=True),
          lambda p: O.Adadelta(p, lr=0.5, rho=0.8, weight_decay=0.1),
          lambda p: O.AdamW(p, lr=1e-2, weight_decay=0.3, amsgrad=True),
          lambda p: O.Adafactor(p, lr=1e-2),
          lambda p: O.Adafactor(p, lr=1e-2, beta2_decay=-0.5, d=2.0, weight_decay=0.1,
                                eps=(None, 1e-3))]
first = None
for make in makers:
    model = init(nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)), seed=1235, scale=0.5)
    opt = make(model.parameters())
    for step in range(4):
        loss = F.mse_loss(model(X), Y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        first = loss.item() if first is None else first
    losses += [loss.item(), float(model[0].weight.sum()), len(opt.state_dict()["state"])]
losses.insert(0, first)
losses.append(F.mse_loss(model(X), Y).item())
'''

PROGRAMS = {name.lower(): source for name, source in [
    ("WGAN_GP", WGAN_GP),
    ("AUTOCAST_BF16", AUTOCAST_BF16),
    ("HOOKS", HOOKS),
    ("PARAMETRIZATIONS", PARAMETRIZATIONS),
    ("FUNC_PERSAMPLE", FUNC_PERSAMPLE),
    ("EINSUM_ATTN", EINSUM_ATTN),
    ("SCATTER_LOSSES", SCATTER_LOSSES),
    ("EMBEDDING_BAG", EMBEDDING_BAG),
    ("SAMPLING", SAMPLING),
    ("ERRORS", ERRORS),
    ("BOUNDARY_GRADS", BOUNDARY_GRADS),
    ("DIST_MLE", DIST_MLE),
    ("TRANSFORMER_DECODER", TRANSFORMER_DECODER),
    ("MODULE_API", MODULE_API),
    ("AUTOGRAD_FUNCS", AUTOGRAD_FUNCS),
    ("OPTIMIZERS", OPTIMIZERS),
]}

# programs whose logged figures are not a falling loss
NOT_TRAINING = {"wgan_gp", "sampling", "errors", "boundary_grads", "module_api"}


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning",
                            "ignore::DeprecationWarning")
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_program_matches_torch(name):
    assert_matches_torch(PROGRAMS[name], trains=name not in NOT_TRAINING)
