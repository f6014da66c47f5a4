"""A fifth set of real-world PyTorch programs run unchanged with `torch` mapped to flowgrad (the
shim and runner of test_torch_programs.py), each giving torch's losses, gradient norms and
final parameters step for step in float64: a Mamba-1 selective scan (sequential against its
cumsum form), ConvNeXt (depthwise 7x7, channels-last LayerNorm, layer scale, drop path with a
given mask), SE-ResNet and MobileNetV3's hard SE, PixelCNN masked convolutions with causal
sampling, a DETR head (greedy matching on a cdist + GIoU cost, no-object weight), Deep Sets
and a Set Transformer, a neural ODE by RK4, Glow (ActNorm, invertible 1x1 by slogdet, affine
coupling), a Gumbel-softmax VAE, batch-hard/semi-hard triplet mining, Barlow Twins and VICReg,
seq2seq with Bahdanau attention and teacher-forcing coin flips, TabTransformer, quantile and
Gaussian-NLL heads, a Switch Transformer with expert capacity, ViT position-embedding
interpolation, a Conformer on SpecAugment masks, NAdam/Adagrad/RMSprop/Adamax/LBFGS under
OneCycleLR and CosineAnnealingWarmRestarts, a DCGAN with an R1 penalty, a hypernetwork by
functional_call, GraphSAGE/GIN by scatter_reduce, top-k/top-p decoding by searchsorted,
capsule routing, SIREN with gradient supervision, a masked autoencoder (unfold/fold, argsort
masking), N-BEATS, an energy-based model by Langevin dynamics, and sliced score matching.
Weights and data come from NumPy; programs drawing from torch's generator are not here (its
streams are not flowgrad's)."""
import pytest
from test_torch_programs import assert_matches_torch

# a Mamba-1 block: causal depthwise conv, input-dependent (selective) SSM, gating
MAMBA_S6 = '''
import math

class MambaBlock(nn.Module):
    def __init__(self, d=6, d_state=4, expand=2, d_conv=3):
        super().__init__()
        di = expand * d
        self.di, self.n = di, d_state
        self.dt_rank = math.ceil(d / 4)
        self.in_proj = nn.Linear(d, 2 * di, bias=False)
        self.conv1d = nn.Conv1d(di, di, d_conv, groups=di, padding=d_conv - 1)
        self.x_proj = nn.Linear(di, self.dt_rank + 2 * d_state, bias=False)
        self.dt_proj = nn.Linear(self.dt_rank, di)
        A = torch.arange(1, d_state + 1, dtype=torch.float64).repeat(di, 1)
        self.A_log = nn.Parameter(torch.log(A))
        self.D = nn.Parameter(torch.ones(di))
        self.out_proj = nn.Linear(di, d, bias=False)

    def ssm(self, x, parallel):
        A = -torch.exp(self.A_log.float().to(x.dtype))
        dbc = self.x_proj(x)
        delta, B, C = dbc.split([self.dt_rank, self.n, self.n], dim=-1)
        delta = F.softplus(self.dt_proj(delta))
        dA = torch.exp(torch.einsum("bld,dn->bldn", delta, A))
        dBx = torch.einsum("bld,bln,bld->bldn", delta, B, x)
        if parallel:
            # h_t = sum_{s<=t} exp(sum_{s<r<=t} log dA_r) dBx_s, by cumsum of logs
            logs = torch.einsum("bld,dn->bldn", delta, A).cumsum(1)
            L = x.shape[1]
            seg = logs.unsqueeze(2) - logs.unsqueeze(1)  # b, t, s, d, n
            tri = torch.tril(torch.ones(L, L, dtype=torch.bool))[None, :, :, None, None]
            w = torch.where(tri, seg, torch.full_like(seg, float("-inf"))).exp()
            h = (w * dBx.unsqueeze(1)).sum(2)
            y = torch.einsum("bldn,bln->bld", h, C)
        else:
            h = torch.zeros(x.shape[0], self.di, self.n)
            ys = []
            for t in range(x.shape[1]):
                h = dA[:, t] * h + dBx[:, t]
                ys.append(torch.einsum("bdn,bn->bd", h, C[:, t]))
            y = torch.stack(ys, dim=1)
        return y + x * self.D

    def forward(self, x, parallel=False):
        L = x.shape[1]
        xz = self.in_proj(x)
        x, z = xz.chunk(2, dim=-1)
        x = self.conv1d(x.transpose(1, 2))[..., :L].transpose(1, 2)
        x = F.silu(x)
        y = self.ssm(x, parallel) * F.silu(z)
        return self.out_proj(y)

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(5, 6)
        self.blocks = nn.ModuleList([MambaBlock(), MambaBlock()])
        self.norms = nn.ModuleList([nn.LayerNorm(6), nn.LayerNorm(6)])
        self.head = nn.Linear(6, 5)

    def forward(self, idx, parallel=False):
        x = self.emb(idx)
        for blk, norm in zip(self.blocks, self.norms):
            x = x + blk(norm(x), parallel)
        return self.head(x)

net = Net()
rng0 = np.random.default_rng(300)
with torch.no_grad():
    for name, p in net.named_parameters():
        if not name.endswith(("A_log", ".D")):
            p.copy_(torch.tensor(rng0.standard_normal(tuple(p.shape)) * 0.3))
opt = torch.optim.AdamW(net.parameters(), lr=1e-2, weight_decay=0.05)
rng = np.random.default_rng(301)
seq = torch.tensor(rng.integers(0, 5, (3, 9)))
for step in range(5):
    logits = net(seq[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, 5), seq[:, 1:].reshape(-1))
    opt.zero_grad()
    loss.backward()
    losses.append(loss.item())
    losses.append(float(torch.cat([p.grad.flatten() for p in net.parameters()]).norm()))
    opt.step()
with torch.no_grad():
    a, b = net(seq), net(seq, parallel=True)
losses.append(float((a - b).abs().max() < 1e-9))
losses += [float(p.sum()) for p in net.parameters()]
losses.append(F.cross_entropy(a[:, :-1].reshape(-1, 5), seq[:, 1:].reshape(-1)).item())
'''

# ConvNeXt: patchify stem, depthwise 7x7, channels-last LayerNorm, layer scale, drop path
CONVNEXT = '''
class LayerNorm2d(nn.Module):
    """channels_first LayerNorm as the ConvNeXt repository writes it"""
    def __init__(self, c, eps=1e-6):
        super().__init__()
        self.weight, self.bias = nn.Parameter(torch.ones(c)), nn.Parameter(torch.zeros(c))
        self.eps = eps

    def forward(self, x):
        u = x.mean(1, keepdim=True)
        s = (x - u).pow(2).mean(1, keepdim=True)
        x = (x - u) / torch.sqrt(s + self.eps)
        return self.weight[:, None, None] * x + self.bias[:, None, None]

def drop_path(x, keep_mask, keep_prob):
    # timm's drop_path with its Bernoulli draw passed in (one per sample)
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)
    return x.div(keep_prob) * keep_mask.view(shape)

class Block(nn.Module):
    def __init__(self, dim, ls_init=1e-1):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, kernel_size=7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU()
        self.pwconv2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(ls_init * torch.ones(dim))

    def forward(self, x, keep_mask=None, keep_prob=1.0):
        inp = x
        x = self.dwconv(x)
        x = x.permute(0, 2, 3, 1)
        x = self.pwconv2(self.act(self.pwconv1(self.norm(x))))
        x = self.gamma * x
        x = x.permute(0, 3, 1, 2)
        if keep_mask is not None:
            x = drop_path(x, keep_mask, keep_prob)
        return inp + x

class ConvNeXt(nn.Module):
    def __init__(self, dims=(6, 8), classes=3):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, dims[0], 2, stride=2), LayerNorm2d(dims[0]))
        self.stage1 = Block(dims[0])
        self.down = nn.Sequential(LayerNorm2d(dims[0]), nn.Conv2d(dims[0], dims[1], 2, stride=2))
        self.stage2 = Block(dims[1])
        self.norm = nn.LayerNorm(dims[1], eps=1e-6)
        self.head = nn.Linear(dims[1], classes)

    def forward(self, x, masks=(None, None), keep_prob=1.0):
        x = self.stage1(self.stem(x), masks[0], keep_prob)
        x = self.stage2(self.down(x), masks[1], keep_prob)
        return self.head(self.norm(x.mean([-2, -1])))

model = init(ConvNeXt(), seed=302, scale=0.3)
with torch.no_grad():
    for m in model.modules():
        if isinstance(m, (nn.LayerNorm, LayerNorm2d)):
            m.weight.fill_(1.0)
            m.bias.zero_()
        elif isinstance(m, Block):
            m.gamma.fill_(0.1)
decay = [p for p in model.parameters() if p.ndim > 1]
rest = [p for p in model.parameters() if p.ndim <= 1]
opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05},
                         {"params": rest, "weight_decay": 0.0}], lr=4e-3, betas=(0.9, 0.999))
sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=6, eta_min=1e-4)
rng = np.random.default_rng(303)
x = torch.tensor(rng.standard_normal((6, 3, 8, 8)))
y = torch.tensor(rng.integers(0, 3, 6))
x = x + y.view(-1, 1, 1, 1) * 0.3
for step in range(6):
    keep = 0.8
    masks = [torch.tensor((rng.random(6) < keep).astype(np.float64)) for _ in range(2)]
    out = model(x, masks, keep)
    loss = F.cross_entropy(out, y, label_smoothing=0.1)
    opt.zero_grad()
    loss.backward()
    losses.append(loss.item())
    losses.append(float(model.stage1.gamma.grad.norm()))
    losses.append(float(model.stage2.dwconv.weight.grad.abs().sum()))
    opt.step()
    sched.step()
model.eval()
with torch.no_grad():
    losses.append(float(model.stage2.gamma.sum()))
    losses.append(F.cross_entropy(model(x), y).item())
'''

