"""One worker of a simulated launch: nblog.init from a JSON spec, log, report, finish.

argv[1] is a JSON object:
    init:         keyword arguments of nblog.init (project first, as "project")
    steps:        [start, stop]: for each step, every rank calls
                  add_scalar({"loss": step + 0.5}), add_text("sample") every 10 steps,
                  a timer "step_time" with all_ranks=True and a timer "rank0_only"
                  (default all_ranks), all at that step
    announce:     print "READY" (flushed) just before init
    log_level:    set the "nblog" logger's level and send it to stderr (e.g. "INFO")
    finish:       call run.finish() at the end (default true)

Prints one line "RESULT <json>": what the run says about itself, the pid, and
time.time() just before and after init.
"""

import json
import logging
import os
import sys
import time

import nblog as nb

spec = json.loads(sys.argv[1])
if spec.get("log_level"):
    logging.basicConfig(stream=sys.stderr, format="%(levelname)s %(message)s")
    logging.getLogger("nblog").setLevel(spec["log_level"])
kwargs = dict(spec.get("init", {}))
project = kwargs.pop("project", "proj")
kwargs.setdefault("system", False)
if spec.get("announce"):
    print("READY", flush=True)
before = time.time()
run = nb.init(project, **kwargs)
after = time.time()
start, stop = spec.get("steps", [0, 0])
for step in range(start, stop):
    run.add_scalar({"loss": step + 0.5}, step=step)
    if step % 10 == 0:
        run.add_text("sample", f"text at {step}", step=step)
    with run.timer("step_time", step=step, all_ranks=True):
        pass
    with run.timer("rank0_only", step=step):
        pass
result = {
    "id": run.id, "dir": run.dir, "rank": run.rank, "local_rank": run.local_rank,
    "world_size": run.world_size, "session": run.session, "is_logging": run.is_logging,
    "pid": os.getpid(), "before_init": before, "after_init": after,
}
if spec.get("finish", True):
    run.finish()
print("RESULT " + json.dumps(result), flush=True)
