"""The Flight Recorder's cost per collective: gloo ``all_reduce`` of a small tensor on
CPU, with ``TORCH_FR_BUFFER_SIZE`` as set outside (run it twice). Usage::

    for fr in 0 2000; do
      TORCH_FR_BUFFER_SIZE=$fr bash scripts/loopback.sh .venv/bin/torchrun --standalone \\
        --nproc-per-node 2 scripts/bench_fr.py --calls 20000
    done

Rank 0 prints µs per all_reduce (median of ``--repeat`` blocks of ``--calls`` calls).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    dist.init_process_group("gloo")
    t = torch.ones(4)
    for _ in range(500):
        dist.all_reduce(t)
    blocks = []
    for _ in range(a.repeat):
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(a.calls):
            dist.all_reduce(t)
        blocks.append((time.perf_counter() - t0) / a.calls * 1e6)
    if dist.get_rank() == 0:
        fr = os.environ.get("TORCH_FR_BUFFER_SIZE", "unset (torch default)")
        print(f"TORCH_FR_BUFFER_SIZE={fr}: {statistics.median(blocks):.2f} µs per all_reduce "
              f"(blocks {', '.join(f'{b:.2f}' for b in blocks)})", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
