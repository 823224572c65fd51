#!/usr/bin/env bash
# smoke_wheel.sh - test what users install: build the wheel and the sdist, install the wheel
# (not editable) into a fresh venv outside the work tree, and use it there as a new user would:
#
#   import nblog; a short logged run; nb ls; nb show; nb serve (without and with its extra:
#   the page, its files and the API from the wheel, token required); nb tui RUN in a real terminal (tmux):
#   its first screen, then q and exit 0; man nb (found from PATH, no MANPATH); the sdist's
#   contents (README, man pages, the TUI's stylesheet).
#
# torch is not installed there: nothing here needs it. Installs tmux, man-db and curl with apt-get
# when missing (as root). Used by .ci/run. Environment:
#   PYTHON       the interpreter of the fresh venv (default python3)
#   NB_VENV      the project's venv that builds (default .venv; scripts/install.sh when it has no
#                `build`)
#   NB_SMOKE_DIR work folder (default: a new temporary one, removed at the end)
# Messages go to stderr prefixed "smoke_wheel:"; exit 0 when every check passed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo=$(pwd)
t0=$(date +%s)

say() { printf 'smoke_wheel: %s\n' "$*" >&2; }
die() { printf 'smoke_wheel: FAILED: %s\n' "$*" >&2; exit 1; }

