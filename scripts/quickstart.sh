#!/usr/bin/env bash
# The main job, from a fresh clone: make .venv ready (scripts/install.sh), train a small MLP
# on scikit-learn's digits with 4 ranks of torchrun + DistributedDataParallel (gloo, CPU),
# logged with nblog, then list the runs and show this one with the `nb` command.
#
# Environment: NB_VENV (default .venv) the venv; NB_QUICKSTART_ROOT (default nb_runs) and
# NB_QUICKSTART_CKPT (default checkpoints) where the run and its checkpoint go; NPROC
# (default 4) the number of ranks.
# Safe to run again: each run gets a new run id in the same root.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/install.sh
venv="${NB_VENV:-.venv}"

root="${NB_QUICKSTART_ROOT:-nb_runs}"
ckpt="${NB_QUICKSTART_CKPT:-checkpoints}"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT

echo "quickstart: training with ${NPROC:-4} ranks (torchrun) into $root" >&2
# scripts/loopback.sh: torchrun's stores listen on every interface whatever address it is
# given; in a network namespace of loopback only, nothing is reachable from another machine.
OMP_NUM_THREADS=1 bash scripts/loopback.sh "$venv"/bin/torchrun --nproc-per-node "${NPROC:-4}" \
    scripts/train_ddp.py --root "$root" --ckpt-dir "$ckpt" 2>&1 | tee "$log"

run_id="$(sed -n 's/^run id: //p' "$log" | tail -n 1)"
if [ -z "$run_id" ]; then
    echo "quickstart: the training printed no run id" >&2
    exit 1
fi

echo
echo "\$ nb ls --root $root"
"$venv"/bin/nb ls --root "$root"
echo
echo "\$ nb show $run_id --root $root"
"$venv"/bin/nb show "$run_id" --root "$root"
echo
echo "quickstart: done. README.md, section \"Resume\", continues a run from its checkpoint." >&2
