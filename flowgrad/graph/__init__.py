"""Lazy (graph) mode: `flow.nn.Graph` traces a step, differentiates it with a compiler pass and
runs it as a generated plan.

- `ir`: the traced job (Values, Nodes, Program);
- `tracer`: the interpreter that records `build`, and the autograd pass;
- `passes`: rewrites of a Program (dead-code elimination, ...);
- `codegen`: the plan, one straight-line Python function over arrays;
- `checkpointing`: activation checkpointing (`GraphModule`, the recomputation pass);
- `graph`: the user-facing `Graph`.

`flow.nn.graph` is this package, as OneFlow's `oneflow.nn.graph` (`flow.nn.graph.GraphModule`).
"""
import sys

from .. import nn as _nn
from .checkpointing import GraphModule, ProxyModule
from .graph import Graph, GraphConfig

_nn.graph = sys.modules[__name__]  # flow.nn.graph.GraphModule, as in OneFlow

__all__ = ["Graph", "GraphConfig", "GraphModule", "ProxyModule"]
