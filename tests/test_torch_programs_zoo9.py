"""A ninth set of real-world PyTorch programs run unchanged with `torch` mapped to flowgrad (the
shim and runner of test_torch_programs.py), each giving torch's losses, gradient norms and
final parameters step for step in float64: a BERT masked-LM written as Hugging Face writes it
(extended attention masks from finfo.min, non-persistent position buffers, tied decoder,
ignore_index -100), Transformer-XL relative attention with its pad-and-view rel_shift and a
detached memory, T5's log-bucketed relative position bias, a CenterNet head (Gaussian heatmap
targets, penalty-reduced focal loss, max-pool peak extraction, top-k decoding by // and %),
knowledge-graph embeddings (TransE on max_norm embeddings, RotatE with self-adversarial
negatives), an Instant-NGP multiresolution hash encoding (int64 prime products, bitwise xor,
trilinear weights), and probabilistic forecasting heads (NegativeBinomial, StudentT, VonMises,
MixtureSameFamily). Weights, data and noise come from NumPy."""
import pytest
from test_torch_programs import assert_matches_torch

# BERT's masked LM as Hugging Face writes it: word + position (a non-persistent buffer) +
# token-type embeddings, an additive extended mask from torch.finfo(dtype).min, post-LN
# layers, a transform head with the decoder tied to the word embeddings, labels at -100
BERT_MLM = '''
class Embeddings(nn.Module):
    def __init__(self, vocab, d, max_len):
        super().__init__()
        self.word = nn.Embedding(vocab, d, padding_idx=0)
        self.position = nn.Embedding(max_len, d)
        self.token_type = nn.Embedding(2, d)
        self.LayerNorm = nn.LayerNorm(d, eps=1e-12)
        self.register_buffer("position_ids", torch.arange(max_len).expand((1, -1)),
                             persistent=False)

    def forward(self, ids, types):
        pos = self.position_ids[:, :ids.shape[1]]
        return self.LayerNorm(self.word(ids) + self.position(pos) + self.token_type(types))

class Layer(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.h, self.hd = heads, d // heads
        self.query, self.key, self.value = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.out, self.ln1 = nn.Linear(d, d), nn.LayerNorm(d, eps=1e-12)
        self.inter, self.output, self.ln2 = nn.Linear(d, 2 * d), nn.Linear(2 * d, d), \\
            nn.LayerNorm(d, eps=1e-12)

    def shape(self, x):
        return x.view(x.size()[:-1] + (self.h, self.hd)).permute(0, 2, 1, 3)

    def forward(self, x, ext_mask):
        q, k, v = self.shape(self.query(x)), self.shape(self.key(x)), self.shape(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / self.hd ** 0.5 + ext_mask
        ctx = torch.matmul(nn.functional.softmax(scores, dim=-1), v)
        ctx = ctx.permute(0, 2, 1, 3).contiguous()
        ctx = ctx.view(ctx.size()[:-2] + (self.h * self.hd,))
        x = self.ln1(x + self.out(ctx))
        return self.ln2(x + self.output(F.gelu(self.inter(x))))

class BertForMaskedLM(nn.Module):
    def __init__(self, vocab=12, d=8, max_len=10):
        super().__init__()
        self.embeddings = Embeddings(vocab, d, max_len)
        self.layers = nn.ModuleList([Layer(d, 2) for _ in range(2)])
        self.transform = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.LayerNorm(d, eps=1e-12))
        self.decoder = nn.Linear(d, vocab, bias=False)
        self.bias = nn.Parameter(torch.zeros(vocab))
        self.decoder.weight = self.embeddings.word.weight

    def forward(self, ids, types, attention_mask, labels):
        dtype = self.embeddings.word.weight.dtype
        ext = attention_mask[:, None, None, :].to(dtype=dtype)
        ext = (1.0 - ext) * torch.finfo(dtype).min
        x = self.embeddings(ids, types)
        for layer in self.layers:
            x = layer(x, ext)
        logits = self.decoder(self.transform(x)) + self.bias
        loss = nn.CrossEntropyLoss()(logits.view(-1, logits.size(-1)), labels.view(-1))
        return loss, logits

model = init(BertForMaskedLM(), seed=900, scale=0.3)
no_decay = ["bias", "LayerNorm.weight", "ln1.weight", "ln2.weight"]
groups = [{"params": [p for n, p in model.named_parameters()
                      if not any(nd in n for nd in no_decay)], "weight_decay": 0.01},
          {"params": [p for n, p in model.named_parameters()
                      if any(nd in n for nd in no_decay)], "weight_decay": 0.0}]
opt = torch.optim.AdamW(groups, lr=5e-3, eps=1e-6)
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min((s + 1) / 3, (8 - s) / 6))
rng = np.random.default_rng(901)
ids = torch.tensor(rng.integers(4, 12, (3, 8)))
lengths = torch.tensor([8, 6, 5])
attention_mask = (torch.arange(8)[None] < lengths[:, None]).long()
ids = ids.masked_fill(attention_mask == 0, 0)
types = (torch.arange(8)[None] >= 4).long().expand(3, -1)
for step in range(6):
    mask = torch.tensor(rng.random((3, 8)) < 0.3) & attention_mask.bool()
    mask[:, 1] = True
    labels = ids.masked_fill(~mask, -100)
    inputs = ids.masked_fill(mask, 3)
    loss, logits = model(inputs, types, attention_mask, labels)
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sched.step()
    losses += [loss.item(), float(model.embeddings.word.weight.grad.norm()),
               sched.get_last_lr()[0]]
losses += [len(model.state_dict()), "embeddings.position_ids" in model.state_dict()]
losses.append(loss.item())
'''

