"""NbLogger when torchrun starts the processes with a static rendezvous (``--master-port``).

torchrun then sets ``TORCHELASTIC_RUN_ID=none``: no job id to share, and Lightning's own
launcher is not involved, so the processes must agree through their common launcher.
"""

from __future__ import annotations

import sys

from fwkit import SCRIPTS, clean_env, free_port, only_run, run

import nblog as nb


def test_torchrun_static_rendezvous_two_processes_one_run(tmp_path):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
           "--master-addr", "127.0.0.1", "--master-port", str(free_port()),
           str(SCRIPTS / "lightning_train.py"), "runs", "ckpt", "1"]
    out = run(cmd, tmp_path, clean_env()).stdout
    r = nb.RunReader(only_run(tmp_path / "runs"))
    assert out.split("run id: ")[1].split()[0] == r.id
    assert r.ranks() == [0, 1]
    assert r.scalars(["train/loss"])["step"].to_list() == list(range(8))
    for rank in (0, 1):
        assert r.timers(all_ranks=True).filter(rank=rank)["step"].to_list() == list(range(8))