# SE-ResNet bottlenecks, and MobileNetV3's hard-sigmoid SE with hardswish
SE_RESNET = '''
class SE(nn.Module):
    def __init__(self, c, r=4, hard=False):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Sequential(nn.Conv2d(c, c // r, 1), nn.ReLU(inplace=True),
                                nn.Conv2d(c // r, c, 1),
                                nn.Hardsigmoid() if hard else nn.Sigmoid())

    def forward(self, x):
        return x * self.fc(self.pool(x))

class Bottleneck(nn.Module):
    expansion = 2
    def __init__(self, cin, width, stride=1, hard=False):
        super().__init__()
        cout = width * self.expansion
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.se = SE(cout, hard=hard)
        self.act = nn.Hardswish() if hard else nn.ReLU(inplace=True)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                                      nn.BatchNorm2d(cout))

    def forward(self, x):
        idt = x if self.down is None else self.down(x)
        out = self.act(self.bn1(self.conv1(x)))
        out = self.act(self.bn2(self.conv2(out)))
        out = self.se(self.bn3(self.conv3(out)))
        return self.act(out + idt)

model = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4),
                      nn.ReLU(inplace=True), Bottleneck(4, 4, stride=2),
                      Bottleneck(8, 4, hard=True), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                      nn.Linear(8, 3))
init(model, seed=304, scale=0.4)
for m in model.modules():
    if isinstance(m, nn.BatchNorm2d):
        nn.init.ones_(m.weight)
        nn.init.zeros_(m.bias)
nn.init.zeros_(model[3].bn3.weight)  # zero-init the last BN of a residual branch
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True,
                      weight_decay=5e-4)
rng = np.random.default_rng(305)
x = torch.tensor(rng.standard_normal((8, 2, 6, 6)))
y = torch.tensor(rng.integers(0, 3, 8))
x[:, 0] += y.view(-1, 1, 1) * 0.5
for step in range(6):
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    losses.append(loss.item())
    losses.append(float(model[3].bn3.weight.grad.norm()))
    opt.step()
losses += model[4].bn2.running_mean.tolist() + model[4].bn2.running_var.tolist()
losses.append(float(model[4].bn2.num_batches_tracked))
model.eval()
with torch.no_grad():
    losses.append(F.cross_entropy(model(x), y).item())
'''

# PixelCNN: masked convolutions (type A then B) on 4-level images, and sampling
PIXELCNN = '''
class MaskedConv2d(nn.Conv2d):
    def __init__(self, mask_type, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register_buffer("mask", self.weight.data.clone())
        _, _, kh, kw = self.weight.size()
        self.mask.fill_(1)
        self.mask[:, :, kh // 2, kw // 2 + (mask_type == "B"):] = 0
        self.mask[:, :, kh // 2 + 1:] = 0

    def forward(self, x):
        self.weight.data *= self.mask
        return super().forward(x)

class GatedMasked(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = MaskedConv2d("B", c, 2 * c, 3, padding=1)

    def forward(self, x):
        a, b = self.conv(x).chunk(2, dim=1)
        return x + torch.tanh(a) * torch.sigmoid(b)

levels = 4
net = nn.Sequential(MaskedConv2d("A", 1, 8, 5, padding=2), nn.ReLU(), GatedMasked(8),
                    GatedMasked(8), nn.ReLU(), nn.Conv2d(8, levels, 1))
init(net, seed=306, scale=0.3)
opt = torch.optim.Adam(net.parameters(), lr=1e-2)
rng = np.random.default_rng(307)
yy, xx = np.meshgrid(np.arange(6), np.arange(6), indexing="ij")
imgs = np.stack([((xx + yy + s) // 3) % levels for s in range(6)])
target = torch.tensor(imgs)
inp = (target.double() / (levels - 1)).unsqueeze(1)
for step in range(6):
    logits = net(inp)
    loss = F.cross_entropy(logits, target)
    opt.zero_grad()
    loss.backward()
    losses.append(loss.item() / np.log(2))  # bits per pixel
    opt.step()
# the receptive field is causal: the gradient of an output pixel reaches no later input
x = inp[:1].clone().requires_grad_(True)
net(x)[0, :, 3, 3].sum().backward()
g = x.grad[0, 0]
losses.append(float(g[3, 3:].abs().sum() + g[4:].abs().sum()))
losses.append(float(g[:3].abs().sum() > 0))
with torch.no_grad():
    sample = torch.zeros(2, 1, 6, 6)
    u = torch.tensor(rng.random((2, 6, 6)))
    for i in range(6):
        for j in range(6):
            probs = F.softmax(net(sample)[:, :, i, j], dim=1)
            pix = (probs.cumsum(1) < u[:, i, j, None]).sum(1).clamp(max=levels - 1)
            sample[:, 0, i, j] = pix.double() / (levels - 1)
losses += sample.flatten().tolist()
losses.append(loss.item() / np.log(2))
'''

# a DETR head: object queries, a transformer decoder, greedy matching on a cdist cost, a no-object
# class weight, L1 + generalized IoU box losses
DETR_SET = '''
def box_cxcywh_to_xyxy(b):
    cx, cy, w, h = b.unbind(-1)
    return torch.stack([cx - 0.5 * w, cy - 0.5 * h, cx + 0.5 * w, cy + 0.5 * h], dim=-1)

def generalized_box_iou(a, b):
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    lt = torch.max(a[:, None, :2], b[:, :2])
    rb = torch.min(a[:, None, 2:], b[:, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[..., 0] * wh[..., 1]
    union = area_a[:, None] + area_b - inter
    iou = inter / union
    lt2 = torch.min(a[:, None, :2], b[:, :2])
    rb2 = torch.max(a[:, None, 2:], b[:, 2:])
    wh2 = (rb2 - lt2).clamp(min=0)
    area = wh2[..., 0] * wh2[..., 1]
    return iou - (area - union) / area

@torch.no_grad()
def greedy_match(cost):
    cost = cost.clone()
    rows, cols = [], []
    for _ in range(cost.shape[1]):
        i = int(cost.argmin())
        r, c = divmod(i, cost.shape[1])
        rows.append(r); cols.append(c)
        cost[r, :] = float("inf"); cost[:, c] = float("inf")
    return torch.tensor(rows), torch.tensor(cols)

class DETRHead(nn.Module):
    def __init__(self, d=8, queries=5, classes=3):
        super().__init__()
        self.query_embed = nn.Embedding(queries, d)
        layer = nn.TransformerDecoderLayer(d, 2, dim_feedforward=16, dropout=0.0,
                                           batch_first=True)
        self.decoder = nn.TransformerDecoder(layer, 2)
        self.class_embed = nn.Linear(d, classes + 1)
        self.bbox_embed = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, 4))
        self.input_proj = nn.Conv2d(3, d, 1)

    def forward(self, img):
        mem = self.input_proj(img).flatten(2).transpose(1, 2)
        q = self.query_embed.weight.unsqueeze(0).expand(img.shape[0], -1, -1)
        h = self.decoder(q, mem)
        return self.class_embed(h), self.bbox_embed(h).sigmoid()

model = init(DETRHead(), seed=308, scale=0.3)
opt = torch.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=1e-4)
rng = np.random.default_rng(309)
img = torch.tensor(rng.standard_normal((2, 3, 3, 3)))
tgt_labels = [torch.tensor([0, 2]), torch.tensor([1, 1, 0])]
tgt_boxes = [torch.tensor(rng.uniform(0.3, 0.6, (n, 4))) for n in (2, 3)]
empty_weight = torch.ones(4)
empty_weight[-1] = 0.1
matched = []
for step in range(6):
    logits, boxes = model(img)
    loss_ce, loss_l1, loss_giou = 0, 0, 0
    for b in range(2):
        prob = logits[b].softmax(-1)
        cost = (-prob[:, tgt_labels[b]] + 5 * torch.cdist(boxes[b], tgt_boxes[b], p=1)
                - 2 * generalized_box_iou(box_cxcywh_to_xyxy(boxes[b]),
                                          box_cxcywh_to_xyxy(tgt_boxes[b])))
        qi, ti = greedy_match(cost)
        target_classes = torch.full((5,), 3, dtype=torch.long)
        target_classes[qi] = tgt_labels[b][ti]
        loss_ce = loss_ce + F.cross_entropy(logits[b], target_classes, weight=empty_weight)
        loss_l1 = loss_l1 + F.l1_loss(boxes[b][qi], tgt_boxes[b][ti], reduction="sum") / len(ti)
        giou = torch.diag(generalized_box_iou(box_cxcywh_to_xyxy(boxes[b][qi]),
                                              box_cxcywh_to_xyxy(tgt_boxes[b][ti])))
        loss_giou = loss_giou + (1 - giou).sum() / len(ti)
        matched.append(qi.tolist())
    loss = loss_ce + 5 * loss_l1 + 2 * loss_giou
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
    opt.step()
    losses += [loss.item(), loss_ce.item(), loss_l1.item(), loss_giou.item()]
    losses += sum(matched[-2:], [])
losses.append(float(model.query_embed.weight.grad.norm()))
losses.append(loss.item())
'''

# Deep Sets and a Set Transformer (MAB, ISAB, PMA) on padded sets of different sizes
SET_TRANSFORMER = '''
class MAB(nn.Module):
    def __init__(self, d, heads=2):
        super().__init__()
        self.att = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln0, self.ln1 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, d), nn.ReLU())

    def forward(self, q, k, key_padding_mask=None):
        h = self.ln0(q + self.att(q, k, k, key_padding_mask=key_padding_mask,
                                  need_weights=False)[0])
        return self.ln1(h + self.ff(h))

class ISAB(nn.Module):
    def __init__(self, d, m):
        super().__init__()
        self.I = nn.Parameter(torch.empty(1, m, d))
        self.mab0, self.mab1 = MAB(d), MAB(d)

    def forward(self, x, mask):
        h = self.mab0(self.I.expand(x.shape[0], -1, -1), x, key_padding_mask=mask)
        return self.mab1(x, h)

class PMA(nn.Module):
    def __init__(self, d, k=1):
        super().__init__()
        self.S = nn.Parameter(torch.empty(1, k, d))
        self.mab = MAB(d)

    def forward(self, x, mask):
        return self.mab(self.S.expand(x.shape[0], -1, -1), x, key_padding_mask=mask)

class SetTransformer(nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.inp = nn.Linear(2, d)
        self.enc = ISAB(d, 3)
        self.pool = PMA(d)
        self.out = nn.Linear(d, 1)

    def forward(self, x, mask):
        return self.out(self.pool(self.enc(self.inp(x), mask), mask)).squeeze(-1).squeeze(-1)

class DeepSets(nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.phi = nn.Sequential(nn.Linear(2, d), nn.ELU(), nn.Linear(d, d))
        self.rho = nn.Sequential(nn.Linear(d, d), nn.ELU(), nn.Linear(d, 1))

    def forward(self, x, mask):
        h = self.phi(x).masked_fill(mask.unsqueeze(-1), 0.0)
        return self.rho(h.sum(1) / (~mask).sum(1, keepdim=True)).squeeze(-1)

rng = np.random.default_rng(310)
sizes = [3, 5, 4, 2, 5, 3]
x = torch.zeros(6, 5, 2)
mask = torch.ones(6, 5, dtype=torch.bool)
for i, s in enumerate(sizes):
    x[i, :s] = torch.tensor(rng.standard_normal((s, 2)))
    mask[i, :s] = False
y = torch.stack([x[i, :s].norm(dim=1).max() for i, s in enumerate(sizes)])
st = init(SetTransformer(), seed=311, scale=0.3)
ds = init(DeepSets(), seed=312, scale=0.3)
opt = torch.optim.Adam([*st.parameters(), *ds.parameters()], lr=1e-2)
for step in range(6):
    p1, p2 = st(x, mask), ds(x, mask)
    l1, l2 = F.mse_loss(p1, y), F.mse_loss(p2, y)
    opt.zero_grad()
    (l1 + l2).backward()
    losses += [l1.item() + l2.item(), l1.item(), l2.item()]
    losses.append(float(st.enc.I.grad.norm()))
    opt.step()
# permutation invariance of both
perm = torch.tensor([4, 2, 0, 1, 3])
xp = x.clone()
xp[1] = x[1, perm]
with torch.no_grad():
    losses.append(float((st(xp, mask) - st(x, mask)).abs().max() < 1e-9))
losses.append(l1.item() + l2.item())
'''

