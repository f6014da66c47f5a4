"""An eighth set of real-world PyTorch programs run unchanged with `torch` mapped to flowgrad
(the shim and runner of test_torch_programs.py), each giving torch's losses, gradient norms and
final parameters step for step in float64: StyleGAN2's modulated convolution (grouped per-sample
weights, demodulation, noise injection, path-length regularisation), CycleGAN (reflection
padding, instance norm, transposed convs, an image pool, two optimizers over chained
parameters), a Kolmogorov-Arnold network on B-spline bases, ArcFace/CosFace margins with a
center loss, NFNet's scaled weight-standardised convs with adaptive gradient clipping, PCGrad
with uncertainty-weighted multi-task losses, FedAvg over BatchNorm state dicts, ToMe token
merging, and Slot Attention. Weights, data and noise come from NumPy."""
import pytest
from test_torch_programs import assert_matches_torch

# StyleGAN2 (Karras et al.): an equalised-lr mapping network, modulated 3x3 convs run as one
# grouped conv over the batch with demodulation, per-pixel noise with a learned strength, a
# leaky-ReLU gain of sqrt 2, toRGB skips upsampled bilinearly, and the path-length penalty
STYLEGAN_MODCONV = '''
import math

class EqualLinear(nn.Module):
    def __init__(self, i, o, lr_mul=1.0, bias_init=0.0):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(o, i) / lr_mul)
        self.bias = nn.Parameter(torch.full((o,), float(bias_init)))
        self.scale, self.lr_mul = (1 / math.sqrt(i)) * lr_mul, lr_mul

    def forward(self, x):
        return F.linear(x, self.weight * self.scale, self.bias * self.lr_mul)

class ModConv(nn.Module):
    def __init__(self, cin, cout, k, w_dim, demod=True):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(1, cout, cin, k, k))
        self.mod = EqualLinear(w_dim, cin, bias_init=1.0)
        self.scale, self.pad, self.demod = 1 / math.sqrt(cin * k * k), k // 2, demod
        self.noise_strength = nn.Parameter(torch.zeros(()))

    def forward(self, x, w, noise=None):
        b, cin, h, wd = x.shape
        s = self.mod(w).view(b, 1, cin, 1, 1)
        weight = self.scale * self.weight * s
        if self.demod:
            weight = weight * torch.rsqrt(weight.pow(2).sum([2, 3, 4], keepdim=True) + 1e-8)
        weight = weight.view(-1, cin, *weight.shape[3:])
        out = F.conv2d(x.reshape(1, b * cin, h, wd), weight, padding=self.pad, groups=b)
        out = out.view(b, -1, h, wd)
        if noise is not None:
            out = out + self.noise_strength * noise
        return out

class Synth(nn.Module):
    def __init__(self, w_dim=6):
        super().__init__()
        self.mapping = nn.Sequential(EqualLinear(4, w_dim, lr_mul=0.1), nn.LeakyReLU(0.2),
                                     EqualLinear(w_dim, w_dim, lr_mul=0.1))
        self.const = nn.Parameter(torch.randn(1, 4, 2, 2))
        self.conv1 = ModConv(4, 4, 3, w_dim)
        self.conv2 = ModConv(4, 3, 3, w_dim)
        self.rgb1 = ModConv(4, 2, 1, w_dim, demod=False)
        self.rgb2 = ModConv(3, 2, 1, w_dim, demod=False)
        self.bias1, self.bias2 = nn.Parameter(torch.zeros(1, 4, 1, 1)), \\
            nn.Parameter(torch.zeros(1, 3, 1, 1))

    def forward(self, z, noises):
        w = self.mapping(F.normalize(z, dim=1) * math.sqrt(z.shape[1]))
        x = self.const.expand(z.shape[0], -1, -1, -1)
        x = F.leaky_relu(self.conv1(x, w, noises[0]) + self.bias1, 0.2) * math.sqrt(2)
        img = self.rgb1(x, w)
        x = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
        x = F.leaky_relu(self.conv2(x, w, noises[1]) + self.bias2, 0.2) * math.sqrt(2)
        img = F.interpolate(img, scale_factor=2, mode="bilinear", align_corners=False)
        return img + self.rgb2(x, w), w

G = init(Synth(), seed=800, scale=0.5)
opt = torch.optim.Adam(G.parameters(), lr=2e-3, betas=(0.0, 0.99))
rng = np.random.default_rng(801)
target = torch.tensor(rng.standard_normal((1, 2, 4, 4))) * 0.5
pl_mean = torch.zeros(())
for step in range(5):
    z = torch.tensor(rng.standard_normal((3, 4)))
    noises = [torch.tensor(rng.standard_normal((3, 1, 2, 2))),
              torch.tensor(rng.standard_normal((3, 1, 4, 4)))]
    img, w = G(z, noises)
    rec = F.mse_loss(img, target.expand_as(img))
    pl_noise = torch.tensor(rng.standard_normal(img.shape)) / math.sqrt(16)
    grad_w, = torch.autograd.grad((img * pl_noise).sum(), w, create_graph=True)
    lengths = grad_w.pow(2).sum(1).sqrt()
    pl_mean = pl_mean.lerp(lengths.mean().detach(), 0.01)
    pl = (lengths - pl_mean).pow(2).mean()
    loss = rec + 0.5 * pl
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [rec.item(), pl.item(), float(G.conv1.weight.grad.norm()),
               float(G.conv2.noise_strength.grad)]
losses.append(rec.item())
'''