# Transformer-XL (Dai et al.): segment-level recurrence on a detached memory, sinusoidal
# relative encodings, content and position biases u and v, and the relative shift done by
# padding a zero column and viewing the score tensor one row longer
TRANSFORMER_XL = '''
class RelPartialLearnableAttn(nn.Module):
    def __init__(self, d=8, heads=2):
        super().__init__()
        self.h, self.hd = heads, d // heads
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.r_net = nn.Linear(d, d, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.ln = nn.LayerNorm(d)
        self.r_w_bias = nn.Parameter(torch.zeros(heads, self.hd))
        self.r_r_bias = nn.Parameter(torch.zeros(heads, self.hd))

    @staticmethod
    def rel_shift(x):
        zero_pad = torch.zeros((x.size(0), 1) + x.size()[2:], dtype=x.dtype)
        x_padded = torch.cat([zero_pad, x], dim=1)
        x_padded = x_padded.view(x.size(1) + 1, x.size(0), *x.size()[2:])
        return x_padded[1:].view_as(x)

    def forward(self, w, r, mems):
        qlen, bsz = w.size(0), w.size(1)
        cat = torch.cat([mems, w], 0)
        w_heads, r_head_k = self.qkv(cat), self.r_net(r)
        q, k, v = torch.chunk(w_heads, 3, dim=-1)
        q = q[-qlen:]
        klen = k.size(0)
        q = q.view(qlen, bsz, self.h, self.hd)
        k = k.view(klen, bsz, self.h, self.hd)
        v = v.view(klen, bsz, self.h, self.hd)
        r_head_k = r_head_k.view(klen, self.h, self.hd)
        AC = torch.einsum("ibnd,jbnd->ijbn", (q + self.r_w_bias, k))
        BD = self.rel_shift(torch.einsum("ibnd,jnd->ijbn", (q + self.r_r_bias, r_head_k)))
        score = (AC + BD) * self.hd ** -0.5
        mask = torch.triu(torch.ones(qlen, klen), diagonal=1 + mems.size(0)).bool()
        score = score.float().masked_fill(mask[:, :, None, None], -float("inf")).type_as(score)
        prob = F.softmax(score, dim=1)
        vec = torch.einsum("ijbn,jbnd->ibnd", (prob, v)).contiguous().view(qlen, bsz, -1)
        return self.ln(w + self.o(vec))

class TXL(nn.Module):
    def __init__(self, vocab=7, d=8, mem_len=4):
        super().__init__()
        self.mem_len = mem_len
        self.emb = nn.Embedding(vocab, d)
        self.attn = RelPartialLearnableAttn(d)
        self.ff = nn.Sequential(nn.Linear(d, 16), nn.ReLU(), nn.Linear(16, d))
        self.ln = nn.LayerNorm(d)
        self.out = nn.Linear(d, vocab)
        inv_freq = 1 / (10000 ** (torch.arange(0.0, d, 2.0) / d))
        self.register_buffer("inv_freq", inv_freq)

    def forward(self, x, mems):
        qlen = x.size(0)
        klen = qlen + mems.size(0)
        pos_seq = torch.arange(klen - 1, -1, -1.0)
        sinusoid = torch.ger(pos_seq, self.inv_freq)
        r = torch.cat([sinusoid.sin(), sinusoid.cos()], dim=-1)[:, None, :]
        h = self.emb(x)
        h = self.attn(h, r.squeeze(1), mems)
        h = self.ln(h + self.ff(h))
        with torch.no_grad():
            new_mems = torch.cat([mems, h], 0)[-self.mem_len:].detach()
        return self.out(h), new_mems

model = init(TXL(), seed=902, scale=0.3)
opt = torch.optim.Adam(model.parameters(), lr=5e-3)
rng = np.random.default_rng(903)
stream = torch.tensor(rng.integers(0, 7, (13, 2)))
for epoch in range(2):
    mems = torch.zeros(0, 2, 8)
    for s in range(0, 12, 4):
        x, y = stream[s:s + 4], stream[s + 1:s + 5]
        logits, mems = model(x, mems)
        loss = F.cross_entropy(logits.view(-1, 7), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses += [loss.item(), float(model.attn.r_r_bias.grad.norm()), mems.shape[0]]
losses.append(loss.item())
'''