# a neural ODE fit to a spiral with a fixed-step RK4 solver written in the loop
NEURAL_ODE = '''
class ODEFunc(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 2))
        self.nfe = 0

    def forward(self, t, y):
        self.nfe += 1
        tt = torch.ones_like(y[..., :1]) * t
        return self.net(torch.cat([y, tt], dim=-1))

def odeint_rk4(func, y0, t, substeps=2):
    ys = [y0]
    y = y0
    for i in range(len(t) - 1):
        dt = (t[i + 1] - t[i]) / substeps
        tc = t[i]
        for _ in range(substeps):
            k1 = func(tc, y)
            k2 = func(tc + dt / 2, y + dt * k1 / 2)
            k3 = func(tc + dt / 2, y + dt * k2 / 2)
            k4 = func(tc + dt, y + dt * k3)
            y = y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
            tc = tc + dt
        ys.append(y)
    return torch.stack(ys)

true_A = torch.tensor([[-0.1, 2.0], [-2.0, -0.1]])
t = torch.linspace(0.0, 1.5, 7)
with torch.no_grad():
    true_y = odeint_rk4(lambda t, y: (y ** 3) @ true_A, torch.tensor([[2.0, 0.0]]), t, 4)
func = init(ODEFunc(), seed=313, scale=0.3)
opt = torch.optim.RMSprop(func.parameters(), lr=1e-2)
rng = np.random.default_rng(314)
with torch.no_grad():
    losses.append(torch.mean(torch.abs(odeint_rk4(func, true_y[0], t) - true_y)).item())
for step in range(10):
    s = torch.tensor(rng.choice(5, 3, replace=False))
    batch_y0 = true_y[s]
    batch_t = t[:3]
    batch_y = torch.stack([true_y[s + i] for i in range(3)], dim=0)
    pred = odeint_rk4(func, batch_y0, batch_t)
    loss = torch.mean(torch.abs(pred - batch_y))
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    losses.append(float(func.nfe))
with torch.no_grad():
    full = odeint_rk4(func, true_y[0], t)
    losses += full.flatten().tolist()
    losses.append(torch.mean(torch.abs(full - true_y)).item())
'''

# Glow on vectors: data-initialised ActNorm, invertible 1x1 (slogdet), affine coupling
GLOW = '''
class ActNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.loc = nn.Parameter(torch.zeros(1, d))
        self.log_scale = nn.Parameter(torch.zeros(1, d))
        self.register_buffer("initialized", torch.tensor(0, dtype=torch.uint8))

    def forward(self, x):
        if self.initialized.item() == 0:
            with torch.no_grad():
                self.loc.copy_(-x.mean(0, keepdim=True))
                self.log_scale.copy_(-torch.log(x.std(0, keepdim=True) + 1e-6))
                self.initialized.fill_(1)
        return (x + self.loc) * torch.exp(self.log_scale), self.log_scale.sum().expand(len(x))

    def inverse(self, z):
        return z * torch.exp(-self.log_scale) - self.loc

class InvConv(nn.Module):
    def __init__(self, d, seed):
        super().__init__()
        q, _ = torch.linalg.qr(torch.tensor(np.random.default_rng(seed).standard_normal((d, d))))
        self.weight = nn.Parameter(q)

    def forward(self, x):
        return x @ self.weight.T, torch.linalg.slogdet(self.weight)[1].expand(len(x))

    def inverse(self, z):
        return torch.linalg.solve(self.weight, z.T).T

class Coupling(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d // 2, 16), nn.ReLU(), nn.Linear(16, d))

    def forward(self, x):
        xa, xb = x.chunk(2, dim=1)
        h = self.net(xa)
        shift, s = h[:, 0::2], h[:, 1::2]
        scale = torch.sigmoid(s + 2.0)
        return torch.cat([xa, (xb + shift) * scale], 1), torch.log(scale).sum(1)

    def inverse(self, z):
        za, zb = z.chunk(2, dim=1)
        h = self.net(za)
        shift, s = h[:, 0::2], h[:, 1::2]
        return torch.cat([za, zb / torch.sigmoid(s + 2.0) - shift], 1)

d = 4
flows = nn.ModuleList()
for k in range(3):
    flows += [ActNorm(d), InvConv(d, 315 + k), Coupling(d)]
for f in flows:
    if isinstance(f, Coupling):
        init(f, seed=318, scale=0.1)
rng = np.random.default_rng(319)
data = torch.tensor(rng.standard_normal((48, d)) @ np.array(
    [[1.0, 0.6, 0, 0], [0, 0.5, 0.3, 0], [0, 0, 2, -0.4], [0.2, 0, 0, 1]]) + 1.0)
opt = torch.optim.Adam(flows.parameters(), lr=5e-3)
log2pi = float(np.log(2 * np.pi))
for step in range(6):
    z, logdet = data, torch.zeros(len(data))
    for f in flows:
        z, ld = f(z)
        logdet = logdet + ld
    logp = -0.5 * (z ** 2).sum(1) - 0.5 * d * log2pi
    loss = -(logp + logdet).mean()
    opt.zero_grad()
    loss.backward()
    losses.append(loss.item())
    losses.append(float(flows[1].weight.grad.norm()))
    opt.step()
with torch.no_grad():
    x = z
    for f in reversed(flows):
        x = f.inverse(x)
    losses.append(float((x - data).abs().max() < 1e-8))
losses.append(loss.item())
'''

# a categorical VAE with straight-through Gumbel-softmax and temperature annealing
GUMBEL_VAE = '''
class GumbelVAE(nn.Module):
    def __init__(self, n=8, latents=3, cats=4):
        super().__init__()
        self.latents, self.cats = latents, cats
        self.enc = nn.Sequential(nn.Linear(n, 16), nn.ReLU(), nn.Linear(16, latents * cats))
        self.dec = nn.Sequential(nn.Linear(latents * cats, 16), nn.ReLU(), nn.Linear(16, n))

    def forward(self, x, u, tau, hard):
        logits = self.enc(x).view(-1, self.latents, self.cats)
        g = -torch.log(-torch.log(u + 1e-20) + 1e-20)
        y = F.softmax((logits + g) / tau, dim=-1)
        if hard:
            idx = y.max(-1, keepdim=True)[1]
            y_hard = torch.zeros_like(y).scatter_(-1, idx, 1.0)
            y = (y_hard - y).detach() + y
        return self.dec(y.view(-1, self.latents * self.cats)), F.softmax(logits, -1)

model = init(GumbelVAE(), seed=320, scale=0.3)
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
rng = np.random.default_rng(321)
x = torch.tensor((rng.random((16, 8)) < 0.3).astype(np.float64))
tau0, anneal = 1.0, 0.1
for step in range(8):
    tau = max(0.5, tau0 * np.exp(-anneal * step))
    u = torch.tensor(rng.random((16, 3, 4)))
    recon, q = model(x, u, tau, hard=step % 2 == 1)
    bce = F.binary_cross_entropy_with_logits(recon, x, reduction="sum") / len(x)
    kl = (q * torch.log(q * 4 + 1e-20)).sum() / len(x)
    loss = bce + kl
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [bce.item(), kl.item()]
losses.append(float(model.enc[0].weight.sum()))
losses.append(bce.item() + kl.item())
'''

# metric learning: batch-hard and semi-hard triplet mining on cdist, and the built-ins
TRIPLET_HARD = '''
class Embed(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 16), nn.PReLU(), nn.Linear(16, 4))

    def forward(self, x):
        return F.normalize(self.net(x), p=2, dim=1)

def batch_hard(emb, labels, margin=0.3):
    dist = torch.cdist(emb, emb)
    same = labels[:, None] == labels[None, :]
    eye = torch.eye(len(labels), dtype=torch.bool)
    hardest_pos = (dist * (same & ~eye)).max(1)[0]
    hardest_neg = dist.masked_fill(same, float("inf")).min(1)[0]
    return F.relu(hardest_pos - hardest_neg + margin).mean()

def semi_hard_topk(emb, labels, k=2, margin=0.3):
    dist = torch.cdist(emb, emb)
    same = labels[:, None] == labels[None, :]
    neg = dist.masked_fill(same, float("inf"))
    nearest, idx = neg.topk(k, dim=1, largest=False)
    pos = (dist * (same.double() - torch.eye(len(labels)))).sum(1) / (same.sum(1) - 1)
    return F.margin_ranking_loss(nearest, pos[:, None].expand_as(nearest),
                                 torch.ones_like(nearest), margin=margin), idx

model = init(Embed(), seed=322, scale=0.4)
opt = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.5)
rng = np.random.default_rng(323)
labels = torch.tensor(np.repeat(np.arange(4), 3))
centers = rng.standard_normal((4, 6))
x = torch.tensor(centers[labels.numpy()] + 0.8 * rng.standard_normal((12, 6)))
cos_triplet = nn.TripletMarginWithDistanceLoss(
    distance_function=lambda a, b: 1.0 - F.cosine_similarity(a, b), margin=0.2)
for step in range(6):
    emb = model(x)
    l_hard = batch_hard(emb, labels)
    l_semi, idx = semi_hard_topk(emb, labels)
    a, p, n = emb[0::3], emb[1::3], emb[torch.tensor([3, 6, 9, 0])]
    l_builtin = F.triplet_margin_loss(a, p, n, margin=0.5, swap=True)
    l_cos = cos_triplet(a, p, n)
    loss = l_hard + l_semi + l_builtin + l_cos
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [l_hard.item(), l_semi.item(), l_builtin.item(), l_cos.item()]
    losses += idx[:3].flatten().tolist()
losses.append(float(model.net[1].weight))
losses.append(loss.item())
'''