# CycleGAN (Zhu et al.): ResNet-ish generators with ReflectionPad2d, InstanceNorm2d and
# ConvTranspose2d (output_padding), PatchGAN critics, LSGAN + cycle + identity losses, one Adam
# over itertools.chain of both generators, a 50%-replay image pool, a linear-decay LambdaLR
CYCLEGAN = '''
import itertools

def gen():
    return nn.Sequential(
        nn.ReflectionPad2d(1), nn.Conv2d(2, 4, 3), nn.InstanceNorm2d(4), nn.ReLU(True),
        nn.Conv2d(4, 6, 3, stride=2, padding=1), nn.InstanceNorm2d(6, affine=True), nn.ReLU(True),
        nn.ConvTranspose2d(6, 4, 3, stride=2, padding=1, output_padding=1),
        nn.InstanceNorm2d(4), nn.ReLU(True), nn.ReflectionPad2d(1), nn.Conv2d(4, 2, 3), nn.Tanh())

def critic():
    return nn.Sequential(nn.Conv2d(2, 4, 4, stride=2, padding=1), nn.LeakyReLU(0.2, True),
                         nn.Conv2d(4, 6, 3, padding=1), nn.InstanceNorm2d(6),
                         nn.LeakyReLU(0.2, True), nn.Conv2d(6, 1, 3, padding=1))

class ImagePool:
    def __init__(self, size, rng):
        self.size, self.images, self.rng = size, [], rng

    def query(self, images):
        out = []
        for image in images.detach():
            image = image.unsqueeze(0)
            if len(self.images) < self.size:
                self.images.append(image)
                out.append(image)
            elif self.rng.random() > 0.5:
                i = int(self.rng.integers(0, self.size))
                out.append(self.images[i].clone())
                self.images[i] = image
            else:
                out.append(image)
        return torch.cat(out, 0)

G_AB, G_BA = init(gen(), seed=802, scale=0.3), init(gen(), seed=803, scale=0.3)
D_A, D_B = init(critic(), seed=804, scale=0.3), init(critic(), seed=805, scale=0.3)
opt_G = torch.optim.Adam(itertools.chain(G_AB.parameters(), G_BA.parameters()), lr=2e-3,
                         betas=(0.5, 0.999))
opt_D = torch.optim.Adam(itertools.chain(D_A.parameters(), D_B.parameters()), lr=2e-3,
                         betas=(0.5, 0.999))
decay = lambda epoch: 1.0 - max(0, epoch - 2) / 4.0
sched_G = torch.optim.lr_scheduler.LambdaLR(opt_G, decay)
sched_D = torch.optim.lr_scheduler.LambdaLR(opt_D, decay)
rng = np.random.default_rng(806)
pool_A, pool_B = ImagePool(3, rng), ImagePool(3, rng)
mse, l1 = nn.MSELoss(), nn.L1Loss()
for step in range(5):
    real_A = torch.tensor(rng.standard_normal((2, 2, 6, 6))).tanh()
    real_B = torch.tensor(rng.standard_normal((2, 2, 6, 6))).tanh().flip(-1) * 0.5
    for p in itertools.chain(D_A.parameters(), D_B.parameters()):
        p.requires_grad = False
    fake_B, fake_A = G_AB(real_A), G_BA(real_B)
    pred = D_B(fake_B)
    g_gan = mse(pred, torch.ones_like(pred)) + mse(D_A(fake_A), torch.ones_like(pred))
    cycle = l1(G_BA(fake_B), real_A) + l1(G_AB(fake_A), real_B)
    ident = l1(G_AB(real_B), real_B) + l1(G_BA(real_A), real_A)
    g_loss = g_gan + 10 * cycle + 5 * ident
    opt_G.zero_grad()
    g_loss.backward()
    opt_G.step()
    for p in itertools.chain(D_A.parameters(), D_B.parameters()):
        p.requires_grad = True
    opt_D.zero_grad()
    d_losses = []
    for D, real, fake in ((D_A, real_A, pool_A.query(fake_A)), (D_B, real_B, pool_B.query(fake_B))):
        pr, pf = D(real), D(fake.detach())
        d = 0.5 * (mse(pr, torch.ones_like(pr)) + mse(pf, torch.zeros_like(pf)))
        d.backward()
        d_losses.append(d.item())
    opt_D.step()
    sched_G.step()
    sched_D.step()
    losses += [g_loss.item(), cycle.item()] + d_losses + [opt_G.param_groups[0]["lr"]]
losses += [float(G_AB[5].weight.grad.norm()), cycle.item()]
'''

