"""An unwritable root fails ``init`` at once, with a message naming the path and the
cause (SPEC §5: errors in init arguments — an unwritable root — raise at once).

Root bypasses ``chmod``, so the cases use what stops root too: a read-only tmpfs, a
file where a folder should be, an immutable folder (``chattr +i``), and, for plain
missing permissions, a child process whose capabilities to override them were
dropped (``setpriv``). Each case is skipped, with the reason, where this machine
cannot set it up.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hardkit import REPO, clean_env, mounted_tmpfs

import nblog as nb


def init_fails(root, exc_type=OSError, **kwargs) -> str:
    t0 = time.monotonic()
    with pytest.raises(exc_type) as info:
        nb.init("proj", root=root, system=False, _environ={}, **kwargs)
    assert time.monotonic() - t0 < 2.0  # at once: no retry loop, no wait
    return str(info.value)


def test_a_root_on_a_read_only_filesystem(tmp_path):
    with mounted_tmpfs(tmp_path / "ro", "1m", readonly=True) as ro:
        message = init_fails(ro / "runs")
    assert str(ro / "runs" / "proj") in message and "Read-only file system" in message, message


def test_a_project_folder_that_exists_on_a_read_only_filesystem(tmp_path):
    def prepare(path):
        (path / "runs" / "proj" / "old-00000000").mkdir(parents=True)

    with mounted_tmpfs(tmp_path / "ro", "1m", readonly=True, prepare=prepare) as ro:
        message = init_fails(ro / "runs")
        assert str(ro / "runs" / "proj") in message and "read-only file system" in message.lower(), message
        message = init_fails(ro / "runs", run_id="old-00000000", resume="auto")  # resuming there
        assert str(ro / "runs" / "proj") in message and "read-only file system" in message.lower(), message


def test_a_file_where_the_root_folder_should_be(tmp_path):
    (tmp_path / "runs").write_text("not a folder")
    message = init_fails(tmp_path / "runs")
    assert str(tmp_path / "runs" / "proj") in message and "Not a directory" in message, message
    (tmp_path / "runs2").mkdir()
    (tmp_path / "runs2" / "proj").write_text("not a folder either")
    message = init_fails(tmp_path / "runs2")
    assert str(tmp_path / "runs2" / "proj") in message, message


@pytest.mark.parametrize("resume", [None, "auto"])
def test_a_file_where_the_run_folder_should_be(tmp_path, resume):
    (tmp_path / "runs" / "proj").mkdir(parents=True)
    (tmp_path / "runs" / "proj" / "taken-00000000").write_text("a file")
    message = init_fails(tmp_path / "runs", run_id="taken-00000000", resume=resume)
    assert str(tmp_path / "runs" / "proj" / "taken-00000000") in message and "not a folder" in message, message
    assert (tmp_path / "runs" / "proj" / "taken-00000000").read_text() == "a file"


@pytest.fixture
def immutable(tmp_path):
    """A folder even root cannot write in (ext2/3/4, xfs, btrfs)."""
    path = tmp_path / "immutable"
    path.mkdir()
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed")
    p = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot make a folder immutable here: {p.stderr.strip()}")
    yield path
    subprocess.run(["chattr", "-i", str(path)], capture_output=True)


def test_an_immutable_root_folder(immutable):
    message = init_fails(immutable)
    assert str(immutable / "proj") in message and "Operation not permitted" in message, message


def test_an_immutable_project_folder(tmp_path):
    (tmp_path / "runs" / "proj").mkdir(parents=True)
    p = subprocess.run(["chattr", "+i", str(tmp_path / "runs" / "proj")], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot make a folder immutable here: {p.stderr.strip()}")
    try:
        message = init_fails(tmp_path / "runs")
    finally:
        subprocess.run(["chattr", "-i", str(tmp_path / "runs" / "proj")], capture_output=True)
    assert str(tmp_path / "runs" / "proj") in message and "not writable" in message, message


CHILD = """
import sys
import nblog as nb
try:
    nb.init("proj", root=sys.argv[1], system=False)
except OSError as err:
    print("ERROR", type(err).__name__, err)
else:
    print("NO ERROR")
"""


@pytest.mark.parametrize("where", ["root", "project"])
def test_missing_permissions_of_an_unprivileged_process(where):
    """Root minus the capabilities that override file permissions: an ordinary user."""
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv is not installed")
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o755)
        root = Path(tmp) / "runs"
        root.mkdir(mode=0o755)
        if where == "project":
            (root / "proj").mkdir(mode=0o755)
            os.chown(root / "proj", 65534, 65534)
        os.chown(root, 65534, 65534)  # someone else's folders, mode 0755
        drop = "-dac_override,-dac_read_search,-fowner"
        cmd = ["setpriv", f"--bounding-set={drop}", f"--inh-caps={drop}", sys.executable, "-c", CHILD, str(root)]
        p = subprocess.run(cmd, capture_output=True, text=True, env=clean_env(), cwd=REPO, timeout=60)
        if "setpriv:" in p.stderr:
            pytest.skip(f"cannot drop capabilities here: {p.stderr.strip()}")
        assert p.stdout.startswith("ERROR PermissionError"), (p.stdout, p.stderr)
        assert str(root / "proj") in p.stdout, p.stdout
        assert "Permission denied" in p.stdout or "not writable" in p.stdout, p.stdout