# T5's relative position bias: signed relative positions bucketed exactly below max_exact and
# logarithmically above (torch.log, .to(long), torch.min with full_like), one bias table shared
# by all layers, RMS-style T5LayerNorm, no attention scaling
T5_BUCKETS = '''
import math

def relative_position_bucket(relative_position, bidirectional=True, num_buckets=8,
                             max_distance=16):
    relative_buckets = 0
    if bidirectional:
        num_buckets //= 2
        relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
        relative_position = torch.abs(relative_position)
    else:
        relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    large = max_exact + (torch.log(relative_position.float() / max_exact)
                         / math.log(max_distance / max_exact)
                         * (num_buckets - max_exact)).to(torch.long)
    large = torch.min(large, torch.full_like(large, num_buckets - 1))
    return relative_buckets + torch.where(is_small, relative_position, large)

class T5LayerNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(d)), eps

    def forward(self, x):
        var = x.to(torch.float64).pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(var + self.eps))

class T5Attn(nn.Module):
    def __init__(self, d=8, heads=2, bidirectional=True):
        super().__init__()
        self.h, self.bidir = heads, bidirectional
        self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.norm = T5LayerNorm(d)

    def forward(self, x, bias):
        B, T, C = x.shape
        h = self.norm(x)
        q, k, v = (m(h).view(B, T, self.h, -1).transpose(1, 2) for m in (self.q, self.k, self.v))
        scores = q @ k.transpose(3, 2) + bias
        attn = F.softmax(scores, dim=-1, dtype=torch.float64).type_as(scores)
        return x + self.o((attn @ v).transpose(1, 2).reshape(B, T, C))

class T5Encoder(nn.Module):
    def __init__(self, causal=False):
        super().__init__()
        self.causal = causal
        self.emb = nn.Embedding(9, 8)
        self.rel = nn.Embedding(8, 2)
        self.layers = nn.ModuleList([T5Attn(bidirectional=not causal) for _ in range(2)])
        self.final = T5LayerNorm(8)
        self.lm = nn.Linear(8, 9, bias=False)

    def forward(self, ids):
        T = ids.shape[1]
        ctx = torch.arange(T, dtype=torch.long)[:, None]
        mem = torch.arange(T, dtype=torch.long)[None, :]
        buckets = relative_position_bucket(mem - ctx, bidirectional=not self.causal)
        bias = self.rel(buckets).permute([2, 0, 1]).unsqueeze(0)
        if self.causal:
            bias = bias + torch.triu(torch.full((T, T), float("-inf")), 1)
        x = self.emb(ids)
        for layer in self.layers:
            x = layer(x, bias)
        return self.lm(self.final(x) * 8 ** -0.5), buckets

rng = np.random.default_rng(904)
data = torch.tensor(rng.integers(0, 9, (2, 13)))
for causal in (False, True):
    model = init(T5Encoder(causal), seed=905, scale=0.4)
    opt = torch.optim.Adafactor(model.parameters(), lr=2e-2, weight_decay=1e-3)
    for step in range(4):
        logits, buckets = model(data[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, 9), data[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses += [loss.item(), float(model.rel.weight.grad.norm())]
    losses += buckets[0].tolist() + buckets[:, 0].tolist()
losses.append(loss.item())
'''