# KAN (Liu et al.): each edge a SiLU base plus a B-spline on a uniform grid, the bases by the
# Cox-de Boor recursion from interval indicators, the spline coefficients by einsum
KAN = '''
class KANLinear(nn.Module):
    def __init__(self, i, o, grid_size=4, order=3, lo=-2.0, hi=2.0):
        super().__init__()
        h = (hi - lo) / grid_size
        grid = torch.arange(-order, grid_size + order + 1) * h + lo
        self.register_buffer("grid", grid.expand(i, -1).contiguous())
        self.order = order
        self.base = nn.Linear(i, o, bias=False)
        self.coef = nn.Parameter(torch.randn(o, i, grid_size + order))
        self.spline_scale = nn.Parameter(torch.ones(o, i))

    def bases(self, x):
        g = self.grid
        x = x.unsqueeze(-1)
        b = ((x >= g[:, :-1]) & (x < g[:, 1:])).to(x.dtype)
        for k in range(1, self.order + 1):
            b = (x - g[:, :-(k + 1)]) / (g[:, k:-1] - g[:, :-(k + 1)]) * b[..., :-1] + \\
                (g[:, k + 1:] - x) / (g[:, k + 1:] - g[:, 1:-k]) * b[..., 1:]
        return b

    def forward(self, x):
        coef = self.coef * self.spline_scale[..., None]
        spline = torch.einsum("bik,oik->bo", self.bases(x), coef)
        return self.base(F.silu(x)) + spline

model = nn.Sequential(KANLinear(2, 5), KANLinear(5, 1))
init(model, seed=807, scale=0.2)
rng = np.random.default_rng(808)
X = torch.tensor(rng.uniform(-1.5, 1.5, (48, 2)))
Y = (torch.exp(torch.sin(torch.pi * X[:, :1]) + X[:, 1:] ** 2))
opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=5, history_size=10)

def closure():
    opt.zero_grad()
    loss = F.mse_loss(model(X), Y) + 1e-3 * sum(m.coef.abs().mean() for m in model)
    loss.backward()
    return loss

for step in range(4):
    losses.append(opt.step(closure).item())
    losses.append(float(model[0].coef.grad.norm()))
with torch.no_grad():
    b = model[0].bases(X)
    losses += [float(b.sum(-1).min()), float(b.sum(-1).max())]
losses.append(F.mse_loss(model(X), Y).item())
'''