# Barlow Twins' cross-correlation loss and VICReg, on two augmented views
BARLOW_VICREG = '''
def off_diagonal(x):
    n, m = x.shape
    assert n == m
    return x.flatten()[:-1].view(n - 1, n + 1)[:, 1:].flatten()

class BarlowTwins(nn.Module):
    def __init__(self, d=6, lambd=5e-3):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(8, 12), nn.ReLU(), nn.Linear(12, 8))
        self.projector = nn.Sequential(nn.Linear(8, 12, bias=False), nn.BatchNorm1d(12),
                                       nn.ReLU(inplace=True), nn.Linear(12, d, bias=False))
        self.bn = nn.BatchNorm1d(d, affine=False)
        self.lambd = lambd

    def forward(self, y1, y2):
        z1 = self.projector(self.backbone(y1))
        z2 = self.projector(self.backbone(y2))
        c = self.bn(z1).T @ self.bn(z2)
        c.div_(y1.shape[0])
        on_diag = torch.diagonal(c).add_(-1).pow_(2).sum()
        off_diag = off_diagonal(c).pow_(2).sum()
        return on_diag + self.lambd * off_diag, z1, z2

def vicreg(x, y, sim=25.0, std_c=25.0, cov_c=1.0):
    repr_loss = F.mse_loss(x, y)
    x = x - x.mean(dim=0)
    y = y - y.mean(dim=0)
    std_x = torch.sqrt(x.var(dim=0) + 0.0001)
    std_y = torch.sqrt(y.var(dim=0) + 0.0001)
    std_loss = torch.mean(F.relu(1 - std_x)) / 2 + torch.mean(F.relu(1 - std_y)) / 2
    n, d = x.shape
    cov_x = (x.T @ x) / (n - 1)
    cov_y = (y.T @ y) / (n - 1)
    cov_loss = off_diagonal(cov_x).pow_(2).sum().div(d) + off_diagonal(cov_y).pow_(2).sum().div(d)
    return sim * repr_loss + std_c * std_loss + cov_c * cov_loss

model = init(BarlowTwins(), seed=324, scale=0.4)
opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9, weight_decay=1e-6)
rng = np.random.default_rng(325)
data = torch.tensor(rng.standard_normal((16, 8)))
first = None
for step in range(6):
    v1 = (data * torch.tensor(rng.random((16, 8)) > 0.1)
          + 0.1 * torch.tensor(rng.standard_normal((16, 8))))
    v2 = (data * torch.tensor(rng.random((16, 8)) > 0.1)
          + 0.1 * torch.tensor(rng.standard_normal((16, 8))))
    bt, z1, z2 = model(v1, v2)
    vr = vicreg(z1, z2)
    loss = bt + 0.01 * vr
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [bt.item(), vr.item()]
losses += model.bn.running_var.tolist()
losses.append(float(model.projector[0].weight.sum()))
'''

# seq2seq with Bahdanau (additive) attention over a padded source, teacher forcing decided by coin
# flips drawn up front, greedy feedback otherwise
BAHDANAU = '''
PAD, BOS = 0, 1

class Encoder(nn.Module):
    def __init__(self, vocab=7, e=6, h=5):
        super().__init__()
        self.emb = nn.Embedding(vocab, e, padding_idx=PAD)
        self.rnn = nn.GRU(e, h, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(2 * h, h)

    def forward(self, src):
        out, hidden = self.rnn(self.emb(src))
        hidden = torch.tanh(self.fc(torch.cat([hidden[-2], hidden[-1]], dim=1)))
        return out, hidden

class Attention(nn.Module):
    def __init__(self, h=5):
        super().__init__()
        self.W = nn.Linear(3 * h, h)
        self.v = nn.Linear(h, 1, bias=False)

    def forward(self, hidden, enc_out, mask):
        L = enc_out.shape[1]
        hid = hidden.unsqueeze(1).repeat(1, L, 1)
        energy = torch.tanh(self.W(torch.cat([hid, enc_out], dim=2)))
        att = self.v(energy).squeeze(2).masked_fill(mask == 0, -1e10)
        return F.softmax(att, dim=1)

class Decoder(nn.Module):
    def __init__(self, vocab=7, e=6, h=5):
        super().__init__()
        self.emb = nn.Embedding(vocab, e)
        self.att = Attention(h)
        self.cell = nn.GRUCell(e + 2 * h, h)
        self.out = nn.Linear(h + 2 * h + e, vocab)

    def forward(self, tok, hidden, enc_out, mask):
        e = self.emb(tok)
        a = self.att(hidden, enc_out, mask)
        ctx = torch.bmm(a.unsqueeze(1), enc_out).squeeze(1)
        hidden = self.cell(torch.cat([e, ctx], dim=1), hidden)
        return self.out(torch.cat([hidden, ctx, e], dim=1)), hidden, a

enc, dec = init(Encoder(), seed=326, scale=0.4), init(Decoder(), seed=327, scale=0.4)
params = [*enc.parameters(), *dec.parameters()]
opt = torch.optim.Adam(params, lr=1e-2)
rng = np.random.default_rng(328)
src = torch.tensor(rng.integers(2, 7, (4, 6)))
src[1, 4:] = PAD
src[3, 3:] = PAD
trg = torch.cat([torch.full((4, 1), BOS), src.flip(1)], dim=1)
coins = rng.random((8, trg.shape[1])) < 0.5
for step in range(8):
    mask = src != PAD
    enc_out, hidden = enc(src)
    tok = trg[:, 0]
    outs = []
    for t in range(1, trg.shape[1]):
        logit, hidden, a = dec(tok, hidden, enc_out, mask)
        outs.append(logit)
        tok = trg[:, t] if coins[step, t] else logit.argmax(1)
    out = torch.stack(outs, dim=1)
    loss = F.cross_entropy(out.reshape(-1, 7), trg[:, 1:].reshape(-1), ignore_index=PAD)
    opt.zero_grad()
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()
    losses += [loss.item(), float(norm)]
losses += a[3].tolist()
losses.append(loss.item())
'''

# TabTransformer: per-column embeddings plus a shared column embedding, a pre-norm transformer over
# the categorical tokens, LayerNorm'd continuous features, pos_weight BCE
TABTRANSFORMER = '''
class TabTransformer(nn.Module):
    def __init__(self, cards=(3, 5, 4), n_cont=3, d=8):
        super().__init__()
        offsets = torch.tensor([0, *cards[:-1]]).cumsum(0)
        self.register_buffer("offsets", offsets)
        self.cat_emb = nn.Embedding(sum(cards), d)
        self.col_emb = nn.Parameter(torch.empty(len(cards), d))
        layer = nn.TransformerEncoderLayer(d, 2, dim_feedforward=16, dropout=0.0,
                                           activation="gelu", batch_first=True, norm_first=True)
        self.tf = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.cont_norm = nn.LayerNorm(n_cont)
        self.mlp = nn.Sequential(nn.Linear(len(cards) * d + n_cont, 16), nn.SELU(),
                                 nn.Linear(16, 1))

    def forward(self, cat, cont):
        tok = self.cat_emb(cat + self.offsets) + self.col_emb
        h = self.tf(tok).flatten(1)
        return self.mlp(torch.cat([h, self.cont_norm(cont)], dim=1)).squeeze(1)

model = init(TabTransformer(), seed=329, scale=0.3)
opt = torch.optim.AdamW(model.parameters(), lr=5e-3)
rng = np.random.default_rng(330)
n = 16
cat = torch.tensor(np.stack([rng.integers(0, c, n) for c in (3, 5, 4)], axis=1))
cont = torch.tensor(rng.standard_normal((n, 3)) * [1.0, 10.0, 0.1])
y = ((cat[:, 0] == 1) | (cont[:, 0] > 0.8)).double()
loss_fn = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([(n - y.sum()) / y.sum()]))
for step in range(6):
    logits = model(cat, cont)
    loss = loss_fn(logits, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), float(model.col_emb.grad.norm())]
with torch.no_grad():
    p = torch.sigmoid(model(cat, cont))
    order = p.argsort(descending=True)
    losses += p.tolist()
    losses.append(float(((p > 0.5).double() == y).double().mean()))
losses.append(loss_fn(model(cat, cont), y).item())
'''

# probabilistic forecasting heads: pinball loss over several quantiles with a crossing penalty,
# Huber/smooth-L1, and a heteroscedastic Gaussian NLL head
QUANTILE = '''
qs = torch.tensor([0.1, 0.5, 0.9])

def pinball(pred, y, q):
    diff = y.unsqueeze(-1) - pred
    return torch.max(q * diff, (q - 1) * diff).mean()

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 16), nn.Softplus(), nn.Linear(16, 16), nn.Mish())
        self.q = nn.Linear(16, 3)
        self.mu, self.var = nn.Linear(16, 1), nn.Linear(16, 1)

    def forward(self, x):
        h = self.body(x)
        return self.q(h), self.mu(h).squeeze(-1), F.softplus(self.var(h)).squeeze(-1) + 1e-3

model = init(Net(), seed=331, scale=0.3)
opt = torch.optim.NAdam(model.parameters(), lr=1e-2)
gnll = nn.GaussianNLLLoss(full=True)
rng = np.random.default_rng(332)
x = torch.tensor(rng.standard_normal((24, 4)))
y = x[:, 0] * 2 + torch.tensor(rng.standard_normal(24)) * (0.5 + x[:, 1].abs())
for step in range(8):
    q, mu, var = model(x)
    crossing = F.relu(q[:, :-1] - q[:, 1:]).sum(1).mean()
    l_q = pinball(q, y, qs) + crossing
    l_h = F.huber_loss(q[:, 1], y, delta=0.5) + F.smooth_l1_loss(mu, y, beta=0.3)
    l_g = gnll(mu, y, var)
    loss = l_q + l_h + 0.1 * l_g
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), l_q.item(), l_h.item(), l_g.item()]
with torch.no_grad():
    q, mu, var = model(x)
    qsorted, _ = torch.sort(q, dim=1)
    cover = ((y >= qsorted[:, 0]) & (y <= qsorted[:, 2])).double().mean()
    losses += [cover.item(), float(torch.quantile(y - mu, 0.9)), float((y - mu).median())]
losses.append(loss.item())
'''

