"""One worker that logs with add_scalar's own counter (no step anywhere).

argv[1] is a JSON object:
    init:   keyword arguments of nblog.init (project first, as "project")
    n:      how many times to call add_scalar("loss", i) without a step; after each, an
            all-ranks timer "step_time" with no step (logs at the current step)
    die:    instead of finishing: log step 0, flush, log the rest, flush, print "READY"
            and wait to be killed (kill -9), so run.json's last step stays at 0

Prints "RESULT <json>" with the session and the counter's first step (finish mode).
"""

import json
import sys

import nblog as nb

spec = json.loads(sys.argv[1])
kwargs = dict(spec["init"])
project = kwargs.pop("project")
kwargs.setdefault("system", False)
run = nb.init(project, **kwargs)
for i in range(spec["n"]):
    run.add_scalar("loss", float(i))
    with run.timer("step_time", all_ranks=True):
        pass
    if spec.get("die") and i == 0:
        run.flush()
if spec.get("die"):
    run.flush()
    print("READY", flush=True)
    sys.stdin.read()  # killed here
run.finish()
print("RESULT " + json.dumps({"session": run.session, "rank": run.rank}), flush=True)