# CenterNet (Zhou et al.): Gaussian-splatted heatmap targets (an element-wise max into the map),
# the penalty-reduced pixel focal loss, size/offset regression gathered at the centres, and
# decoding by a 3x3 max-pool peak test, top-k over the flattened map, // and % for the cells
CENTERNET = '''
def gaussian_target(heat, cx, cy, sigma):
    h, w = heat.shape
    ys, xs = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    g = torch.exp(-((xs - cx) ** 2 + (ys - cy) ** 2) / (2 * sigma ** 2))
    torch.maximum(heat, g, out=heat)

def focal(pred, gt, alpha=2, beta=4):
    pos = gt.eq(1).float()
    neg = gt.lt(1).float()
    pred = pred.clamp(1e-4, 1 - 1e-4)
    pos_loss = torch.log(pred) * torch.pow(1 - pred, alpha) * pos
    neg_loss = torch.log(1 - pred) * torch.pow(pred, alpha) * torch.pow(1 - gt, beta) * neg
    num_pos = pos.sum()
    return -(pos_loss.sum() + neg_loss.sum()) / num_pos.clamp(min=1)

class Head(nn.Module):
    def __init__(self, classes=2):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(1, 6, 3, padding=1), nn.ReLU(),
                                  nn.Conv2d(6, 6, 3, padding=2, dilation=2), nn.ReLU())
        self.hm = nn.Conv2d(6, classes, 1)
        self.wh = nn.Conv2d(6, 2, 1)
        self.reg = nn.Conv2d(6, 2, 1)

    def forward(self, x):
        f = self.body(x)
        return self.hm(f).sigmoid(), self.wh(f), self.reg(f)

def decode(hm, wh, k=3):
    peaks = F.max_pool2d(hm, 3, stride=1, padding=1)
    hm = hm * (peaks == hm).float()
    b, c, h, w = hm.shape
    scores, inds = torch.topk(hm.view(b, -1), k)
    cls = torch.div(inds, h * w, rounding_mode="floor")
    cell = inds % (h * w)
    ys, xs = cell // w, cell % w
    size = wh.view(b, 2, -1).gather(2, cell[:, None].expand(-1, 2, -1))
    return scores, cls, ys, xs, size

objects = [[(0, 2.3, 1.7, 2.0, 1.0), (1, 5.6, 5.2, 1.0, 3.0)], [(1, 3.1, 4.4, 2.0, 2.0)]]
img = torch.zeros(2, 1, 8, 8)
hm_t = torch.zeros(2, 2, 8, 8)
ind, whs, offs, msk = torch.zeros(2, 2, dtype=torch.long), torch.zeros(2, 2, 2), \\
    torch.zeros(2, 2, 2), torch.zeros(2, 2)
for b, objs in enumerate(objects):
    for j, (c, x, y, w, h) in enumerate(objs):
        cx, cy = int(x), int(y)
        gaussian_target(hm_t[b, c], cx, cy, sigma=1.0)
        img[b, 0, cy - int(h // 2):cy + int(h // 2) + 1, cx - int(w // 2):cx + int(w // 2) + 1] \\
            += 1.0 + c
        ind[b, j], whs[b, j], offs[b, j], msk[b, j] = cy * 8 + cx, torch.tensor([w, h]), \\
            torch.tensor([x - cx, y - cy]), 1
model = init(Head(), seed=906, scale=0.3)
with torch.no_grad():
    model.hm.bias.fill_(-2.19)
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(6):
    hm, wh, reg = model(img)
    l_hm = focal(hm, hm_t)
    pred_wh = wh.view(2, 2, -1).permute(0, 2, 1).gather(1, ind[..., None].expand(-1, -1, 2))
    pred_off = reg.flatten(2).transpose(1, 2)[torch.arange(2)[:, None], ind]
    m = msk.unsqueeze(2).expand_as(pred_wh)
    l_wh = F.l1_loss(pred_wh * m, whs * m, reduction="sum") / (m.sum() + 1e-4)
    l_off = F.l1_loss(pred_off * m, offs * m, reduction="sum") / (m.sum() + 1e-4)
    loss = l_hm + 0.1 * l_wh + l_off
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [l_hm.item(), l_wh.item(), l_off.item(), float(model.hm.weight.grad.norm())]
with torch.no_grad():
    scores, cls, ys, xs, size = decode(*model(img)[:2])
    losses += scores.flatten().tolist() + cls.flatten().tolist() + ys.flatten().tolist()
    losses += xs.flatten().tolist() + size.flatten().tolist()
losses.append(loss.item())
'''

