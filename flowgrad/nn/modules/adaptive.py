"""AdaptiveLogSoftmaxWithLoss (Grave et al., "Efficient softmax approximation for GPUs"), as
torch's: the frequent classes (below `cutoffs[0]`) and one entry per tail cluster share a
head softmax; a class in cluster i has log p = head's log p of the cluster + the cluster's
own log-softmax, computed from a smaller projection (in_features // div_value ** (i + 1)).

>>> import flowgrad as flow
>>> g = flow.manual_seed(0)
>>> asm = flow.nn.AdaptiveLogSoftmaxWithLoss(8, 10, cutoffs=[4, 7])
>>> out = asm(flow.randn(5, 8), flow.tensor([0, 3, 5, 8, 9]))
>>> out.output.shape, out.loss.shape
(flowgrad.Size([5]), flowgrad.Size([]))
>>> asm.log_prob(flow.randn(2, 8)).exp().sum(1)
tensor([1.0000, 1.0000], grad_fn=<SumBackward1>)
"""
from __future__ import annotations

from collections import namedtuple

from ...ops.reduce import argmax
from ...ops.shape import cat
from .. import functional as F
from ..module import Module
from .container import ModuleList, Sequential
from .linear import Linear

__all__ = ["AdaptiveLogSoftmaxWithLoss"]

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    """forward(input (N, in_features) or (in_features,), target (N,) or ()) -> (output: the
    log-probability of each target, loss: their negative mean). `log_prob(input)` gives all
    n_classes log-probabilities, `predict(input)` the most likely class."""

    def __init__(self, in_features, n_classes, cutoffs, div_value=4.0, head_bias=False,
                 device=None, dtype=None):
        super().__init__()
        cutoffs = list(cutoffs)
        if not cutoffs:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        if cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > n_classes - 1 \
                or len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs):
            raise ValueError("cutoffs should be a sequence of unique, positive integers sorted "
                             "in an increasing order, where each value is between 1 and "
                             "n_classes-1")
        self.in_features, self.n_classes = in_features, n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value, self.head_bias = div_value, head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, device=device,
                           dtype=dtype)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hidden = int(in_features // (div_value ** (i + 1)))
            size = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(
                Linear(in_features, hidden, bias=False, device=device, dtype=dtype),
                Linear(hidden, size, bias=False, device=device, dtype=dtype)))

    def reset_parameters(self):
        self.head.reset_parameters()
        for projection in self.tail:
            for layer in projection:
                layer.reset_parameters()

    def forward(self, input_, target_):
        if target_.dim() == 1:
            if input_.size(0) != target_.size(0):
                raise RuntimeError("Input and target should have the same size in the batch "
                                   "dimension.")
            if input_.dim() != 2:
                raise RuntimeError(f"1D target tensor expects 2D input tensors, but found "
                                   f"inputs with size {input_.size()}")
        elif target_.dim() == 0:
            if input_.dim() != 1:
                raise RuntimeError(f"0D target tensor expects 1D input tensors, but found "
                                   f"inputs with size {input_.size()}")
        else:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        batched = target_.dim() > 0
        input = input_ if batched else input_.unsqueeze(0)
        target = target_ if batched else target_.unsqueeze(0)
        if target.numel() and (int(target.min()) < 0 or int(target.max()) >= self.n_classes):
            raise RuntimeError(f"Target values should be in [0, {self.n_classes - 1}], but "
                               f"values in range [{target.min().item()}, "
                               f"{target.max().item()}] were found. ")
        # the head's entry of each row: its class (shortlist) or its cluster's slot
        head_entry = target.clone()
        rows_of = []
        for i in range(1, self.n_clusters + 1):
            low, high = self.cutoffs[i - 1], self.cutoffs[i]
            rows = ((target >= low) & (target < high)).nonzero().reshape(-1)
            if rows.numel():
                head_entry = head_entry.index_fill(0, rows, self.shortlist_size + i - 1)
                rows_of.append((i, low, rows))
        head_logprob = F.log_softmax(self.head(input), dim=1)
        output = head_logprob.gather(1, head_entry.unsqueeze(1)).squeeze(1)
        for i, low, rows in rows_of:
            cluster_logprob = F.log_softmax(self.tail[i - 1](input.index_select(0, rows)), dim=1)
            local = cluster_logprob.gather(1, (target.index_select(0, rows) - low).unsqueeze(1))
            output = output.index_add(0, rows, local.squeeze(1))
        loss = (-output).mean()
        return _ASMoutput(output if batched else output.squeeze(0), loss)

    def _full_log_prob(self, input, head_output):
        head_logprob = F.log_softmax(head_output, dim=1)
        parts = [head_logprob[:, :self.shortlist_size]]
        for i, projection in enumerate(self.tail):
            cluster_logprob = F.log_softmax(projection(input), dim=1)
            parts.append(cluster_logprob + head_logprob[:, self.shortlist_size + i].unsqueeze(1))
        return cat(parts, dim=1)

    def log_prob(self, input):
        """Log-probabilities of all n_classes classes, (N, n_classes)."""
        return self._full_log_prob(input, self.head(input))

    def predict(self, input):
        """The most likely class of each row, (N,): log_prob(input).argmax(1), computed from
        the head alone where its best entry is a shortlist class."""
        head_output = self.head(input)
        output = argmax(head_output, dim=1)
        outside = output >= self.shortlist_size
        if not bool(outside.any()):
            return output
        if bool(outside.all()):
            return argmax(self._full_log_prob(input, head_output), dim=1)
        best = argmax(self._full_log_prob(input[outside], head_output[outside]), dim=1)
        output[outside] = best
        return output
