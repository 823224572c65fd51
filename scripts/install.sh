#!/usr/bin/env bash
# Make .venv at the repository root ready: create it if missing, then install torch 2.13.0
# (the CPU build where the machine's local wheels provide it), then the project with its dev
# extra and scikit-learn. Idempotent: a stamp file keyed on pyproject.toml and this script
# skips the install when nothing changed and the venv is complete.
#
# Used by scripts/quickstart.sh and scripts/test.sh. Environment:
#   PYTHON     the interpreter that creates the venv (default python3)
#   NB_VENV    the venv folder (default <repo>/.venv)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${NB_VENV:-$repo/.venv}"
py="$venv/bin/python"
stamp="$venv/.nb-install-stamp"
torch_spec="torch==2.13.0"

if [ ! -x "$py" ]; then
    echo "install: creating $venv" >&2
    "${PYTHON:-python3}" -m venv "$venv"
fi

want="$(cat "$repo/pyproject.toml" "$repo/scripts/install.sh" | sha256sum | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$venv/bin/nb" ] &&
    "$py" -c "import importlib.util as u, sys
sys.exit(any(u.find_spec(m) is None for m in ('torch', 'sklearn', 'nblog', 'nbcli', 'pytest')))"; then
    echo "install: $venv is up to date" >&2
    exit 0
fi

# pip, minus the machine-local index warnings about packages it does not hold.
pip_install() {
    set +e
    "$py" -m pip install --quiet "$@" 2>&1 | grep -v 'is ignored: it is neither a file nor a directory' >&2
    local rc=${PIPESTATUS[0]}
    set -e
    return "$rc"
}

rm -f "$stamp"
# torch first and pinned, on its own: with no torch installed, a plain 'torch' requirement
# (from any package) would make pip fetch a CUDA build of several GB.
echo "install: $torch_spec" >&2
pip_install "$torch_spec"
# The distribution was called "nb" (a name PyPI gives to another project) before it was nblog:
# an editable install of this tree under the old name goes, else both would own bin/nb.
if "$py" -m pip show nb 2>/dev/null | grep -qxF "Editable project location: $repo"; then
    echo "install: removing this tree's old 'nb' distribution (now 'nblog')" >&2
    "$py" -m pip uninstall --quiet --yes nb >&2
fi
echo "install: the project (.[dev]) and scikit-learn" >&2
pip_install "$torch_spec" -e "$repo[dev]" scikit-learn
"$py" -c "import torch, sklearn, nblog; print('install: torch', torch.__version__, '| scikit-learn', sklearn.__version__, '| nblog', nblog.__version__)" >&2
echo "$want" >"$stamp"
