"""Passes over a traced Program. Each takes a Program and rewrites it in place.

>>> from flowgrad.graph.ir import Program
>>> eliminate_dead_code(Program()).nodes
[]
"""
from __future__ import annotations


def eliminate_dead_code(program):
    """Keep only the nodes some result depends on (walking back from the results)."""
    needed = {v.id for v in program.results()}
    kept = []
    for node in reversed(program.nodes):
        if any(v.id in needed for v in node.outputs):
            kept.append(node)
            needed.update(v.id for v in node.inputs)
    program.nodes = kept[::-1]
    return program


PIPELINE = (eliminate_dead_code,)


def optimize(program):
    """Run every pass of the pipeline, in order."""
    for run_pass in PIPELINE:
        program = run_pass(program)
    return program
