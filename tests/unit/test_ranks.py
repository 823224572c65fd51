"""nblog.write._launch.detect_ranks: torchrun > Open MPI > Slurm > single process.

The environments below are what the launchers really set (shared/launchers/README.md),
including the nested launches where an outer launcher's variables lie.
"""

from __future__ import annotations

import logging

import pytest

from nblog.write._launch import RankInfo, detect_ranks


def torchrun(rank, world=4, local=None, local_world=None, group_rank=0):
    local_world = world if local_world is None else local_world
    return {
        "RANK": str(rank),
        "LOCAL_RANK": str(rank % local_world if local is None else local),
        "WORLD_SIZE": str(world),
        "LOCAL_WORLD_SIZE": str(local_world),
        "GROUP_RANK": str(group_rank),
        "GROUP_WORLD_SIZE": str(world // local_world),
        "TORCHELASTIC_RUN_ID": "none",
    }


def ompi(rank, size=4, local=None, local_size=None):
    local_size = size if local_size is None else local_size
    return {
        "OMPI_COMM_WORLD_RANK": str(rank),
        "OMPI_COMM_WORLD_SIZE": str(size),
        "OMPI_COMM_WORLD_LOCAL_RANK": str(rank % local_size if local is None else local),
        "OMPI_COMM_WORLD_LOCAL_SIZE": str(local_size),
        "OMPI_COMM_WORLD_NODE_RANK": str(rank % local_size if local is None else local),
        "PMIX_RANK": str(rank),
    }


def srun(procid, ntasks=4, localid=None, nodeid=0, nnodes=1):
    return {
        "SLURM_PROCID": str(procid),
        "SLURM_LOCALID": str(procid if localid is None else localid),
        "SLURM_NTASKS": str(ntasks),
        "SLURM_NPROCS": str(ntasks),
        "SLURM_NODEID": str(nodeid),
        "SLURM_NNODES": str(nnodes),
        "SLURM_JOB_NUM_NODES": str(nnodes),
        "SLURM_JOB_ID": "17",
        "SLURM_STEP_ID": "0",
    }


def test_no_launcher_is_rank_0_of_1():
    assert detect_ranks({}) == RankInfo(0, 0, 1, 1, "none", "")
    assert detect_ranks({"PATH": "/bin", "RANK": ""}) == RankInfo()


def test_torchrun():
    info = detect_ranks(torchrun(3, world=8, local_world=4, group_rank=0))
    assert (info.rank, info.local_rank, info.world_size, info.local_world_size) == (3, 3, 8, 4)
    assert (info.launcher, info.variable) == ("torchrun", "RANK")
    assert info.multi_machine


def test_open_mpi():
    info = detect_ranks(ompi(2, size=4))
    assert (info.rank, info.local_rank, info.world_size, info.local_world_size) == (2, 2, 4, 4)
    assert (info.launcher, info.variable) == ("mpirun", "OMPI_COMM_WORLD_RANK")
    assert not info.multi_machine


def test_srun_two_nodes():
    # rank 3 of `srun -N 2 -n 4`: tasks 0-2 on node1, task 3 alone on node2
    info = detect_ranks(srun(3, ntasks=4, localid=0, nodeid=1, nnodes=2))
    assert (info.rank, info.local_rank, info.world_size) == (3, 0, 4)
    assert info.local_world_size is None  # Slurm gives no per-node count we trust
    assert (info.launcher, info.variable) == ("slurm", "SLURM_PROCID")


def test_srun_one_node_knows_local_world_size():
    info = detect_ranks(srun(2, ntasks=4, nnodes=1))
    assert info.local_world_size == 4
    assert not info.multi_machine


@pytest.mark.parametrize("rank", [0, 1, 2, 3])
def test_sbatch_plus_mpirun_reads_open_mpi_not_slurm(rank):
    # sbatch + mpirun: every rank has SLURM_PROCID=0, SLURM_LOCALID=0, SLURM_NODEID=0
    env = {**srun(0, ntasks=4, localid=0, nodeid=0), **ompi(rank, size=4)}
    info = detect_ranks(env)
    assert (info.rank, info.local_rank, info.world_size) == (rank, rank, 4)
    assert info.launcher == "mpirun"


def test_sbatch_plus_mpirun_on_second_node():
    # there SLURM_NTASKS/SLURM_NNODES are 1/1 (the orted runs as srun step 1)
    env = {**srun(0, ntasks=1, localid=0, nodeid=0, nnodes=1), **ompi(5, size=8, local=1, local_size=4)}
    info = detect_ranks(env)
    assert (info.rank, info.local_rank, info.world_size, info.local_world_size) == (5, 1, 8, 4)


@pytest.mark.parametrize("worker", range(4))
def test_srun_plus_torchrun_reads_torchrun_not_slurm(worker):
    # srun -N 2 -n 2 torchrun --nproc-per-node 2: SLURM_PROCID is the agent's index
    agent = 1
    env = {
        **srun(agent, ntasks=2, localid=0, nodeid=agent, nnodes=2),
        **torchrun(agent * 2 + worker % 2, world=4, local_world=2, group_rank=agent),
    }
    info = detect_ranks(env)
    assert (info.rank, info.local_rank, info.world_size) == (agent * 2 + worker % 2, worker % 2, 4)
    assert info.launcher == "torchrun"


def test_sbatch_plus_torchrun():
    env = {**srun(0, ntasks=4, localid=0), **torchrun(2, world=4)}
    info = detect_ranks(env)
    assert (info.rank, info.world_size, info.launcher) == (2, 4, "torchrun")


def test_salloc_shell_without_procid_is_a_single_process():
    env = {"SLURM_JOB_ID": "5", "SLURM_NTASKS": "4", "SLURM_NNODES": "1"}
    assert detect_ranks(env) == RankInfo()


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"RANK": "one", "WORLD_SIZE": "4"}, "RANK"),
        ({"RANK": "1", "WORLD_SIZE": "4.0"}, "WORLD_SIZE"),
        ({"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "x"}, "LOCAL_RANK"),
        ({"RANK": "1", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "?"}, "LOCAL_WORLD_SIZE"),
        ({"RANK": "4", "WORLD_SIZE": "4"}, "RANK"),
        ({"RANK": "-1", "WORLD_SIZE": "4"}, "RANK"),
        ({"RANK": "0", "WORLD_SIZE": "0"}, "WORLD_SIZE"),
        ({"RANK": "1"}, "WORLD_SIZE"),
        ({"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "-2"}, "LOCAL_RANK"),
        ({"OMPI_COMM_WORLD_RANK": "1e3", "OMPI_COMM_WORLD_SIZE": "4"}, "OMPI_COMM_WORLD_RANK"),
        ({"OMPI_COMM_WORLD_RANK": "7", "OMPI_COMM_WORLD_SIZE": "4"}, "OMPI_COMM_WORLD_RANK"),
        ({"SLURM_PROCID": "0x1", "SLURM_NTASKS": "4"}, "SLURM_PROCID"),
        ({"SLURM_PROCID": "2", "SLURM_NTASKS": "two"}, "SLURM_NTASKS"),
        ({"SLURM_PROCID": "2", "SLURM_NTASKS": "2"}, "SLURM_PROCID"),
    ],
)
def test_malformed_values_raise_value_error_naming_the_variable(env, variable):
    with pytest.raises(ValueError) as info:
        detect_ranks(env)
    assert variable in str(info.value)


def test_malformed_torchrun_values_are_not_hidden_by_slurm():
    # the first launcher found decides; a bad RANK is an error, not a fall-through
    with pytest.raises(ValueError, match="RANK"):
        detect_ranks({"RANK": "x", "WORLD_SIZE": "4", **srun(1)})


def test_surrounding_whitespace_is_tolerated():
    assert detect_ranks({"RANK": " 1 ", "WORLD_SIZE": "4\n", "LOCAL_RANK": "1"}).rank == 1


def test_missing_local_rank_is_not_guessed_for_a_nonzero_rank(caplog):
    caplog.set_level(logging.WARNING, "nblog")
    info = detect_ranks({"RANK": "3", "WORLD_SIZE": "8"})
    assert info.rank == 3
    assert info.local_rank is None
    assert any("LOCAL_RANK" in r.getMessage() and "rank 3" in r.getMessage() for r in caplog.records)


def test_missing_local_rank_on_rank_0_is_0_without_warning(caplog):
    caplog.set_level(logging.WARNING, "nblog")
    assert detect_ranks({"RANK": "0", "WORLD_SIZE": "8"}).local_rank == 0
    assert caplog.records == []


def test_missing_local_rank_on_one_machine_is_the_rank(caplog):
    caplog.set_level(logging.WARNING, "nblog")
    info = detect_ranks({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "4"})
    assert info.local_rank == 3
    info = detect_ranks({"SLURM_PROCID": "2", "SLURM_NTASKS": "4", "SLURM_NNODES": "1"})
    assert info.local_rank == 2
    assert caplog.records == []


def test_missing_slurm_localid_on_several_nodes_warns(caplog):
    caplog.set_level(logging.WARNING, "nblog")
    info = detect_ranks({"SLURM_PROCID": "2", "SLURM_NTASKS": "4", "SLURM_NNODES": "2"})
    assert info.local_rank is None
    assert any("SLURM_LOCALID" in r.getMessage() for r in caplog.records)