# ---------------------------------------------------------------------- tools
missing=()
command -v tmux >/dev/null || missing+=(tmux)
command -v man >/dev/null && command -v groff >/dev/null || missing+=(man-db)
command -v curl >/dev/null || missing+=(curl)
if [ ${#missing[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || die "needs ${missing[*]} (apt-get install ${missing[*]}, as root)"
  say "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # apt-get update only when the package lists do not know the packages yet
  if ! apt-cache show "${missing[@]}" >/dev/null 2>&1; then apt-get update -qq >/dev/null; fi
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The builder: the project's venv, which has `build` (dev extra); made ready when it lacks it.
build_py="${NB_VENV:-.venv}/bin/python"
"$build_py" -c "import build" 2>/dev/null || bash scripts/install.sh

if [ -n "${NB_SMOKE_DIR:-}" ]; then
  work=$NB_SMOKE_DIR; rm -rf "$work"; mkdir -p "$work"
else
  work=$(mktemp -d /tmp/nb-smoke.XXXXXX)
fi
tsock="nbsmoke$$"   # a tmux server of our own, stopped at the end
cleanup() {
  tmux -L "$tsock" kill-server >/dev/null 2>&1 || true
  [ -n "${NB_SMOKE_DIR:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

# ---------------------------------------------------------------------- build
# From a copy of what a clone holds (tracked files, and new ones git does not ignore): no
# build/ or *.egg-info left in the work tree can add a file that a release would lack.
say "building the sdist and the wheel (python -m build) from a copy of the work tree"
mkdir -p "$work/src"
git ls-files -co --exclude-standard -z | xargs -0 tar cf - | tar xf - -C "$work/src"
"$build_py" -m build --outdir "$work/dist" "$work/src" >"$work/build.log" 2>&1 || {
  tail -n 30 "$work/build.log" >&2; die "python -m build failed"; }
wheel=$(ls "$work"/dist/nblog-*.whl)
sdist=$(ls "$work"/dist/nblog-*.tar.gz)
tar tzf "$sdist" | sed 's|^[^/]*/||' | sort >"$work/sdist.txt"
for f in README.md pyproject.toml nbcli/tui/nb.tcss nblog/py.typed nbcli/py.typed $(cd man && ls | sed 's|^|man/|'); do
  grep -qxF "$f" "$work/sdist.txt" || die "the sdist has no $f"
done

# ---------------------------------------------------------------------- install
say "installing $(basename "$wheel") into a fresh venv"
"${PYTHON:-python3}" -m venv "$work/venv"
venv=$work/venv
"$venv/bin/python" -m pip install --quiet "$wheel" 2>&1 | grep -v 'is ignored: it is neither a file nor a directory' >&2 || true
[ -x "$venv/bin/nb" ] || die "pip install of the wheel failed (no $venv/bin/nb)"

# Away from the work tree and with a clean environment: nothing may come from the checkout.
cd "$work"
unset PYTHONPATH NB_DIR NB_RUN_ID NB_RESUME NB_MODE NB_DEBUG MANPATH MANOPT
export PATH="$venv/bin:$PATH" TZ=UTC NB_SYSTEM=0
"$venv/bin/python" - "$venv" <<'EOF' || die "the installed packages are not the wheel's"
import importlib.metadata as md, os, sys
import nblog, nbcli
venv = os.path.realpath(sys.argv[1])
for m in (nblog, nbcli):
    assert os.path.realpath(m.__file__).startswith(venv), f"{m.__name__} imported from {m.__file__}"
assert md.version("nblog") == nblog.__version__, (md.version("nblog"), nblog.__version__)
heavy = [m for m in ("torch", "polars", "numpy", "textual", "typer", "PIL") if m in sys.modules]
assert not heavy, f"import nblog imported {heavy}"
EOF

# ---------------------------------------------------------------------- a run
run_id=$("$venv/bin/python" - <<'EOF'
import nblog as nb
run = nb.init("smoke", run_name="wheel", root="runs", config={"lr": 0.1, "layers": [8, 8]})
for step in range(50):
    with run.timer("time/step", step=step):
        run.add_scalar({"train/loss": 1.0 / (step + 1), "train/lr": 0.1}, step=step)
run.add_text("eval/sample", "pred 3 true 3", step=49)
run.finish()
print(run.id)
EOF
) || die "the logged run failed"
[ -n "$run_id" ] || die "the logged run printed no id"
say "run $run_id logged"

nb ls --root runs >"$work/ls.txt" || die "nb ls exited $?"
grep -qF "$run_id" "$work/ls.txt" || { cat "$work/ls.txt" >&2; die "nb ls does not list $run_id"; }
nb show "$run_id" --root runs >"$work/show.txt" || die "nb show exited $?"
for want in train/loss time/step eval/sample lr; do
  grep -qF "$want" "$work/show.txt" || { cat "$work/show.txt" >&2; die "nb show does not show $want"; }
done

# ---------------------------------------------------------------------- the TUI in a terminal
say "nb tui $run_id in tmux"
tx() { tmux -L "$tsock" "$@"; }
tx -f /dev/null new-session -d -s smoke -x 100 -y 30 \
  "cd '$work' && nb tui --root runs '$run_id'; echo nb-exit=\$?; sleep 60"
pane() {   # the screen, without its empty last lines
  tx capture-pane -p -t smoke | awk 'NF { for (; blank > 0; blank--) print ""; print; next } { blank++ }'
}
wait_screen() {   # wait_screen TEXT SECONDS: until the pane shows TEXT; fails at once if nb exited
  local deadline=$(( $(date +%s) + $2 )) screen
  while screen=$(pane) && ! grep -qF -- "$1" <<<"$screen"; do
    if grep -q '^nb-exit=' <<<"$screen" || [ "$(date +%s)" -ge "$deadline" ]; then
      printf '%s\n' "$screen" >&2; die "nb tui: '$1' not on the screen (waited up to $2 s)"
    fi
    sleep 0.2
  done
}
wait_screen "train/loss" 60      # the tag tree and the first plot: the TUI started
wait_screen "step 49" 30         # the run's last step, read
pane >"$work/tui.txt"
tx send-keys -t smoke q
wait_screen "nb-exit=" 20
pane | grep -qE '^nb-exit=0[[:space:]]*$' || { pane >&2; die "nb tui did not exit 0"; }

# ---------------------------------------------------------------------- nb serve
# Without its extra it says what to install; with it, the page, its files and the API answer
# from the installed wheel (package data), only with the token; SIGTERM stops it with 0.
nb serve --root runs --port 0 >"$work/serve0.txt" 2>&1 && die "nb serve ran without the serve extra"
grep -qF "pip install 'nblog[serve]'" "$work/serve0.txt" || { cat "$work/serve0.txt" >&2; die "nb serve without its extra says nothing useful"; }
say "installing the serve extra (${wheel##*/}[serve])"
"$venv/bin/python" -m pip install --quiet "${wheel}[serve]" 2>&1 | grep -v 'is ignored: it is neither a file nor a directory' >&2 || true
nb serve --root runs --port 0 >"$work/serve.txt" 2>"$work/serve.err" &
serve_pid=$!
for _ in $(seq 300); do grep -q "^nb serve: http" "$work/serve.txt" && break; sleep 0.1; done
url=$(sed -n 's/^nb serve: //p' "$work/serve.txt")
[ -n "$url" ] || { cat "$work/serve.err" >&2; die "nb serve printed no address"; }
base=${url%%/?token=*}
token=${url#*token=}
[ "$(curl -s -o /dev/null -w '%{http_code}' "$base/api/runs")" = 401 ] || die "nb serve answered without its token"
curl -sf -c "$work/jar" -b "$work/jar" -L "$url" >"$work/page.html" || die "nb serve: the page did not load"
grep -qF 'src="static/serve.js"' "$work/page.html" || die "nb serve: the page is not nb serve's"
for f in serve.js serve.css report.js report.css uPlot.js uPlot.css; do
  curl -sf -b "$work/jar" "$base/static/$f" >/dev/null || die "nb serve: static/$f is missing from the wheel"
done
curl -sf -H "Authorization: Bearer $token" "$base/api/runs" | grep -qF "\"$run_id\"" || die "nb serve: /api/runs lacks $run_id"
kill -TERM "$serve_pid"
wait "$serve_pid" || die "nb serve exited $? on SIGTERM"

# ---------------------------------------------------------------------- man
page=$(man -w nb) || die "man finds no page nb (looked from PATH: $venv/bin -> $venv/share/man)"
[ "$page" = "$venv/share/man/man1/nb.1" ] || die "man nb is $page, not the wheel's"
[ "$(man -w 5 nb-format)" = "$venv/share/man/man5/nb-format.5" ] || die "man 5 nb-format is not the wheel's"
MANWIDTH=80 man -P cat nb 2>/dev/null | head -n 4 >"$work/man.txt"
grep -q "inspect, tail, export" "$work/man.txt" || { cat "$work/man.txt" >&2; die "man nb shows no page"; }

say "passed in $(( $(date +%s) - t0 )) s: wheel + sdist, fresh venv, run, nb ls, nb show, nb tui (exit 0), nb serve, man nb"