# face-recognition margins: ArcFace's additive angular margin (cos(theta + m) with the
# easy-margin fallback), CosFace's additive cosine margin, and a center loss whose centers
# are updated by their own SGD
ARCFACE = '''
import math

class ArcMargin(nn.Module):
    def __init__(self, d, classes, s=8.0, m=0.3):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(classes, d))
        self.s, self.m = s, m
        self.cos_m, self.sin_m = math.cos(m), math.sin(m)
        self.th, self.mm = math.cos(math.pi - m), math.sin(math.pi - m) * m

    def forward(self, x, label):
        cosine = F.linear(F.normalize(x), F.normalize(self.weight))
        sine = torch.sqrt((1.0 - torch.pow(cosine, 2)).clamp(0, 1))
        phi = cosine * self.cos_m - sine * self.sin_m
        phi = torch.where(cosine > self.th, phi, cosine - self.mm)
        one_hot = torch.zeros(cosine.size()).scatter_(1, label.view(-1, 1).long(), 1)
        return self.s * (one_hot * phi + (1.0 - one_hot) * cosine)

class CosMargin(nn.Module):
    def __init__(self, d, classes, s=8.0, m=0.2):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(classes, d))
        self.s, self.m = s, m

    def forward(self, x, label):
        cosine = F.normalize(x) @ F.normalize(self.weight, dim=1).T
        return self.s * (cosine - self.m * F.one_hot(label, cosine.shape[1]))

class CenterLoss(nn.Module):
    def __init__(self, classes, d):
        super().__init__()
        self.centers = nn.Parameter(torch.randn(classes, d))

    def forward(self, x, labels):
        dist = torch.cdist(x, self.centers).pow(2)
        mask = labels.unsqueeze(1).eq(torch.arange(self.centers.shape[0]))
        return (dist * mask).clamp(1e-12, 1e12).sum() / x.shape[0]

backbone = init(nn.Sequential(nn.Linear(5, 12), nn.PReLU(), nn.Linear(12, 4),
                              nn.BatchNorm1d(4)), seed=809, scale=0.4)
arc, cos, center = (init(ArcMargin(4, 3), seed=810), init(CosMargin(4, 3), seed=811),
                    init(CenterLoss(3, 4), seed=812))
opt = torch.optim.SGD([*backbone.parameters(), *arc.parameters(), *cos.parameters()], lr=0.1,
                      momentum=0.9, nesterov=True, weight_decay=5e-4)
opt_c = torch.optim.SGD(center.parameters(), lr=0.5)
rng = np.random.default_rng(813)
y = torch.tensor(rng.integers(0, 3, 18))
x = torch.tensor(rng.standard_normal((18, 5))) * 0.5 + F.one_hot(y, 5).double()
for step in range(6):
    emb = backbone(x)
    l_arc = F.cross_entropy(arc(emb, y), y)
    l_cos = F.cross_entropy(cos(emb, y), y, label_smoothing=0.1)
    l_center = center(emb, y)
    loss = l_arc + l_cos + 0.01 * l_center
    opt.zero_grad()
    opt_c.zero_grad()
    loss.backward()
    for p in center.parameters():
        p.grad.data *= 1.0 / 0.01
    opt.step()
    opt_c.step()
    losses += [l_arc.item(), l_cos.item(), l_center.item(), float(backbone[1].weight.grad)]
backbone.eval()
with torch.no_grad():
    logits = F.normalize(backbone(x)) @ F.normalize(arc.weight).T
    losses.append(float((logits.argmax(1) == y).double().mean()))
losses.append(loss.item())
'''

