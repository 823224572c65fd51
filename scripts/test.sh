#!/usr/bin/env bash
# Run the whole test suite: make the environment ready (scripts/install.sh, and as root the
# browser of nb report's tests: scripts/browser_up.sh), then the type checker (mypy), then pytest.
# NB_VENV picks another venv (default .venv). Arguments go to pytest, e.g.
#   bash scripts/test.sh tests/unit -k ranks
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/install.sh
if [ "$(id -u)" = 0 ]; then
    bash scripts/browser_up.sh "${NB_VENV:-.venv}" >&2
else
    echo "test: not root, so Chromium is not installed here; tests/report's browser tests need" \
        "Debian's chromium and chromium-driver (bash scripts/browser_up.sh as root)" >&2
fi
# The type checker first ([tool.mypy] in pyproject.toml: nblog and nbcli, every function
# annotated): one error fails the run before any test.
"${NB_VENV:-.venv}/bin/python" -m mypy
exec "${NB_VENV:-.venv}/bin/python" -m pytest -q "$@"
