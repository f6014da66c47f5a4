"""Run every benchmarks/bench_*.py script in turn. Those that compare with torch (bench_core,
bench_conv, bench_training, bench_optim) time each framework in its own worker processes,
alternating (the first three through common.run_workers); bench_graph and bench_linear are
flowgrad only."""
from __future__ import annotations

import glob
import os
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
failed = 0
for script in sorted(glob.glob(os.path.join(here, "bench_*.py"))):
    print(f"== {os.path.basename(script)}", flush=True)
    failed |= subprocess.call([sys.executable, script] + sys.argv[1:]) != 0
sys.exit(failed)