# NFNet (Brock et al.): normaliser-free ResNet blocks with scaled weight standardisation
# (var_mean over fan-in, a learned gain), the alpha/beta signal-propagation scalars, a skip gain,
# and adaptive gradient clipping by unit-wise norms before an SGD step
NFNET = '''
class ScaledStdConv2d(nn.Conv2d):
    def __init__(self, *args, gamma=1.0, eps=1e-6, **kw):
        super().__init__(*args, **kw)
        self.gain = nn.Parameter(torch.ones(self.out_channels, 1, 1, 1))
        self.scale, self.eps = gamma * self.weight[0].numel() ** -0.5, eps

    def forward(self, x):
        var, mean = torch.var_mean(self.weight, dim=[1, 2, 3], keepdim=True, unbiased=False)
        weight = (self.weight - mean) * (self.gain * self.scale) / torch.sqrt(var + self.eps)
        return F.conv2d(x, weight, self.bias, self.stride, self.padding, self.dilation, self.groups)

class NFBlock(nn.Module):
    def __init__(self, c, alpha, beta):
        super().__init__()
        self.alpha, self.beta = alpha, beta
        self.conv1 = ScaledStdConv2d(c, c, 3, padding=1, gamma=1.7139)
        self.conv2 = ScaledStdConv2d(c, c, 3, padding=1, groups=2, gamma=1.7139)
        self.skip_gain = nn.Parameter(torch.zeros(()))

    def forward(self, x):
        out = F.gelu(x) * self.beta
        out = self.conv2(F.gelu(self.conv1(out)))
        return x + out * self.alpha * self.skip_gain

def unitwise_norm(x):
    if x.ndim <= 1:
        return x.norm(2)
    return x.norm(2, dim=tuple(range(1, x.ndim)), keepdim=True)

def adaptive_clip_grad(parameters, clip=0.05, eps=1e-3):
    for p in parameters:
        if p.grad is None:
            continue
        p_norm = unitwise_norm(p.detach()).clamp_(min=eps)
        g_norm = unitwise_norm(p.grad.detach())
        max_norm = p_norm * clip
        clipped = p.grad.detach() * (max_norm / g_norm.clamp(min=1e-6))
        p.grad.detach().copy_(torch.where(g_norm < max_norm, p.grad, clipped))

class NFNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = ScaledStdConv2d(1, 4, 3, stride=2, padding=1)
        expected = 1.0
        blocks = []
        for _ in range(2):
            blocks.append(NFBlock(4, 0.2, 1.0 / expected))
            expected = (expected ** 2 + 0.2 ** 2) ** 0.5
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Linear(4, 3)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)).mean((2, 3)))

model = init(NFNet(), seed=814, scale=0.4)
with torch.no_grad():
    for b in model.blocks:
        b.skip_gain.fill_(0.5)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
rng = np.random.default_rng(815)
x = torch.tensor(rng.standard_normal((6, 1, 6, 6)))
y = torch.tensor([0, 1, 2, 0, 1, 2])
x[:, 0, :3] += y.double().view(-1, 1, 1)
for step in range(6):
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    raw = float(model.stem.weight.grad.norm())
    adaptive_clip_grad([p for n, p in model.named_parameters() if not n.startswith("head")])
    opt.step()
    losses += [loss.item(), raw, float(model.stem.weight.grad.norm())]
losses.append(loss.item())
'''

