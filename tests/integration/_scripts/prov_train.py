"""A tiny job for tests/integration/test_provenance.py: copied into a git repository
and run from there. Prints JSON: the run folder and whether torch was imported.

    prov_train.py ROOT [--import-torch] [--off] [ARGS...]   (extra args are ignored)
"""

from __future__ import annotations

import json
import sys

root = sys.argv[1]
if "--import-torch" in sys.argv:
    import torch  # noqa: F401

import nblog as nb  # noqa: E402  (after the optional torch import)

run = nb.init("prov", root=root, system=False, **({"provenance": False} if "--off" in sys.argv else {}))
run.add_scalar("x", 1.0, step=0)
run.finish()
print(json.dumps({"dir": run.dir, "torch": "torch" in sys.modules, "numpy": "numpy" in sys.modules}))
