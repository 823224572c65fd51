"""One message for every output nb cannot write: ``error: cannot write PATH: REASON``,
naming the user's path (never a temp file, never ``[Errno N]``), exit status 1, and no
temp file left behind (nblog.reader.lowlevel.write_output / writing_to).

Root bypasses chmod, so the unwritable places are ones that stop root too: a folder
where the file should go, a symlink to /dev/full (every write: ENOSPC), a read-only
bind mount and a full tmpfs (the last two need mount rights; skipped without them, as
tests/hardening does).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap

import pytest
from cli_helpers import clean_env

CODE = "from nbcli.app import main; main()"
RUN = "a-00000001"


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("outerr")
    script = textwrap.dedent(f"""
        import numpy as np
        import nblog
        run = nblog.init("p", root={str(root)!r}, run_id={RUN!r}, system=False, console=False)
        for step in range(30):
            run.add_scalar("loss", 1.0 / (step + 1), step=step)
        run.add_image("img", np.zeros((4, 4, 3), dtype=np.uint8), step=1)
        run.finish()
    """)
    subprocess.run([sys.executable, "-c", script], check=True, env=clean_env(), timeout=300, capture_output=True)
    return root


def nb(root, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CODE, *args, "--root", str(root)], capture_output=True, text=True,
                          env=clean_env(), timeout=300)


def assert_cannot_write(res: subprocess.CompletedProcess, path, reason: str) -> None:
    assert res.returncode == 1, res.stderr
    assert res.stderr.splitlines()[0] == f"error: cannot write {path}: {reason}", res.stderr
    assert ".tmp" not in res.stderr and "[Errno" not in res.stderr and "Traceback" not in res.stderr


# what each command writes under a folder OUT; the path its message names
OUTPUTS = {
    "report": (["report", RUN, "-o", "{out}/r.html"], "{out}/r.html"),
    "plot": (["plot", RUN, "-t", "loss", "-o", "{out}/p.png"], "{out}/p.png"),
    "export": (["export", RUN, "-o", "{out}/e.csv"], "{out}/e.csv"),
    "export-root": (["export", "-o", "{out}/ds"], "{out}/ds/project=p/run=a-00000001/rank=0"),
    "tfevents": (["export", RUN, "-F", "tfevents", "-o", "{out}/tb"], "{out}/tb/rank_0"),
    "media": (["media", RUN, "-o", "{out}/m"], "{out}/m/img"),
}


def _args(which: str, out) -> tuple[list[str], str]:
    args, path = OUTPUTS[which]
    return [a.format(out=out) for a in args], path.format(out=out)


def test_report_onto_a_folder_names_the_path_and_leaves_no_temp_file(root, tmp_path):
    """The temp file is written, then the rename onto a folder fails: it used to say
    "[Errno 21] Is a directory: 'x.html.tmp1234' -> 'x.html'"."""
    (tmp_path / "x.html").mkdir()
    res = nb(root, "report", RUN, "-o", str(tmp_path / "x.html"))
    assert res.returncode == 1 and ".tmp" not in res.stderr and "[Errno" not in res.stderr, res.stderr
    assert f"error: {tmp_path / 'x.html'} is a folder" in res.stderr
    assert os.listdir(tmp_path) == ["x.html"] and os.listdir(tmp_path / "x.html") == []


@pytest.mark.parametrize("which", ["report", "plot", "export"])
def test_a_file_that_cannot_be_written_to_says_why(root, tmp_path, which):
    """A symlink to /dev/full: the file is written through the link (as cp does) and
    every write fails with ENOSPC; the link stays."""
    args, path = _args(which, tmp_path)
    os.symlink("/dev/full", path)
    res = nb(root, *args)
    assert_cannot_write(res, path, "No space left on device")
    assert os.readlink(path) == "/dev/full" and os.listdir(tmp_path) == [os.path.basename(path)]


def _mount(args: list[str]) -> None:
    p = subprocess.run(["mount", *args], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount here (needs root or CAP_SYS_ADMIN): {p.stderr.strip()}")


@contextlib.contextmanager
def read_only(folder):
    folder.mkdir()
    _mount(["--bind", str(folder), str(folder)])
    try:
        _mount(["-o", "remount,bind,ro", str(folder)])
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


@pytest.mark.parametrize("which", sorted(OUTPUTS))
def test_a_read_only_folder(root, tmp_path, which):
    with read_only(tmp_path / "ro") as ro:
        args, path = _args(which, ro)
        res = nb(root, *args)
        assert_cannot_write(res, path, "Read-only file system")


@pytest.mark.parametrize("which", ["report", "plot", "export"])
def test_a_full_disk_removes_the_temp_file(root, tmp_path, which):
    """A small tmpfs filled up: the temp file beside the output cannot get its bytes;
    it is removed and the message names the output."""
    full = tmp_path / "full"
    full.mkdir()
    _mount(["-t", "tmpfs", "-o", "size=64k", "tmpfs", str(full)])
    try:
        fd = os.open(full / "ballast", os.O_WRONLY | os.O_CREAT)
        try:  # until the disk is full
            with contextlib.suppress(OSError):
                while os.write(fd, b"\0" * 4096):
                    pass
        finally:
            os.close(fd)
        args, path = _args(which, full)
        res = nb(root, *args)
        assert_cannot_write(res, path, "No space left on device")
        assert os.listdir(full) == ["ballast"]
    finally:
        subprocess.run(["umount", "-l", str(full)], capture_output=True)
