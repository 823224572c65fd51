"""A Run handed to spawn and forkserver workers: they get an inert copy (issue 12, item 2).

Usage: pickle_run.py ROOT MODE, MODE one of "spawn", "forkserver", "dataloader".
The parent logs steps 0-9, hands an object holding the run to a worker (a
multiprocessing Process of that start method, or a torch DataLoader with two spawn
workers over a dataset holding the run), whose every logging call and finish() must
do nothing; the parent then logs steps 10-19 and finishes. Prints "RESULT <json>":
what the workers saw of their copy of the run.
"""

import json
import multiprocessing as mp
import sys

import nblog as nb


class Holder:
    """What a training script hands to workers: an object that holds the run."""

    def __init__(self, run):
        self.run = run


def use_copy(run) -> dict:
    """Call everything on a worker's copy of the run; report what it is."""
    run.add_scalar("loss", 99.0, step=1000)
    run.add_scalar({"worker/x": 1.0})
    run.add_text("worker/text", "from a worker", step=1000)
    with run.timer("worker/time", all_ranks=True):
        pass
    run.add_histogram("worker/hist", [1.0, 2.0], step=1000)
    run.flush()
    run.finish()
    return {"id": run.id, "dir": run.dir, "session": run.session, "rank": run.rank,
            "config": run.config, "is_logging": run.is_logging, "type": type(run).__name__}


def child(holder, queue) -> None:
    queue.put(use_copy(holder.run))


class Dataset:
    def __init__(self, run):
        self.run = run

    def __len__(self):
        return 4

    def __getitem__(self, i):
        info = use_copy(self.run)
        import torch

        return torch.tensor([i, int(info["is_logging"]), int(info["type"] == "Run")])


def main() -> None:
    root, mode = sys.argv[1], sys.argv[2]
    run = nb.init("pickle", run_id=f"pk-{mode}", config={"lr": 0.1}, root=root, system=False)
    for s in range(10):
        run.add_scalar("loss", float(s), step=s)
    run.flush()
    seen = []
    if mode == "dataloader":
        import torch.utils.data

        loader = torch.utils.data.DataLoader(Dataset(run), batch_size=1, num_workers=2,
                                             multiprocessing_context="spawn")
        seen = [batch[0].tolist() for batch in loader]
    else:
        ctx = mp.get_context(mode)
        queue = ctx.Queue()
        proc = ctx.Process(target=child, args=(Holder(run), queue))
        proc.start()
        seen = [queue.get(timeout=60)]
        proc.join(60)
        seen.append({"exitcode": proc.exitcode})
    for s in range(10, 20):  # the parent's run is unharmed by its workers
        run.add_scalar("loss", float(s), step=s)
    run.finish()
    print("RESULT " + json.dumps({"seen": seen, "dir": run.dir}), flush=True)


if __name__ == "__main__":
    main()
