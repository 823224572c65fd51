#!/usr/bin/env bash
# Run the whole test suite: make the environment ready (scripts/install.sh), then pytest.
# NB_VENV picks another venv (default .venv). Arguments go to pytest, e.g.
#   bash scripts/test.sh tests/unit -k ranks
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/install.sh
exec "${NB_VENV:-.venv}/bin/python" -m pytest -q "$@"