# a Switch Transformer layer: top-1 routing with expert capacity (positions by cumsum, overflow
# dropped), dispatch/combine tensors by einsum, load-balancing and router z-loss
SWITCH_MOE = '''
class SwitchFFN(nn.Module):
    def __init__(self, d=6, h=8, experts=3, capacity_factor=1.0):
        super().__init__()
        self.router = nn.Linear(d, experts, bias=False)
        self.wi = nn.Parameter(torch.empty(experts, d, h))
        self.wo = nn.Parameter(torch.empty(experts, h, d))
        self.E, self.cf = experts, capacity_factor

    def forward(self, x):
        n = x.shape[0]
        cap = int(self.cf * n / self.E)
        logits = self.router(x)
        z_loss = torch.logsumexp(logits, dim=-1).pow(2).mean()
        probs = logits.softmax(-1)
        gate, idx = probs.max(-1)
        mask = F.one_hot(idx, self.E).to(x.dtype)
        pos = torch.cumsum(mask, dim=0) * mask - mask
        keep = (pos < cap).to(x.dtype) * mask
        pos_oh = F.one_hot(pos.sum(-1).long().clamp(max=cap - 1), cap).to(x.dtype)
        dispatch = keep.unsqueeze(-1) * pos_oh.unsqueeze(1)  # n, E, cap
        combine = dispatch * gate[:, None, None]
        expert_in = torch.einsum("nec,nd->ecd", dispatch, x)
        h = F.relu(torch.einsum("ecd,edh->ech", expert_in, self.wi))
        expert_out = torch.einsum("ech,ehd->ecd", h, self.wo)
        out = torch.einsum("nec,ecd->nd", combine, expert_out)
        aux = self.E * (mask.mean(0) * probs.mean(0)).sum()
        return out, aux, z_loss, keep.sum()

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Linear(4, 6)
        self.norm = nn.LayerNorm(6)
        self.moe = SwitchFFN()
        self.head = nn.Linear(6, 2)

    def forward(self, x):
        h = self.emb(x)
        o, aux, z, kept = self.moe(self.norm(h))
        return self.head(h + o), aux, z, kept

model = init(Model(), seed=333, scale=0.4)
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
rng = np.random.default_rng(334)
x = torch.tensor(rng.standard_normal((12, 4)))
y = torch.tensor((rng.standard_normal(12) > 0).astype(np.int64))
for step in range(6):
    out, aux, z, kept = model(x)
    ce = F.cross_entropy(out, y)
    loss = ce + 0.01 * aux + 0.001 * z
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), aux.item(), z.item(), kept.item()]
losses.append(float(model.moe.router.weight.grad.norm()))
losses.append(loss.item())
'''

# a ViT trained at two resolutions: learned 2-D position embeddings resized by bicubic and bilinear
# F.interpolate, a 1-D learned position table stretched by linear interpolation
POS_INTERP = '''
import math

class TinyViT(nn.Module):
    def __init__(self, patch=2, d=8, grid=3):
        super().__init__()
        self.patch = patch
        self.proj = nn.Conv2d(1, d, patch, stride=patch)
        self.cls = nn.Parameter(torch.empty(1, 1, d))
        self.pos = nn.Parameter(torch.empty(1, 1 + grid * grid, d))
        self.enc = nn.TransformerEncoderLayer(d, 2, 16, dropout=0.0, batch_first=True)
        self.head = nn.Linear(d, 2)

    def interpolate_pos(self, n, mode):
        cls_pos, grid_pos = self.pos[:, :1], self.pos[:, 1:]
        g = int(math.sqrt(grid_pos.shape[1]))
        if n == g * g:
            return self.pos
        new = int(math.sqrt(n))
        grid_pos = grid_pos.reshape(1, g, g, -1).permute(0, 3, 1, 2)
        grid_pos = F.interpolate(grid_pos, size=(new, new), mode=mode, align_corners=False)
        return torch.cat([cls_pos, grid_pos.permute(0, 2, 3, 1).flatten(1, 2)], dim=1)

    def forward(self, img, mode="bicubic"):
        x = self.proj(img).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(len(x), -1, -1), x], dim=1)
        x = x + self.interpolate_pos(x.shape[1] - 1, mode)
        return self.head(self.enc(x)[:, 0])

model = init(TinyViT(), seed=335, scale=0.3)
pos1d = nn.Parameter(torch.tensor(np.random.default_rng(336).standard_normal((1, 4, 3))))
opt = torch.optim.Adam([*model.parameters(), pos1d], lr=5e-3)
rng = np.random.default_rng(337)
small = torch.tensor(rng.standard_normal((4, 1, 6, 6)))
big = torch.tensor(rng.standard_normal((4, 1, 10, 10)))
ys, yb = torch.tensor([0, 1, 0, 1]), torch.tensor([1, 1, 0, 0])
seq = torch.tensor(rng.standard_normal((2, 7, 3)))
for step in range(6):
    l_small = F.cross_entropy(model(small), ys)
    l_big = F.cross_entropy(model(big, "bicubic" if step % 2 else "bilinear"), yb)
    stretched = F.interpolate(pos1d.transpose(1, 2), size=7, mode="linear",
                              align_corners=True).transpose(1, 2)
    l_seq = (seq + stretched).pow(2).mean()
    loss = l_small + l_big + l_seq
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), float(model.pos.grad.norm()), float(pos1d.grad.abs().sum())]
with torch.no_grad():
    losses += model.interpolate_pos(25, "bicubic")[0, 1:4, 0].tolist()
    losses += F.interpolate(model.pos[:, 1:].reshape(1, 3, 3, -1).permute(0, 3, 1, 2),
                            scale_factor=1.5, mode="nearest")[0, 0].flatten().tolist()
losses.append(loss.item())
'''

# a Conformer block on SpecAugment-masked log-mel-like features: macaron half-step FFNs, MHSA, and
# the conv module (pointwise, GLU, depthwise conv1d, BatchNorm1d, SiLU)
SPECAUG_CONFORMER = '''
class ConvModule(nn.Module):
    def __init__(self, d, k=3):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.pw1 = nn.Conv1d(d, 2 * d, 1)
        self.dw = nn.Conv1d(d, d, k, padding=k // 2, groups=d)
        self.bn = nn.BatchNorm1d(d)
        self.pw2 = nn.Conv1d(d, d, 1)

    def forward(self, x):
        h = self.ln(x).transpose(1, 2)
        h = F.glu(self.pw1(h), dim=1)
        h = F.silu(self.bn(self.dw(h)))
        return self.pw2(h).transpose(1, 2)

class FFN(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.net = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.SiLU(),
                                 nn.Linear(4 * d, d))

    def forward(self, x):
        return self.net(x)

class ConformerBlock(nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.ff1, self.ff2 = FFN(d), FFN(d)
        self.ln_att = nn.LayerNorm(d)
        self.att = nn.MultiheadAttention(d, 2, batch_first=True)
        self.conv = ConvModule(d)
        self.ln_out = nn.LayerNorm(d)

    def forward(self, x, pad_mask):
        x = x + 0.5 * self.ff1(x)
        h = self.ln_att(x)
        x = x + self.att(h, h, h, key_padding_mask=pad_mask, need_weights=False)[0]
        x = x + self.conv(x)
        x = x + 0.5 * self.ff2(x)
        return self.ln_out(x)

def spec_augment(spec, rng, F_max=2, T_max=3):
    spec = spec.clone()
    B, T, Fdim = spec.shape
    for b in range(B):
        f = int(rng.integers(0, F_max + 1)); f0 = int(rng.integers(0, Fdim - f + 1))
        t = int(rng.integers(0, T_max + 1)); t0 = int(rng.integers(0, T - t + 1))
        fmask = torch.zeros(Fdim, dtype=torch.bool)
        fmask[f0:f0 + f] = True
        tmask = torch.zeros(T, dtype=torch.bool)
        tmask[t0:t0 + t] = True
        spec[b] = spec[b].masked_fill(fmask[None, :] | tmask[:, None], spec[b].mean())
    return spec

class Model(nn.Module):
    def __init__(self, n_mels=6, d=8, classes=3):
        super().__init__()
        self.sub = nn.Conv1d(n_mels, d, 3, stride=2, padding=1)
        self.block = ConformerBlock(d)
        self.head = nn.Linear(d, classes)

    def forward(self, feats, lengths):
        x = self.sub(feats.transpose(1, 2)).transpose(1, 2)
        out_len = (lengths + 1) // 2
        pad = torch.arange(x.shape[1])[None, :] >= out_len[:, None]
        h = self.block(x, pad).masked_fill(pad.unsqueeze(-1), 0.0)
        return self.head(h.sum(1) / out_len[:, None])

model = init(Model(), seed=338, scale=0.3)
opt = torch.optim.Adam(model.parameters(), lr=5e-3, betas=(0.9, 0.98), eps=1e-9)
warmup = 3
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min((s + 1) ** -0.5,
                                                              (s + 1) * warmup ** -1.5))
rng = np.random.default_rng(339)
wave = rng.standard_normal((4, 12, 6))
feats = torch.log(torch.tensor(wave ** 2) + 1e-6)
lengths = torch.tensor([12, 10, 7, 12])
y = torch.tensor([0, 1, 2, 1])
feats[torch.arange(12)[None, :] >= lengths[:, None]] = 0.0
for step in range(8):
    x = spec_augment(feats, rng)
    loss = F.cross_entropy(model(x, lengths), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()
    losses += [loss.item(), opt.param_groups[0]["lr"]]
model.eval()
with torch.no_grad():
    losses += model.block.conv.bn.running_mean.tolist()
    losses.append(F.cross_entropy(model(feats, lengths), y).item())
'''