# knowledge-graph embeddings: TransE with L1 distances on nn.Embedding(max_norm=1) (renormed in
# place on lookup) under a margin ranking loss, and RotatE's complex rotation by phases with
# self-adversarial negative weights (softmax of detached scores) under logsigmoid
KGE = '''
import math

class TransE(nn.Module):
    def __init__(self, ents, rels, d=6):
        super().__init__()
        self.ent = nn.Embedding(ents, d, max_norm=1.0)
        self.rel = nn.Embedding(rels, d)

    def score(self, h, r, t):
        return (self.ent(h) + self.rel(r) - self.ent(t)).norm(p=1, dim=-1)

class RotatE(nn.Module):
    def __init__(self, ents, rels, d=4, gamma=6.0):
        super().__init__()
        self.gamma = gamma
        self.ent = nn.Parameter(torch.empty(ents, 2 * d))
        self.rel = nn.Parameter(torch.empty(rels, d))
        self.eps_range = (gamma + 2.0) / d

    def score(self, h, r, t):
        re_h, im_h = torch.chunk(self.ent[h], 2, dim=-1)
        re_t, im_t = torch.chunk(self.ent[t], 2, dim=-1)
        phase = self.rel[r] / (self.eps_range / math.pi)
        re_r, im_r = torch.cos(phase), torch.sin(phase)
        re_s = re_h * re_r - im_h * im_r - re_t
        im_s = re_h * im_r + im_h * re_r - im_t
        return self.gamma - torch.stack([re_s, im_s], 0).norm(dim=0).sum(-1)

rng = np.random.default_rng(907)
E, R = 10, 3
triples = torch.tensor(np.stack([rng.integers(0, E, 16), rng.integers(0, R, 16),
                                 rng.integers(0, E, 16)], 1))
transe = init(TransE(E, R), seed=908, scale=0.5)
rotate = init(RotatE(E, R), seed=909, scale=0.5)
opt = torch.optim.SGD(transe.parameters(), lr=0.05)
opt_r = torch.optim.Adagrad(rotate.parameters(), lr=0.1)
ranking = nn.MarginRankingLoss(margin=1.0)
for step in range(6):
    h, r, t = triples.unbind(1)
    neg = torch.tensor(rng.integers(0, E, (16, 4)))
    corrupt_head = torch.tensor(rng.random(16) < 0.5)
    nh = torch.where(corrupt_head[:, None], neg, h[:, None])
    nt = torch.where(corrupt_head[:, None], t[:, None], neg)
    pos_d = transe.score(h, r, t)
    neg_d = transe.score(nh, r[:, None].expand_as(nh), nt).mean(1)
    l_transe = ranking(neg_d, pos_d, torch.ones(16))
    opt.zero_grad()
    l_transe.backward()
    opt.step()
    pos_s = rotate.score(h, r, t)
    neg_s = rotate.score(nh, r[:, None].expand_as(nh), nt)
    w = F.softmax(neg_s * 1.0, dim=1).detach()
    l_rot = -(F.logsigmoid(pos_s).mean() + (w * F.logsigmoid(-neg_s)).sum(1).mean()) / 2
    opt_r.zero_grad()
    l_rot.backward()
    opt_r.step()
    losses += [l_transe.item(), l_rot.item(), float(transe.ent.weight.norm(dim=1).max()),
               float(rotate.rel.grad.norm())]
with torch.no_grad():
    h, r, t = triples[:4].unbind(1)
    cand = transe.score(h[:, None].expand(-1, E), r[:, None].expand(-1, E), torch.arange(E))
    losses += (cand < transe.score(h, r, t)[:, None]).sum(1).tolist()
losses += [transe.ent.weight.sum().item(), l_rot.item()]
'''