# multi-task learning: homoscedastic-uncertainty weighting (learned log-variances) and PCGrad's
# projection of conflicting per-task gradients, flattened by parameters_to_vector and written
# back with vector_to_parameters into .grad
PCGRAD = '''
import random
from torch.nn.utils import parameters_to_vector, vector_to_parameters

class MTL(nn.Module):
    def __init__(self):
        super().__init__()
        self.shared = nn.Sequential(nn.Linear(4, 12), nn.Tanh(), nn.Linear(12, 8), nn.Tanh())
        self.reg, self.cls = nn.Linear(8, 1), nn.Linear(8, 3)
        self.log_vars = nn.Parameter(torch.zeros(2))

    def forward(self, x):
        h = self.shared(x)
        return self.reg(h).squeeze(-1), self.cls(h)

model = init(MTL(), seed=816, scale=0.4)
shared = list(model.shared.parameters())
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
rng = np.random.default_rng(817)
random.seed(0)
X = torch.tensor(rng.standard_normal((20, 4)))
y_reg = X[:, 0] * 2 - X[:, 1]
y_cls = (X[:, 2] > 0).long() + (X[:, 3] > 1).long()
for step in range(6):
    r, c = model(X)
    task = [F.mse_loss(r, y_reg), F.cross_entropy(c, y_cls)]
    weighted = [torch.exp(-lv) * l + lv for l, lv in zip(task, model.log_vars)]
    opt.zero_grad()
    grads = []
    for i, l in enumerate(weighted):
        g = torch.autograd.grad(l, shared, retain_graph=True)
        grads.append(parameters_to_vector(g))
    conflicts = 0
    projected = [g.clone() for g in grads]
    for i, gi in enumerate(projected):
        order = [j for j in range(len(grads)) if j != i]
        random.shuffle(order)
        for j in order:
            dot = torch.dot(gi, grads[j])
            if dot < 0:
                gi -= dot / grads[j].norm() ** 2 * grads[j]
                conflicts += 1
    sum(weighted).backward()
    merged = torch.stack(projected).sum(0)
    holders = [torch.empty_like(p) for p in shared]
    vector_to_parameters(merged, holders)
    for p, g in zip(shared, holders):
        p.grad = g
    opt.step()
    losses += [t.item() for t in task] + [conflicts, float(merged.norm())]
losses += model.log_vars.tolist()
losses.append(sum(weighted).item())
'''

# FedAvg (McMahan et al.): clients deep-copy the global model, train locally (BatchNorm running
# stats included), and the server averages their state dicts key by key, integer
# num_batches_tracked included, weighted by client sizes
FEDAVG = '''
import copy

def make_net():
    return nn.Sequential(nn.Linear(3, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))

def fed_avg(states, sizes):
    total = sum(sizes)
    avg = copy.deepcopy(states[0])
    for key in avg.keys():
        avg[key] = avg[key] * sizes[0] / total
        for st, n in zip(states[1:], sizes[1:]):
            avg[key] += st[key] * n / total
    return avg

rng = np.random.default_rng(818)
clients = []
for k, n in enumerate([6, 10, 8]):
    x = torch.tensor(rng.standard_normal((n, 3))) + k * 0.3
    clients.append((x, (x.sum(1) > k * 0.9).long()))
global_model = init(make_net(), seed=819, scale=0.4)
for rnd in range(3):
    states, sizes = [], []
    for x, y in clients:
        local = copy.deepcopy(global_model)
        opt = torch.optim.SGD(local.parameters(), lr=0.1, momentum=0.5)
        for epoch in range(2):
            for i in range(0, len(x), 4):
                xb, yb = x[i:i + 4], y[i:i + 4]
                if len(xb) < 2:
                    continue
                loss = F.cross_entropy(local(xb), yb)
                opt.zero_grad()
                loss.backward()
                opt.step()
        states.append(local.state_dict())
        sizes.append(len(x))
        losses.append(loss.item())
    avg = fed_avg(states, sizes)
    losses += [float(avg["1.num_batches_tracked"]),
               avg["1.num_batches_tracked"].dtype == torch.float64]
    avg["1.num_batches_tracked"] = avg["1.num_batches_tracked"].round().long()
    global_model.load_state_dict(avg)
    losses += [float(global_model[1].running_var.sum()),
               int(global_model[1].num_batches_tracked)]
global_model.eval()
with torch.no_grad():
    losses.append(sum(F.cross_entropy(global_model(x), y).item() for x, y in clients))
'''