# optimizers beyond SGD/Adam with per-batch schedules: NAdam, Adagrad, RMSprop (centered,
# momentum), Adamax, AdamW(amsgrad), SGD with dampening, under OneCycleLR and
# CosineAnnealingWarmRestarts stepped by fractional epochs; LBFGS without line search
OPTIMS_MORE = '''
from torch.optim import lr_scheduler as S
rng = np.random.default_rng(340)
X = torch.tensor(rng.standard_normal((16, 4)))
Y = torch.tanh(X @ torch.tensor(rng.standard_normal((4, 2)))) + 0.1

def fit(make_opt, make_sched=None, iters=2, epochs=3, **kw):
    m = init(nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2)), seed=341)
    opt = make_opt(m.parameters())
    sched = make_sched(opt) if make_sched else None
    for epoch in range(epochs):
        for i in range(iters):
            xb, yb = X[i::iters], Y[i::iters]
            loss = F.mse_loss(m(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if isinstance(sched, S.CosineAnnealingWarmRestarts):
                sched.step(epoch + (i + 1) / iters)
            elif sched is not None:
                sched.step()
            losses.append(loss.item())
        losses.append(opt.param_groups[0]["lr"])
    losses.append(float(sum(p.sum() for p in m.parameters())))

fit(lambda p: torch.optim.NAdam(p, lr=0.05, momentum_decay=4e-3, weight_decay=0.01,
                                decoupled_weight_decay=True),
    lambda o: S.OneCycleLR(o, max_lr=0.1, epochs=3, steps_per_epoch=2))
fit(lambda p: torch.optim.Adagrad(p, lr=0.2, lr_decay=0.01, initial_accumulator_value=0.1,
                                  weight_decay=1e-3),
    lambda o: S.CosineAnnealingWarmRestarts(o, T_0=1, T_mult=2, eta_min=0.01))
fit(lambda p: torch.optim.RMSprop(p, lr=0.01, alpha=0.9, momentum=0.5, centered=True,
                                  weight_decay=1e-3),
    lambda o: S.OneCycleLR(o, max_lr=0.02, total_steps=6, cycle_momentum=False))
fit(lambda p: torch.optim.Adamax(p, lr=0.05, weight_decay=1e-3))
fit(lambda p: torch.optim.AdamW(p, lr=0.05, amsgrad=True),
    lambda o: S.OneCycleLR(o, max_lr=0.05, total_steps=6, pct_start=0.5, div_factor=10,
                           final_div_factor=100))
fit(lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, dampening=0.1))
fit(lambda p: torch.optim.NAdam(p, lr=0.05),
    lambda o: S.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=1))
# LBFGS with a closure and no line search, the way full-batch fits are written
m = init(nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2)), seed=342)
opt = torch.optim.LBFGS(m.parameters(), lr=0.5, max_iter=4, history_size=4,
                        tolerance_grad=1e-12, tolerance_change=1e-14)
calls = []
def closure():
    opt.zero_grad()
    loss = F.mse_loss(m(X), Y)
    loss.backward()
    calls.append(loss.item())
    return loss
for _ in range(3):
    losses.append(float(opt.step(closure)))
losses += calls
losses.append(float(opt.state[opt._params[0]]["n_iter"]))
losses.append(F.mse_loss(m(X), Y).item())
'''

# a DCGAN step (ConvTranspose2d generator with BatchNorm, two Adam optimizers, detach), the non-
# saturating loss, and an R1 gradient penalty on real images by autograd.grad
DCGAN_R1 = '''
class G(nn.Module):
    def __init__(self, nz=4, ngf=4):
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 2, 2, 1, 0, bias=False), nn.BatchNorm2d(ngf * 2),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf, 1, 4, 2, 1, bias=False), nn.Tanh())

    def forward(self, z):
        return self.main(z)

class D(nn.Module):
    def __init__(self, ndf=4):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(1, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 2),
            nn.LeakyReLU(0.2, inplace=True), nn.Conv2d(ndf * 2, 1, 2, 1, 0, bias=False))

    def forward(self, x):
        return self.main(x).view(-1)

def weights_init(m, rng):
    if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
        m.weight.data.copy_(torch.tensor(rng.normal(0.0, 0.2, tuple(m.weight.shape))))
    elif isinstance(m, nn.BatchNorm2d):
        m.weight.data.copy_(torch.tensor(rng.normal(1.0, 0.02, tuple(m.weight.shape))))
        m.bias.data.fill_(0)

wrng = np.random.default_rng(343)
netG, netD = G(), D()
netG.apply(lambda m: weights_init(m, wrng))
netD.apply(lambda m: weights_init(m, wrng))
optD = torch.optim.Adam(netD.parameters(), lr=2e-3, betas=(0.5, 0.999))
optG = torch.optim.Adam(netG.parameters(), lr=2e-3, betas=(0.5, 0.999))
rng = np.random.default_rng(344)
yy, xx = np.meshgrid(np.linspace(-1, 1, 8), np.linspace(-1, 1, 8), indexing="ij")
real_all = torch.tensor(np.stack([np.tanh(2 * (xx * np.cos(a) + yy * np.sin(a)))
                                  for a in rng.uniform(0, 3, 8)])[:, None])
fixed = torch.tensor(rng.standard_normal((2, 4, 1, 1)))
gamma = 1.0
for step in range(6):
    real = real_all.clone().requires_grad_(True)
    z = torch.tensor(rng.standard_normal((8, 4, 1, 1)))
    fake = netG(z)
    d_real = netD(real)
    r1_grad, = torch.autograd.grad(d_real.sum(), real, create_graph=True)
    r1 = r1_grad.pow(2).reshape(8, -1).sum(1).mean()
    errD = F.softplus(-d_real).mean() + F.softplus(netD(fake.detach())).mean() + gamma / 2 * r1
    optD.zero_grad()
    errD.backward()
    optD.step()
    errG = F.softplus(-netD(fake)).mean()
    optG.zero_grad()
    errG.backward()
    optG.step()
    losses += [errD.item(), errG.item(), r1.item()]
netG.eval()
with torch.no_grad():
    losses += netG(fixed).flatten()[:10].tolist()
    losses += netD.main[3].running_var.tolist()
losses.append(errD.item())
'''

# a hypernetwork: a task embedding generates the weights of a target MLP, run by
# torch.func.functional_call with the generated parameter dict
HYPERNET = '''
from torch.func import functional_call

target = nn.Sequential(nn.Linear(1, 8), nn.Tanh(), nn.Linear(8, 1))
shapes = {k: v.shape for k, v in target.named_parameters()}
sizes = {k: v.numel() for k, v in target.named_parameters()}

class HyperNet(nn.Module):
    def __init__(self, tasks=4, z=3):
        super().__init__()
        self.task_emb = nn.Embedding(tasks, z)
        self.body = nn.Sequential(nn.Linear(z, 16), nn.ReLU(), nn.Linear(16, sum(sizes.values())))

    def forward(self, task):
        flat = self.body(self.task_emb(task)) * 0.3
        chunks = flat.split(list(sizes.values()))
        return {k: c.view(shapes[k]) for k, c in zip(sizes, chunks)}

hyper = init(HyperNet(), seed=345, scale=0.3)
opt = torch.optim.Adam(hyper.parameters(), lr=1e-2)
rng = np.random.default_rng(346)
amps, phases = rng.uniform(0.5, 1.5, 4), rng.uniform(0, 3, 4)
xs = torch.tensor(np.linspace(-2, 2, 10))[:, None]
for step in range(8):
    total = 0.0
    for t in range(4):
        params = hyper(torch.tensor(t))
        pred = functional_call(target, params, (xs,))
        total = total + F.mse_loss(pred, amps[t] * torch.sin(xs + phases[t]))
    total = total / 4
    reg = sum(v.pow(2).sum() for v in hyper(torch.arange(4)[:1].squeeze(0)).values())
    opt.zero_grad()
    (total + 1e-3 * reg).backward()
    opt.step()
    losses += [total.item(), float(hyper.task_emb.weight.grad.norm())]
losses.append(total.item())
'''

# GraphSAGE (mean and max aggregators by scatter_reduce) and GIN (sum by index_add_, learnable eps)
# on a batch of small graphs, pooled per graph for graph classification
GRAPHSAGE_GIN = '''
def sage_aggregate(x, src, dst, n, reduce):
    out = torch.zeros(n, x.shape[1])
    idx = dst.unsqueeze(1).expand(-1, x.shape[1])
    return out.scatter_reduce(0, idx, x[src], reduce=reduce, include_self=False)

class SAGE(nn.Module):
    def __init__(self, i, o, reduce):
        super().__init__()
        self.lin_l, self.lin_r = nn.Linear(i, o), nn.Linear(i, o, bias=False)
        self.reduce = reduce

    def forward(self, x, src, dst):
        agg = sage_aggregate(x, src, dst, len(x), self.reduce)
        return F.normalize(self.lin_l(agg) + self.lin_r(x), dim=-1)

class GIN(nn.Module):
    def __init__(self, i, o):
        super().__init__()
        self.eps = nn.Parameter(torch.zeros(1))
        self.mlp = nn.Sequential(nn.Linear(i, o), nn.BatchNorm1d(o), nn.ReLU(), nn.Linear(o, o))

    def forward(self, x, src, dst):
        agg = torch.zeros_like(x).index_add_(0, dst, x[src])
        return self.mlp((1 + self.eps) * x + agg)

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.s1 = SAGE(3, 8, "mean")
        self.s2 = SAGE(8, 8, "amax")
        self.g = GIN(8, 8)
        self.head = nn.Linear(16, 2)

    def forward(self, x, src, dst, batch, n_graphs):
        h = F.relu(self.s1(x, src, dst))
        h = F.relu(self.s2(h, src, dst))
        h = self.g(h, src, dst)
        idx = batch.unsqueeze(1).expand(-1, h.shape[1])
        mx = torch.zeros(n_graphs, h.shape[1]).scatter_reduce(0, idx, h, "amax",
                                                              include_self=False)
        cnt = torch.bincount(batch, minlength=n_graphs).unsqueeze(1)
        mean = torch.zeros(n_graphs, h.shape[1]).index_add_(0, batch, h) / cnt
        return self.head(torch.cat([mx, mean], dim=1))

rng = np.random.default_rng(347)
sizes = [4, 5, 3, 4]
batch = torch.tensor(np.repeat(np.arange(4), sizes))
starts = np.cumsum([0] + sizes[:-1])
src, dst = [], []
for g, (s, n) in enumerate(zip(starts, sizes)):
    for _ in range(2 * n):
        a, b = rng.integers(0, n, 2)
        src += [s + a, s + b]; dst += [s + b, s + a]
src, dst = torch.tensor(src), torch.tensor(dst)
x = torch.tensor(rng.standard_normal((sum(sizes), 3)))
y = torch.tensor([0, 1, 0, 1])
model = init(Net(), seed=348, scale=0.4)
opt = torch.optim.Adam(model.parameters(), lr=1e-2, weight_decay=5e-4)
for step in range(6):
    out = model(x, src, dst, batch, 4)
    loss = F.cross_entropy(out, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), float(model.g.eps.grad)]
losses.append(float(model.g.eps))
losses.append(loss.item())
'''