# Instant-NGP (Müller et al.): a multiresolution hash encoding in 2-D, cell corners hashed by
# int64 products with large primes (wrapping), bitwise xor and a modulus, bilinear weights from
# the fractional coordinates, concatenated levels into a small MLP
INSTANT_NGP = '''
class HashGrid(nn.Module):
    def __init__(self, levels=3, table=32, feats=2, base=2, growth=2.0):
        super().__init__()
        self.table = table
        self.res = [int(base * growth ** l) for l in range(levels)]
        self.embeddings = nn.ParameterList([nn.Parameter(torch.empty(table, feats))
                                            for _ in range(levels)])
        self.register_buffer("primes", torch.tensor([1, 2654435761], dtype=torch.int64))
        self.register_buffer("offsets", torch.tensor([[0, 0], [0, 1], [1, 0], [1, 1]]))

    def hash(self, coords):
        h = coords * self.primes
        return torch.bitwise_xor(h[..., 0], h[..., 1]) % self.table

    def forward(self, x):
        out = []
        for res, emb in zip(self.res, self.embeddings):
            scaled = x * res
            floor = torch.floor(scaled)
            frac = scaled - floor
            corners = floor.long()[:, None, :] + self.offsets
            idx = self.hash(corners)
            w = torch.where(self.offsets.bool(), frac[:, None, :], 1 - frac[:, None, :]).prod(-1)
            out.append((emb[idx] * w[..., None]).sum(1))
        return torch.cat(out, -1)

model = nn.Sequential(HashGrid(), nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 1))
init(model, seed=910, scale=0.2)
opt = torch.optim.Adam([{"params": model[0].parameters(), "eps": 1e-15},
                        {"params": [p for m in model[1:] for p in m.parameters()],
                         "weight_decay": 1e-6}], lr=2e-2, betas=(0.9, 0.99))
rng = np.random.default_rng(911)
X = torch.tensor(rng.random((64, 2)))
Y = torch.sin(6 * X[:, :1]) * torch.cos(4 * X[:, 1:])
for step in range(8):
    loss = F.mse_loss(model(X), Y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [loss.item(), float(model[0].embeddings[2].grad.norm())]
with torch.no_grad():
    corners = torch.tensor([[3, 7], [100000, 99999], [-2, 5]])
    losses += model[0].hash(corners).tolist()
losses.append(loss.item())
'''

