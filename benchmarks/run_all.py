"""Run every benchmarks/bench_*.py script in turn (each prints flowgrad/torch ratios)."""
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