# decoding a small causal LM: temperature, repetition penalty (gather/scatter_), top-k then top-p
# filtering (sort, cumsum, shifted mask, scatter back), sampling by searchsorted
NUCLEUS = '''
class LM(nn.Module):
    def __init__(self, vocab=9, d=8, ctx=12):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.block = nn.TransformerEncoderLayer(d, 2, 16, dropout=0.0, batch_first=True,
                                                norm_first=True)
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight

    def forward(self, idx):
        T = idx.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(T)
        h = self.tok(idx) + self.pos(torch.arange(T))
        return self.head(self.ln(self.block(h, src_mask=mask, is_causal=True)))

def top_k_top_p(logits, k=5, p=0.8):
    kth = torch.topk(logits, k)[0][..., -1, None]
    logits = logits.masked_fill(logits < kth, float("-inf"))
    sorted_logits, sorted_idx = torch.sort(logits, descending=True)
    cum = torch.cumsum(F.softmax(sorted_logits, dim=-1), dim=-1)
    remove = cum > p
    remove[..., 1:] = remove[..., :-1].clone()
    remove[..., 0] = False
    to_remove = remove.scatter(1, sorted_idx, remove)
    return logits.masked_fill(to_remove, float("-inf"))

model = init(LM(), seed=349, scale=0.3)
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
rng = np.random.default_rng(350)
data = torch.tensor([[(3 * i + j) % 9 for i in range(10)] for j in range(4)])
for step in range(6):
    logits = model(data[:, :-1])
    loss = F.cross_entropy(logits.transpose(1, 2), data[:, 1:])
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
model.eval()
with torch.no_grad():
    idx = data[:2, :2].clone()
    logprob = torch.zeros(2)
    for t in range(6):
        logits = model(idx)[:, -1] / 0.8
        score = torch.gather(logits, 1, idx)
        score = torch.where(score < 0, score * 1.3, score / 1.3)
        logits = logits.scatter(1, idx, score)
        logits = top_k_top_p(logits)
        probs = F.softmax(logits, dim=-1)
        u = torch.tensor(rng.random((2, 1)))
        nxt = torch.searchsorted(probs.cumsum(-1), u).clamp(max=8)
        logprob += torch.log(probs.gather(1, nxt)).squeeze(1)
        idx = torch.cat([idx, nxt], dim=1)
    losses += idx.flatten().tolist() + logprob.tolist()
    losses.append(F.cross_entropy(model(data[:, :-1]).transpose(1, 2), data[:, 1:]).item())
'''

# a capsule network: primary capsules from a conv, squash, dynamic routing by agreement (routing
# logits detached between iterations), margin loss and masked reconstruction
CAPSNET = '''
def squash(s, dim=-1):
    n2 = (s ** 2).sum(dim, keepdim=True)
    return n2 / (1 + n2) * s / torch.sqrt(n2 + 1e-8)

class CapsNet(nn.Module):
    def __init__(self, classes=3, iters=3):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3)
        self.primary = nn.Conv2d(8, 2 * 4, 3, stride=2)  # 2 capsule maps of dim 4
        self.W = nn.Parameter(torch.empty(1, 8, classes, 6, 4))  # 8 primary caps
        self.decoder = nn.Sequential(nn.Linear(classes * 6, 16), nn.ReLU(), nn.Linear(16, 64),
                                     nn.Sigmoid())
        self.iters, self.classes = iters, classes

    def forward(self, x, y=None):
        h = F.relu(self.conv(x))
        u = self.primary(h)  # B, 8, 2, 2
        B = x.shape[0]
        u = u.view(B, 2, 4, 2, 2).permute(0, 1, 3, 4, 2).reshape(B, 8, 4)
        u = squash(u)
        u_hat = (self.W @ u[:, :, None, :, None]).squeeze(-1)  # B, 8, classes, 6
        b = torch.zeros(B, 8, self.classes)
        u_hat_d = u_hat.detach()
        for i in range(self.iters):
            c = F.softmax(b, dim=2)
            if i == self.iters - 1:
                v = squash((c.unsqueeze(-1) * u_hat).sum(1))
            else:
                v = squash((c.unsqueeze(-1) * u_hat_d).sum(1))
                b = b + (u_hat_d * v.unsqueeze(1)).sum(-1)
        lengths = v.norm(dim=-1)
        if y is None:
            y = lengths.argmax(1)
        mask = F.one_hot(y, self.classes).unsqueeze(-1).to(v.dtype)
        recon = self.decoder((v * mask).flatten(1))
        return lengths, recon

def margin_loss(lengths, y, m_pos=0.9, m_neg=0.1, lam=0.5):
    t = F.one_hot(y, lengths.shape[1]).to(lengths.dtype)
    l = t * F.relu(m_pos - lengths) ** 2 + lam * (1 - t) * F.relu(lengths - m_neg) ** 2
    return l.sum(1).mean()

model = init(CapsNet(), seed=351, scale=0.3)
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
rng = np.random.default_rng(352)
y = torch.tensor([0, 1, 2, 0, 1, 2])
x = torch.tensor(rng.random((6, 1, 8, 8)))
for i in range(6):
    x[i, 0, int(y[i]) * 3:int(y[i]) * 3 + 2] += 1.0
x = x / x.amax(dim=(2, 3), keepdim=True)
for step in range(6):
    lengths, recon = model(x, y)
    ml = margin_loss(lengths, y)
    rl = F.mse_loss(recon, x.flatten(1), reduction="sum") / len(x)
    loss = ml + 0.005 * rl
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), ml.item(), float(model.W.grad.norm())]
with torch.no_grad():
    lengths, _ = model(x)
    losses += lengths.flatten().tolist()
losses.append(loss.item())
'''

# SIREN: sine layers with omega_0 = 30 and their uniform init, fit to an image and to its spatial
# gradient (autograd.grad with create_graph), and its Laplacian at the end
SIREN = '''
class SineLayer(nn.Module):
    def __init__(self, i, o, first=False, omega=30.0, rng=None):
        super().__init__()
        self.omega, self.linear = omega, nn.Linear(i, o)
        bound = 1 / i if first else np.sqrt(6 / i) / omega
        with torch.no_grad():
            self.linear.weight.copy_(torch.tensor(rng.uniform(-bound, bound, (o, i))))
            self.linear.bias.copy_(torch.tensor(rng.uniform(-bound, bound, o)))

    def forward(self, x):
        return torch.sin(self.omega * self.linear(x))

rng = np.random.default_rng(353)
net = nn.Sequential(SineLayer(2, 12, first=True, rng=rng), SineLayer(12, 12, rng=rng),
                    nn.Linear(12, 1))
with torch.no_grad():
    b = np.sqrt(6 / 12) / 30
    net[2].weight.copy_(torch.tensor(rng.uniform(-b, b, (1, 12))))
    net[2].bias.zero_()
g = torch.linspace(-1, 1, 5)
coords = torch.stack(torch.meshgrid(g, g, indexing="ij"), dim=-1).reshape(-1, 2)
img = torch.sin(2 * coords[:, :1]) * torch.cos(3 * coords[:, 1:])
img_grad = torch.cat([2 * torch.cos(2 * coords[:, :1]) * torch.cos(3 * coords[:, 1:]),
                      -3 * torch.sin(2 * coords[:, :1]) * torch.sin(3 * coords[:, 1:])], 1)
opt = torch.optim.Adam(net.parameters(), lr=1e-4)
for step in range(6):
    x = coords.clone().requires_grad_(True)
    out = net(x)
    grad, = torch.autograd.grad(out, x, grad_outputs=torch.ones_like(out), create_graph=True)
    l_img = F.mse_loss(out, img)
    l_grad = F.mse_loss(grad, img_grad)
    loss = l_img + 0.01 * l_grad
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), l_img.item(), l_grad.item()]
x = coords[:6].clone().requires_grad_(True)
y = net(x)
gx, = torch.autograd.grad(y.sum(), x, create_graph=True)
lap = sum(torch.autograd.grad(gx[:, i].sum(), x, retain_graph=True)[0][:, i] for i in range(2))
losses += lap.tolist()
losses.append(loss.item())
'''

# a masked autoencoder: patchify by F.unfold, random masking by argsort of given noise, gather of
# kept tokens, mask tokens and unshuffle by ids_restore, loss on masked patches with per-patch
# normalised targets, and F.fold back to an image
MAE = '''
class MAE(nn.Module):
    def __init__(self, p=2, img=6, d=8, dd=6):
        super().__init__()
        self.p, self.L = p, (img // p) ** 2
        self.embed = nn.Linear(p * p, d)
        self.pos = nn.Parameter(torch.empty(1, self.L, d))
        self.enc = nn.TransformerEncoderLayer(d, 2, 16, dropout=0.0, batch_first=True,
                                              norm_first=True)
        self.dec_embed = nn.Linear(d, dd)
        self.mask_token = nn.Parameter(torch.zeros(1, 1, dd))
        self.dec_pos = nn.Parameter(torch.empty(1, self.L, dd))
        self.dec = nn.TransformerEncoderLayer(dd, 2, 12, dropout=0.0, batch_first=True)
        self.pred = nn.Linear(dd, p * p)

    def patchify(self, imgs):
        return F.unfold(imgs, self.p, stride=self.p).transpose(1, 2)

    def random_masking(self, x, noise, ratio):
        N, L, D = x.shape
        keep = int(L * (1 - ratio))
        ids_shuffle = torch.argsort(noise, dim=1)
        ids_restore = torch.argsort(ids_shuffle, dim=1)
        ids_keep = ids_shuffle[:, :keep]
        x_masked = torch.gather(x, 1, ids_keep.unsqueeze(-1).repeat(1, 1, D))
        mask = torch.ones(N, L)
        mask[:, :keep] = 0
        return x_masked, torch.gather(mask, 1, ids_restore), ids_restore

    def forward(self, imgs, noise, ratio=0.75):
        target = self.patchify(imgs)
        x = self.embed(target) + self.pos
        x, mask, ids_restore = self.random_masking(x, noise, ratio)
        x = self.dec_embed(self.enc(x))
        toks = self.mask_token.repeat(x.shape[0], ids_restore.shape[1] - x.shape[1], 1)
        x = torch.cat([x, toks], dim=1)
        x = torch.gather(x, 1, ids_restore.unsqueeze(-1).repeat(1, 1, x.shape[2]))
        pred = self.pred(self.dec(x + self.dec_pos))
        mean, var = target.mean(-1, keepdim=True), target.var(-1, keepdim=True)
        target = (target - mean) / (var + 1e-6) ** 0.5
        loss = ((pred - target) ** 2).mean(-1)
        return (loss * mask).sum() / mask.sum(), pred, mask

model = init(MAE(), seed=354, scale=0.3)
with torch.no_grad():
    model.mask_token.zero_()
opt = torch.optim.AdamW(model.parameters(), lr=5e-3, betas=(0.9, 0.95), weight_decay=0.05)
rng = np.random.default_rng(355)
imgs = torch.tensor(rng.standard_normal((3, 1, 6, 6))).cumsum(-1) * 0.3
for step in range(6):
    noise = torch.tensor(rng.random((3, 9)))
    loss, pred, mask = model(imgs, noise)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), float(mask.sum(1)[0]), float(model.mask_token.grad.norm())]
with torch.no_grad():
    recon = F.fold(pred.transpose(1, 2), (6, 6), 2, stride=2)
    losses += recon[0, 0, 0].tolist()
    losses.append(float((F.fold(model.patchify(imgs).transpose(1, 2), (6, 6), 2, stride=2)
                         - imgs).abs().max()))
losses.append(loss.item())
'''

