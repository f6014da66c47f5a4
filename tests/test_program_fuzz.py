"""Random autograd programs (views, in-place writes, no_grad, hooks, double backward) run in
torch and in flowgrad must agree: see tests/program_fuzz.py for the generator and the runner.

A failure prints the program as a script that runs under `import torch as m` and under
`import flowgrad as m`.  The slow test runs many thousands of programs and reports how many
differed, grouped by the first step that diverged, with the shortest reproducer of each group.
"""
from __future__ import annotations

import program_fuzz as pf
import pytest

FAST_SEEDS = range(300)
SLOW_SEEDS = range(100_000, 106_000)


@pytest.mark.parametrize("seed", FAST_SEEDS)
def test_program_matches_torch(seed):
    result = pf.run_seed(seed)
    assert result.ok, result.report()


def test_generation_is_deterministic():
    a, b = pf.generate(12345), pf.generate(12345)
    assert [s.code for s in a.steps] == [s.code for s in b.steps]
    assert a.coef == b.coef


@pytest.mark.slow
def test_many_programs_match_torch():
    results = pf.run_seeds(SLOW_SEEDS)
    differing = sum(not r.ok for r in results)
    report = pf.summary(results, max_groups=25)
    print(report)
    assert differing == 0, f"{differing} of {len(results)} programs differ from torch\n{report}"
