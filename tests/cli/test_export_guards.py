"""nb export guards: never writing into a run being exported, cleaning up its temp file
on SIGTERM/SIGHUP, a closed stdout pipe, root-export error messages, an unknown project."""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from cli_helpers import clean_env

CODE = "from nbcli.app import main; main()"
RUN = "big-00000001"


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """A root with one run of 3,000,000 scalar points (NDJSON export takes seconds) and a
    small one in another project, written by nblog in a real process."""
    root = tmp_path_factory.mktemp("guards")
    script = textwrap.dedent(f"""
        import nblog
        run = nblog.init("big", root={str(root)!r}, run_id={RUN!r}, system=False, console=False)
        for step in range(100_000):
            run.add_scalar({{f"m{{k}}": step * 0.5 + k for k in range(30)}}, step=step)
            if step % 5000 == 4999:
                run.flush()
        run.finish()
        run = nblog.init("small", root={str(root)!r}, run_id="small-00000001", system=False, console=False)
        run.add_scalar("x", 1.0, step=0)
        run.finish()
    """)
    subprocess.run([sys.executable, "-c", script], check=True, env=clean_env(), timeout=600)
    return root


def nb(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CODE, *args], capture_output=True, text=True, env=clean_env(),
                          timeout=300, **kwargs)


def snapshot(folder) -> dict[str, bytes]:
    return {p: open(p, "rb").read() for p in sorted(glob.glob(os.path.join(folder, "**"), recursive=True))
            if os.path.isfile(p)}


@pytest.mark.parametrize("target", ["events.r0.s0.log", "run.json", "new.csv", "sub/x.csv"])
def test_an_output_inside_the_run_folder_is_refused(big, target):
    folder = big / "small" / "small-00000001"
    before = snapshot(folder)
    res = nb("export", "small-00000001", "--root", str(big), "-o", str(folder / target), "-F", "csv")
    assert res.returncode == 2 and "inside the run folder" in res.stderr and "Traceback" not in res.stderr
    assert snapshot(folder) == before


def test_a_symlink_into_the_run_folder_is_refused(big, tmp_path):
    folder = big / "small" / "small-00000001"
    before = snapshot(folder)
    (tmp_path / "link").symlink_to(folder)
    res = nb("export", "small-00000001", "--root", str(big), "-o", str(tmp_path / "link" / "run.json"), "-F", "csv")
    assert res.returncode == 2 and "inside the run folder" in res.stderr
    (tmp_path / "file.csv").symlink_to(folder / "events.r0.s0.log")
    res = nb("export", "small-00000001", "--root", str(big), "-o", str(tmp_path / "file.csv"))
    assert res.returncode == 2 and "inside the run folder" in res.stderr
    assert snapshot(folder) == before


@pytest.mark.parametrize("where", ["run", "inside-run", "root", "project"])
def test_a_root_export_into_the_root_or_a_run_is_refused(big, where):
    out = {"run": big / "small" / "small-00000001", "inside-run": big / "small" / "small-00000001" / "ds",
           "root": big, "project": big / "small"}[where]
    before = snapshot(big)
    res = nb("export", "--root", str(big), "-p", "small", "-o", str(out))
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert ("inside the run folder" if "run" in where else "project folders") in res.stderr
    assert snapshot(big) == before


def _wait_for_temp(folder, proc) -> None:
    """Until the export's temp file exists under ``folder`` (the writing has begun)."""
    deadline = time.monotonic() + 120
    while not glob.glob(os.path.join(folder, "**", ".*.tmp"), recursive=True):
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline
        time.sleep(0.01)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_while_writing_removes_the_temp_file(big, tmp_path, sig):
    out = tmp_path / "all.ndjson"
    proc = subprocess.Popen([sys.executable, "-c", CODE, "export", RUN, "--root", str(big), "-o", str(out)],
                            stderr=subprocess.PIPE, text=True, env=clean_env())
    try:
        _wait_for_temp(tmp_path, proc)
        proc.send_signal(sig)
        assert proc.wait(timeout=120) == 128 + sig
    finally:
        proc.kill()
    assert os.listdir(tmp_path) == []
    assert "Traceback" not in proc.stderr.read()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_during_a_root_export_removes_the_temp_file(big, tmp_path, sig):
    out = tmp_path / "ds"
    proc = subprocess.Popen([sys.executable, "-c", CODE, "export", "--root", str(big), "-p", "big", "-o", str(out)],
                            stderr=subprocess.PIPE, text=True, env=clean_env())
    try:
        _wait_for_temp(out, proc)
        proc.send_signal(sig)
        assert proc.wait(timeout=120) == 128 + sig
    finally:
        proc.kill()
    assert [f for _, _, files in os.walk(out) for f in files] == []
    assert "Traceback" not in proc.stderr.read()


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_a_closed_stdout_pipe_ends_quietly(big, fmt):
    proc = subprocess.Popen([sys.executable, "-c", CODE, "export", RUN, "--root", str(big), "-o", "-", "-F", fmt],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=clean_env())
    head = proc.stdout.read(8)
    proc.stdout.close()  # as `| head -c 8` does
    assert proc.wait(timeout=120) == 1  # as `nb ls | head`
    assert len(head) == 8 and proc.stderr.read() == b""


def test_root_export_errors_name_the_path(big, tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    res = nb("export", "--root", str(big), "-p", "small", "-o", str(afile / "ds"))
    assert res.returncode == 1 and "cannot write" in res.stderr and "Not a directory" in res.stderr
    assert "[Errno" not in res.stderr
    res = nb("export", "--root", str(big), "-p", "small", "-o", str(afile))
    assert res.returncode == 2 and "is not a folder" in res.stderr and "[Errno" not in res.stderr


def test_an_unknown_project_is_an_error(big, tmp_path):
    res = nb("export", "--root", str(big), "-p", "nosuch", "-o", str(tmp_path / "ds"))
    assert res.returncode == 1 and "no runs of project 'nosuch'" in res.stderr
    assert "projects there: big, small" in res.stderr and "wrote 0 rows" not in res.stderr