# N-BEATS: generic, trend (polynomial basis) and seasonality (Fourier basis) blocks with doubly
# residual stacking of backcasts and forecasts; sMAPE and MASE losses
NBEATS = '''
class Block(nn.Module):
    def __init__(self, back, fore, theta, basis=None):
        super().__init__()
        self.fc = nn.Sequential(nn.Linear(back, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU())
        self.theta_b = nn.Linear(16, theta, bias=False)
        self.theta_f = nn.Linear(16, theta, bias=False)
        self.back, self.fore, self.basis = back, fore, basis
        if basis is None:
            self.gb, self.gf = nn.Linear(theta, back), nn.Linear(theta, fore)

    def forward(self, x):
        h = self.fc(x)
        tb, tf = self.theta_b(h), self.theta_f(h)
        if self.basis is None:
            return self.gb(tb), self.gf(tf)
        Tb, Tf = self.basis
        return tb @ Tb, tf @ Tf

def trend_basis(back, fore, p=3):
    tb = torch.arange(back) / back
    tf = torch.arange(fore) / fore
    return (torch.stack([tb ** i for i in range(p)]), torch.stack([tf ** i for i in range(p)]))

def season_basis(back, fore, harmonics=2):
    def make(n):
        t = torch.arange(n, dtype=torch.get_default_dtype()) / n
        rows = [torch.ones(n)]
        for k in range(1, harmonics + 1):
            rows += [torch.cos(2 * np.pi * k * t), torch.sin(2 * np.pi * k * t)]
        return torch.stack(rows)
    return make(back), make(fore)

class NBeats(nn.Module):
    def __init__(self, back=8, fore=4):
        super().__init__()
        self.blocks = nn.ModuleList([
            Block(back, fore, 3, trend_basis(back, fore)),
            Block(back, fore, 5, season_basis(back, fore)),
            Block(back, fore, 4)])

    def forward(self, x):
        res, forecast = x.flip(dims=(1,)), 0.0
        for b in self.blocks:
            bc, fc = b(res)
            res = res - bc
            forecast = forecast + fc
        return forecast

def smape(f, y):
    return 200 * torch.mean(torch.abs(f - y) / (torch.abs(f) + torch.abs(y) + 1e-8))

def mase(x, f, y, m=4):
    scale = torch.mean(torch.abs(x[:, m:] - x[:, :-m]), dim=1, keepdim=True)
    return torch.mean(torch.abs(f - y) / scale)

model = init(NBeats(), seed=356, scale=0.3)
opt = torch.optim.Adam(model.parameters(), lr=5e-3)
rng = np.random.default_rng(357)
t = np.arange(60)
series = 5 + 0.05 * t + np.sin(2 * np.pi * t / 4) + 0.1 * rng.standard_normal(60)
windows = torch.tensor(np.lib.stride_tricks.sliding_window_view(series, 12)[::3].copy())
x, y = windows[:, :8], windows[:, 8:]
for step in range(8):
    f = model(x)
    l1, l2 = smape(f, y), mase(x, f, y)
    loss = l2 + 0.01 * l1
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), l1.item()]
losses.append(loss.item())
'''

# an energy-based model trained by contrastive divergence with short-run Langevin dynamics
# (autograd.grad of the energy, no create_graph) from a replay buffer
EBM_LANGEVIN = '''
energy = init(nn.Sequential(nn.Linear(2, 16), nn.SiLU(), nn.Linear(16, 16), nn.SiLU(),
                            nn.Linear(16, 1)), seed=358, scale=0.4)
opt = torch.optim.Adam(energy.parameters(), lr=1e-2, betas=(0.0, 0.999))
rng = np.random.default_rng(359)
angles = rng.uniform(0, 2 * np.pi, 32)
data = torch.tensor(np.stack([np.cos(angles), np.sin(angles)], 1) * 1.5)
buffer = torch.tensor(rng.uniform(-2, 2, (64, 2)))
ref = buffer.clone()

def langevin(x, steps=4, step_size=0.05):
    x = x.clone().detach()
    for _ in range(steps):
        x.requires_grad_(True)
        e = energy(x).sum()
        g, = torch.autograd.grad(e, x)
        noise = torch.tensor(rng.standard_normal(x.shape))
        x = (x - step_size / 2 * g + np.sqrt(step_size) * 0.1 * noise).detach()
        x.clamp_(-2, 2)
    return x

with torch.no_grad():
    losses.append(float(energy(data).mean() - energy(ref).mean()))
for step in range(8):
    idx = torch.tensor(rng.choice(64, 16, replace=False))
    fresh = torch.tensor(rng.random(16) < 0.05)
    init_x = torch.where(fresh[:, None], torch.tensor(rng.uniform(-2, 2, (16, 2))), buffer[idx])
    neg = langevin(init_x)
    buffer[idx] = neg
    pos = data[torch.tensor(rng.choice(32, 16, replace=False))]
    e_pos, e_neg = energy(pos), energy(neg)
    cd = e_pos.mean() - e_neg.mean()
    reg = (e_pos ** 2).mean() + (e_neg ** 2).mean()
    loss = cd + 0.1 * reg
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), cd.item(), float(neg.abs().sum())]
with torch.no_grad():
    losses.append(float(energy(data).mean() - energy(ref).mean()))
'''

# score matching: sliced score matching (projections v, Hutchinson-style via autograd.grad with
# create_graph) and denoising score matching, on the same score net
SLICED_SCORE = '''
score = init(nn.Sequential(nn.Linear(2, 16), nn.Softplus(), nn.Linear(16, 16), nn.Softplus(),
                           nn.Linear(16, 2)), seed=360, scale=0.3)
opt = torch.optim.Adam(score.parameters(), lr=5e-3)
rng = np.random.default_rng(361)
data = torch.tensor(rng.standard_normal((32, 2)) @ np.array([[1.0, 0.8], [0.0, 0.6]]))

def ssm_loss(x, v):
    x = x.clone().requires_grad_(True)
    s = score(x)
    sv = (s * v).sum()
    grad_sv, = torch.autograd.grad(sv, x, create_graph=True)
    loss1 = (grad_sv * v).sum(-1)
    loss2 = 0.5 * ((s * v).sum(-1)) ** 2
    return (loss1 + loss2).mean()

def dsm_loss(x, noise, sigma=0.3):
    xt = x + sigma * noise
    target = -noise / sigma
    return 0.5 * ((score(xt) - target) ** 2).sum(-1).mean() * sigma ** 2

for step in range(8):
    v = torch.tensor(rng.standard_normal((32, 2)))
    v = v / v.norm(dim=-1, keepdim=True) * np.sqrt(2)
    noise = torch.tensor(rng.standard_normal((32, 2)))
    l_ssm, l_dsm = ssm_loss(data, v), dsm_loss(data, noise)
    loss = l_ssm + l_dsm
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), l_ssm.item(), l_dsm.item()]
# exact score-matching divergence term by a full Jacobian trace
x = data[:4].clone().requires_grad_(True)
s = score(x)
tr = sum(torch.autograd.grad(s[:, i].sum(), x, retain_graph=True)[0][:, i] for i in range(2))
losses += tr.tolist()
losses.append(loss.item())
'''


PROGRAMS = {name.lower(): source for name, source in [
    ("MAMBA_S6", MAMBA_S6),
    ("CONVNEXT", CONVNEXT),
    ("SE_RESNET", SE_RESNET),
    ("PIXELCNN", PIXELCNN),
    ("DETR_SET", DETR_SET),
    ("SET_TRANSFORMER", SET_TRANSFORMER),
    ("NEURAL_ODE", NEURAL_ODE),
    ("GLOW", GLOW),
    ("GUMBEL_VAE", GUMBEL_VAE),
    ("TRIPLET_HARD", TRIPLET_HARD),
    ("BARLOW_VICREG", BARLOW_VICREG),
    ("BAHDANAU", BAHDANAU),
    ("TABTRANSFORMER", TABTRANSFORMER),
    ("QUANTILE", QUANTILE),
    ("SWITCH_MOE", SWITCH_MOE),
    ("POS_INTERP", POS_INTERP),
    ("SPECAUG_CONFORMER", SPECAUG_CONFORMER),
    ("OPTIMS_MORE", OPTIMS_MORE),
    ("DCGAN_R1", DCGAN_R1),
    ("HYPERNET", HYPERNET),
    ("GRAPHSAGE_GIN", GRAPHSAGE_GIN),
    ("NUCLEUS", NUCLEUS),
    ("CAPSNET", CAPSNET),
    ("SIREN", SIREN),
    ("MAE", MAE),
    ("NBEATS", NBEATS),
    ("EBM_LANGEVIN", EBM_LANGEVIN),
    ("SLICED_SCORE", SLICED_SCORE),
]}

NOT_TRAINING = set()  # every program here ends on a loss below its first


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_program_matches_torch(name):
    assert_matches_torch(PROGRAMS[name], trains=name not in NOT_TRAINING)
