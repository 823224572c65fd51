#!/usr/bin/env bash
# torchrun_example.sh - launch a training script under torchrun so that every rank, every
# node and every restart logs into ONE nb run.
#
#   scripts/torchrun_example.sh                            # scripts/train_ddp.py, 4 workers
#   NPROC=2 scripts/torchrun_example.sh my_train.py --lr 0.1
#   RUN_KEY=exp42 scripts/torchrun_example.sh my_train.py  # run it again later with the same
#                                                          # RUN_KEY: the same nb run continues
#   srun --ntasks-per-node=1 scripts/torchrun_example.sh my_train.py   # one torchrun per node
#
# Why it looks like this:
# - nb derives the run id from TORCHELASTIC_RUN_ID only when torchrun got --rdzv-id WITH a
#   rendezvous backend and endpoint. With --standalone (or no --rdzv-backend) torchrun silently
#   replaces --rdzv-id by a fresh uuid at every launch: the ranks of one launch still agree,
#   but a relaunch starts a new run, and nodes of a multi-node job cannot agree at all.
#   So this script always uses c10d with an explicit id, RUN_KEY: $SLURM_JOB_ID under Slurm
#   (kept by a requeue), else a key you choose, else a new one (printed, to reuse).
# - --max-restarts: when a worker dies, torchrun restarts every worker of the job; the
#   restart has the same TORCHELASTIC_RUN_ID, so nb continues the same run in a new session
#   and records TORCHELASTIC_RESTART_COUNT in it.
# - TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1: since torch 2.4 workers share the rendezvous store
#   and a restart reads the crashed attempt's addresses from it: init_process_group fails
#   ("Gloo connectFullMesh failed ... Connection refused", pytorch#135712). Measured with
#   torch 2.13 and gloo; this gives each restart its own store.
# - exec: torchrun replaces this shell, so a SIGTERM (Slurm preemption, requeue, scancel)
#   reaches it at once; it stops the workers with SIGTERM and nb flushes within 1 s.
# - torchrun's rendezvous store listens on every interface of the node (torch 2.13 takes no
#   bind address; RDZV_HOST only says where to connect). On one machine, keep it to loopback:
#   bash scripts/loopback.sh scripts/torchrun_example.sh ...   (the tests run it that way)
#
# Your training script must: call nb.init(project, run_name=...) on every rank with the same
# arguments (no run_id: it is derived), checkpoint regularly, and continue from its last
# checkpoint when one exists. nb hides the points a crashed session logged after that
# checkpoint, so curves stay clean.
#
# Environment: NPROC (workers per node, default 4), NNODES (default $SLURM_NNODES or 1),
# MAX_RESTARTS (default 1), RUN_KEY, RDZV_HOST (default: the first node of the Slurm
# allocation, else 127.0.0.1), RDZV_PORT (default 29400), TORCHRUN (default torchrun).
set -euo pipefail

NPROC=${NPROC:-4}
NNODES=${NNODES:-${SLURM_NNODES:-1}}
MAX_RESTARTS=${MAX_RESTARTS:-1}
RDZV_PORT=${RDZV_PORT:-29400}
TORCHRUN=${TORCHRUN:-torchrun}
export TORCH_DISABLE_SHARE_RDZV_TCP_STORE=${TORCH_DISABLE_SHARE_RDZV_TCP_STORE:-1}

if [ -z "${RDZV_HOST:-}" ]; then
  if [ -n "${SLURM_JOB_NODELIST:-}" ]; then
    RDZV_HOST=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
  else
    RDZV_HOST=127.0.0.1
  fi
fi
if [ -z "${RUN_KEY:-}" ]; then
  if [ -n "${SLURM_JOB_ID:-}" ]; then
    RUN_KEY=$SLURM_JOB_ID
  else
    RUN_KEY=$(date +%Y%m%d-%H%M%S)-$$
    echo "torchrun_example: RUN_KEY=$RUN_KEY (set it again to continue this run later)" >&2
  fi
fi
if [ $# -eq 0 ]; then
  set -- "$(dirname "$0")/train_ddp.py"
fi

exec "$TORCHRUN" \
  --nnodes "$NNODES" \
  --nproc-per-node "$NPROC" \
  --rdzv-backend c10d \
  --rdzv-endpoint "$RDZV_HOST:$RDZV_PORT" \
  --rdzv-id "$RUN_KEY" \
  --max-restarts "$MAX_RESTARTS" \
  "$@"
