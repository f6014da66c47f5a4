"""Lazy (graph) mode: `flow.nn.Graph` traces a step, differentiates it with a compiler pass and
runs it as a generated plan.

- `ir`: the traced job (Values, Nodes, Program);
- `tracer`: the interpreter that records `build`, and the autograd pass;
- `passes`: rewrites of a Program (dead-code elimination, ...);
- `codegen`: the plan, one straight-line Python function over arrays;
- `graph`: the user-facing `Graph`.
"""
from .graph import Graph, GraphConfig

__all__ = ["Graph", "GraphConfig"]