# probabilistic forecasting heads (DeepAR-style): an LSTM over lagged counts feeding a
# NegativeBinomial likelihood, a StudentT for residuals, a VonMises for a daily phase, and a
# MixtureSameFamily of Normals, with the sample mean/variance checks of each distribution
PROB_FORECAST = '''
from torch.distributions import (NegativeBinomial, StudentT, VonMises, MixtureSameFamily,
                                 Categorical, Normal, Independent)

class DeepAR(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(2, 8, batch_first=True)
        self.nb = nn.Linear(8, 2)
        self.st = nn.Linear(8, 3)
        self.vm = nn.Linear(8, 2)
        self.mix = nn.Linear(8, 9)

    def forward(self, x):
        h, _ = self.lstm(x)
        mu_alpha = F.softplus(self.nb(h)) + 1e-3
        mu, alpha = mu_alpha.unbind(-1)
        total_count = 1.0 / alpha
        nb = NegativeBinomial(total_count=total_count, logits=torch.log(alpha * mu))
        df, loc, scale = self.st(h).unbind(-1)
        st = StudentT(F.softplus(df) + 2.0, loc, F.softplus(scale) + 1e-3)
        vloc, conc = self.vm(h).unbind(-1)
        vm = VonMises(torch.atan2(torch.sin(vloc), torch.cos(vloc)), F.softplus(conc) + 0.1)
        logits, means, log_std = self.mix(h).view(*h.shape[:2], 3, 3).unbind(-1)
        mix = MixtureSameFamily(Categorical(logits=logits), Normal(means, log_std.exp()))
        return nb, st, vm, mix

rng = np.random.default_rng(912)
counts = torch.tensor(rng.poisson(3.0, (4, 9))).double()
resid = torch.tensor(rng.standard_t(4.0, (4, 8)))
phase = torch.tensor(rng.vonmises(0.5, 2.0, (4, 8)))
x = torch.stack([torch.log1p(counts[:, :-1]), torch.arange(8).double().expand(4, -1) / 8], -1)
model = init(DeepAR(), seed=913, scale=0.3)
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(6):
    nb, st, vm, mix = model(x)
    terms = [-nb.log_prob(counts[:, 1:]).mean(), -st.log_prob(resid).mean(),
             -vm.log_prob(phase).mean(), -mix.log_prob(resid).mean()]
    loss = sum(terms)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses += [t.item() for t in terms] + [float(model.lstm.weight_hh_l0.grad.norm())]
with torch.no_grad():
    losses += [nb.mean.mean().item(), nb.variance.mean().item(), st.variance.mean().item(),
               vm.mean.mean().item(), mix.mean.mean().item(), mix.variance.mean().item(),
               Independent(Normal(resid, 1.0), 1).log_prob(resid).sum().item()]
    losses += [vm.variance.mean().item(), st.entropy().mean().item()]
losses.append(loss.item())
'''


PROGRAMS = {name.lower(): source for name, source in [
    ("BERT_MLM", BERT_MLM),
    ("TRANSFORMER_XL", TRANSFORMER_XL),
    ("T5_BUCKETS", T5_BUCKETS),
    ("CENTERNET", CENTERNET),
    ("KGE", KGE),
    ("INSTANT_NGP", INSTANT_NGP),
    ("PROB_FORECAST", PROB_FORECAST),
]}

# programs whose last logged figure is not below their first (another segment's loss, a sum of
# terms against the first term alone)
NOT_TRAINING = {"centernet", "kge", "prob_forecast", "transformer_xl"}


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_program_matches_torch(name):
    assert_matches_torch(PROGRAMS[name], trains=name not in NOT_TRAINING)
