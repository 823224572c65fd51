"""A sweep in one process: ``python _sweep_writer.py '<json spec>'`` (or ``@FILE``) runs ``nb.init`` /
``add_scalar`` / ``finish`` once per run of the spec, as a hyper-parameter sweep driver
does (real nblog: real writer threads, run.json and event logs).

Spec: ``{"project": str, "runs": [{"id": str, "name": str, "config": {...},
"loss": [floats], "acc": [floats], "fail": bool}, ...]}``. ``loss`` is logged as
``train/loss`` and ``acc`` as ``val/acc`` at steps 0, 1, ...; ``fail`` leaves the run
"failed" (finished with an exception). NB_DIR gives the root.
"""

from __future__ import annotations

import json
import sys

import nblog as nb


def main() -> None:
    arg = sys.argv[1]
    if arg.startswith("@"):  # a spec too long for the command line: @FILE
        with open(arg[1:], encoding="utf-8") as f:
            arg = f.read()
    spec = json.loads(arg)
    for r in spec["runs"]:
        run = nb.init(spec.get("project", "sweep"), run_id=r["id"], run_name=r.get("name"), config=r.get("config"),
                      system=False, flush_interval=60)
        for step, v in enumerate(r.get("loss", [])):
            run.add_scalar("train/loss", v, step=step)
        for step, v in enumerate(r.get("acc", [])):
            run.add_scalar("val/acc", v, step=step)
        run.finish("failed" if r.get("fail") else "finished")


if __name__ == "__main__":
    main()