# ToMe (Bolya et al.): bipartite soft matching of alternate tokens by cosine similarity,
# argsort of each source token's best match, gather of the unmerged tokens and scatter_reduce
# (mean) of the merged ones, with size-weighted proportional attention
TOME = '''
import math

def bipartite_soft_matching(metric, r):
    a, b = metric[..., ::2, :], metric[..., 1::2, :]
    scores = a @ b.transpose(-1, -2)
    node_max, node_idx = scores.max(dim=-1)
    edge_idx = node_max.argsort(dim=-1, descending=True)[..., None]
    unm_idx, src_idx = edge_idx[..., r:, :], edge_idx[..., :r, :]
    dst_idx = node_idx[..., None].gather(dim=-2, index=src_idx)

    def merge(x, mode="mean"):
        src, dst = x[..., ::2, :], x[..., 1::2, :]
        n, t1, c = src.shape
        unm = src.gather(dim=-2, index=unm_idx.expand(n, t1 - r, c))
        src = src.gather(dim=-2, index=src_idx.expand(n, r, c))
        dst = dst.scatter_reduce(-2, dst_idx.expand(n, r, c), src, reduce=mode)
        return torch.cat([unm, dst], dim=1)
    return merge

class Block(nn.Module):
    def __init__(self, d=8, heads=2):
        super().__init__()
        self.h = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 16), nn.GELU(), nn.Linear(16, d))

    def forward(self, x, size, r):
        B, N, C = x.shape
        qkv = self.qkv(self.ln1(x)).reshape(B, N, 3, self.h, C // self.h).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        att = q @ k.transpose(-2, -1) / math.sqrt(C // self.h) + size.log()[:, None, None, :, 0]
        x = x + self.proj((att.softmax(-1) @ v).transpose(1, 2).reshape(B, N, C))
        metric = k.mean(1)
        merge = bipartite_soft_matching(metric / metric.norm(dim=-1, keepdim=True), r)
        x = merge(x * size, mode="sum")
        size = merge(size, mode="sum")
        x = x / size
        return x + self.mlp(self.ln2(x)), size

class ToMeViT(nn.Module):
    def __init__(self):
        super().__init__()
        self.patch = nn.Linear(4, 8)
        self.pos = nn.Parameter(torch.zeros(1, 12, 8))
        self.blocks = nn.ModuleList([Block(), Block()])
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        x = self.patch(x) + self.pos
        size = torch.ones(x.shape[0], x.shape[1], 1)
        for blk in self.blocks:
            x, size = blk(x, size, r=2)
        return self.head((x * size).sum(1) / size.sum(1)), size

model = init(ToMeViT(), seed=820, scale=0.4)
opt = torch.optim.AdamW(model.parameters(), lr=5e-3)
rng = np.random.default_rng(821)
x = torch.tensor(rng.standard_normal((4, 12, 4)))
y = torch.tensor([0, 1, 1, 0])
x[:, :, 0] += y.double().unsqueeze(1) * 2 - 1
for step in range(6):
    logits, size = model(x)
    loss = F.cross_entropy(logits, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), float(size.max()), float(model.pos.grad.norm())]
losses.append(loss.item())
'''

