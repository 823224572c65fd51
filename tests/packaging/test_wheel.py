"""What a normal (non-editable) install gets: the wheel and sdist built from this tree.

The editable install of scripts/install.sh reads every file from the work tree, so a
file left out of the wheel goes unnoticed there (a wheel without ``nbcli/tui/nb.tcss``
gave a TUI that could not start). These tests build the wheel and the sdist from a copy
of the tree, as ``python -m build`` does for a release, and check what they hold;
scripts/smoke_wheel.sh installs the wheel into a fresh venv and runs it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import nblog

REPO = Path(__file__).resolve().parents[2]
MAN = sorted(p.name for p in (REPO / "man").iterdir() if p.suffix in (".1", ".5"))


def work_tree_files() -> list[str]:
    """Tracked files and untracked ones git does not ignore: what a clone plus local edits holds."""
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO,
                         capture_output=True, check=True).stdout
    return [f for f in out.decode().split("\0") if f and (REPO / f).is_file()]


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> dict[str, Path]:
    """``{"wheel": path, "sdist": path}`` built from a copy of the work tree (no build/ left over)."""
    base = tmp_path_factory.mktemp("dist")
    src = base / "src"
    for f in work_tree_files():
        (src / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / f, src / f)
    out = base / "out"
    built = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(src)],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (wheel,) = out.glob("*.whl")
    (sdist,) = out.glob("*.tar.gz")
    return {"wheel": wheel, "sdist": sdist}


def test_the_distribution_is_nblog(dist):
    """`nb` on PyPI is another project: the distribution is nblog, the command stays nb."""
    assert dist["wheel"].name.startswith("nblog-") and dist["sdist"].name.startswith("nblog-")
    with zipfile.ZipFile(dist["wheel"]) as z:
        info = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = z.read(info).decode()
        assert "\nName: nblog\n" in metadata
        assert f"\nVersion: {nblog.__version__}\n" in metadata  # one version, nblog.__version__
        entry = z.read(info.replace("METADATA", "entry_points.txt")).decode()
    assert "nb = nbcli.app:main" in entry


def test_the_wheel_holds_every_file_the_packages_read(dist):
    """Every file of nblog/ and nbcli/ that is not Python source (the TUI's stylesheet,
    py.typed, anything added later) is in the wheel beside the modules."""
    wanted = [f for f in work_tree_files() if f.split("/")[0] in ("nblog", "nbcli")
              and not f.endswith((".py", ".pyc")) and "__pycache__" not in f]
    assert "nbcli/tui/nb.tcss" in wanted and "nblog/py.typed" in wanted and "nbcli/py.typed" in wanted
    with zipfile.ZipFile(dist["wheel"]) as z:
        names = set(z.namelist())
    missing = [f for f in wanted if f not in names]
    assert not missing, f"left out of the wheel: {missing}"


def test_the_wheel_installs_the_man_pages_under_share_man(dist):
    with zipfile.ZipFile(dist["wheel"]) as z:
        pages = {n.split(".data/data/", 1)[1] for n in z.namelist() if ".data/data/" in n}
    assert pages == {f"share/man/man{name[-1]}/{name}" for name in MAN}


def test_the_sdist_holds_the_readme_the_man_pages_and_the_stylesheet(dist):
    with tarfile.open(dist["sdist"]) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    for f in ["README.md", "pyproject.toml", "nbcli/tui/nb.tcss", "nbcli/py.typed", *(f"man/{m}" for m in MAN)]:
        assert f in names, f


@pytest.mark.skipif(shutil.which("man") is None, reason="needs man (man-db); scripts/smoke_wheel.sh installs it")
def test_man_finds_the_pages_of_an_installed_wheel_from_path(dist, tmp_path):
    """`pip install` into a prefix (a venv, ~/.local): man-db looks in <dir>/share/man for
    each <dir>/bin on PATH, so `man nb` works with no MANPATH once the venv's bin is on PATH."""
    prefix = tmp_path / "prefix"
    # --ignore-installed: else pip first uninstalls the project from the venv running the tests
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-compile",
                           "--ignore-installed", "--prefix", str(prefix), str(dist["wheel"])],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (prefix / "bin" / "nb").exists()
    env = {k: v for k, v in os.environ.items() if k not in ("MANPATH", "MANOPT")}
    env["PATH"] = f"{prefix / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    for section, page in [("1", "nb"), ("1", "nb-tui"), ("5", "nb-format")]:
        found = subprocess.run(["man", "-w", section, page], env=env, capture_output=True, text=True, timeout=60)
        assert found.returncode == 0, found.stderr
        assert found.stdout.strip() == str(prefix / "share" / "man" / f"man{section}" / f"{page}.{section}")
    shown = subprocess.run(["man", "-P", "cat", "nb"], env={**env, "MANWIDTH": "80"},
                           capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and "nb - inspect" in shown.stdout.replace("\u2010", "-")