# Slot Attention (Locatello et al.): slots drawn from a learned Gaussian (noise from NumPy),
# softmax over the slot axis, attention renormalised over inputs, a GRUCell update and a
# residual MLP, iterated, with the spatial-broadcast decoder's alpha-mask mixture
SLOT_ATTENTION = '''
class SlotAttention(nn.Module):
    def __init__(self, slots=3, d=6, iters=3, eps=1e-8):
        super().__init__()
        self.k, self.iters, self.eps, self.scale = slots, iters, eps, d ** -0.5
        self.mu = nn.Parameter(torch.randn(1, 1, d))
        self.log_sigma = nn.Parameter(torch.zeros(1, 1, d))
        self.q, self.kk, self.v = (nn.Linear(d, d, bias=False) for _ in range(3))
        self.gru = nn.GRUCell(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 12), nn.ReLU(), nn.Linear(12, d))
        self.n_in, self.n_slots, self.n_mlp = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)

    def forward(self, inputs, noise):
        b, n, d = inputs.shape
        slots = self.mu + self.log_sigma.exp() * noise
        inputs = self.n_in(inputs)
        k, v = self.kk(inputs), self.v(inputs)
        for _ in range(self.iters):
            prev = slots
            q = self.q(self.n_slots(slots))
            attn = torch.einsum("bid,bjd->bij", q, k).mul(self.scale).softmax(dim=1) + self.eps
            attn = attn / attn.sum(dim=-1, keepdim=True)
            updates = torch.einsum("bjd,bij->bid", v, attn)
            slots = self.gru(updates.reshape(-1, d), prev.reshape(-1, d)).reshape(b, -1, d)
            slots = slots + self.mlp(self.n_mlp(slots))
        return slots, attn

class AutoEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(1, 6, 3, padding=1), nn.ReLU())
        self.pos = nn.Linear(2, 6)
        self.slots = SlotAttention()
        self.dec = nn.Sequential(nn.Linear(6 + 2, 12), nn.ReLU(), nn.Linear(12, 2))

    def forward(self, img, noise):
        b, _, h, w = img.shape
        ys, xs = torch.meshgrid(torch.linspace(0, 1, h), torch.linspace(0, 1, w), indexing="ij")
        grid = torch.stack([ys, xs], -1).reshape(1, h * w, 2)
        feats = self.enc(img).flatten(2).transpose(1, 2) + self.pos(grid)
        slots, attn = self.slots(feats, noise)
        k = slots.shape[1]
        dec_in = torch.cat([slots[:, :, None].expand(-1, -1, h * w, -1),
                            grid[:, None].expand(b, k, -1, -1)], -1)
        rgb, alpha = self.dec(dec_in).split(1, dim=-1)
        masks = alpha.softmax(dim=1)
        recon = (rgb * masks).sum(1).view(b, 1, h, w)
        return recon, masks, attn

model = init(AutoEncoder(), seed=822, scale=0.4)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
warm = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.2, total_iters=3)
rng = np.random.default_rng(823)
img = torch.zeros(2, 1, 5, 5)
img[0, 0, :2, :2], img[0, 0, 3:, 2:] = 1.0, -1.0
img[1, 0, 1:4, 1:4] = 0.8
for step in range(6):
    noise = torch.tensor(rng.standard_normal((2, 3, 6)))
    recon, masks, attn = model(img, noise)
    loss = F.mse_loss(recon, img)
    opt.zero_grad()
    loss.backward()
    opt.step()
    warm.step()
    losses += [loss.item(), float(model.slots.mu.grad.norm()), float(masks.detach().sum(1).mean())]
losses.append(loss.item())
'''


PROGRAMS = {name.lower(): source for name, source in [
    ("STYLEGAN_MODCONV", STYLEGAN_MODCONV),
    ("CYCLEGAN", CYCLEGAN),
    ("KAN", KAN),
    ("ARCFACE", ARCFACE),
    ("NFNET", NFNET),
    ("PCGRAD", PCGRAD),
    ("FEDAVG", FEDAVG),
    ("TOME", TOME),
    ("SLOT_ATTENTION", SLOT_ATTENTION),
]}

# programs whose last logged figure is not below their first (a summed evaluation loss)
NOT_TRAINING = {"fedavg"}


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_program_matches_torch(name):
    assert_matches_torch(PROGRAMS[name], trains=name not in NOT_TRAINING)
