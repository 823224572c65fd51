"""nb export -o PATH treats an existing target as cp does: devices, FIFOs and /dev/fd/N are
written in place, a symlink is followed (the link stays), a replaced file keeps its mode;
files nb makes inside a dataset folder never write through a link planted there."""

from __future__ import annotations

import io
import os
import stat
import subprocess
import sys
import threading

import polars as pl
from cli_helpers import clean_env

NB = [sys.executable, "-c", "from nbcli.app import main; main()"]


def nb_export(runs, *args, **kwargs):
    return subprocess.run([*NB, "export", "--root", str(runs), *args], env=clean_env(PYTHONDONTWRITEBYTECODE="1"),
                          capture_output=True, timeout=120, **kwargs)


def test_a_char_device_is_written_in_place_not_replaced(runs, tmp_path):
    null = tmp_path / "mynull"
    os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # our own null device
    p = nb_export(runs, "ddp-00000001", "-o", str(null), "--format", "csv")
    assert p.returncode == 0, p.stderr
    assert stat.S_ISCHR(os.lstat(null).st_mode)  # still the device, not a regular file
    assert [f.name for f in tmp_path.iterdir()] == ["mynull"]  # no temp file left


def test_a_fifo_reader_gets_the_whole_file(runs, tmp_path):
    fifo = tmp_path / "myfifo.parquet"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()), daemon=True)
    reader.start()
    p = nb_export(runs, "ddp-00000001", "-o", str(fifo))
    reader.join(60)
    assert p.returncode == 0, p.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert pl.read_parquet(io.BytesIO(got[0])).height > 0


def test_dev_fd_of_a_process_substitution(runs, tmp_path):
    # what bash's >(wc -c) passes: /dev/fd/N of a pipe inherited by nb
    r, w = os.pipe()
    p = subprocess.Popen([*NB, "export", "--root", str(runs), "ddp-00000001", "-o", f"/dev/fd/{w}", "-F", "csv"],
                         env=clean_env(PYTHONDONTWRITEBYTECODE="1"), pass_fds=(w,), stderr=subprocess.PIPE)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    assert p.wait(120) == 0, p.stderr.read()
    assert pl.read_csv(io.BytesIO(data))["tag"].len() > 0


def test_a_symlink_is_followed_and_stays(runs, tmp_path):
    real = tmp_path / "data" / "real.csv"
    real.parent.mkdir()
    real.write_text("old\n")
    link = tmp_path / "link.csv"
    link.symlink_to(real)
    p = nb_export(runs, "ddp-00000001", "-o", str(link))
    assert p.returncode == 0, p.stderr
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert pl.read_csv(real)["tag"].len() > 0
    assert sorted(f.name for f in real.parent.iterdir()) == ["real.csv"]


def test_a_dangling_symlink_creates_its_target(runs, tmp_path):
    link = tmp_path / "link.parquet"
    link.symlink_to(tmp_path / "new.parquet")
    assert nb_export(runs, "ddp-00000001", "-o", str(link)).returncode == 0
    assert link.is_symlink() and pl.read_parquet(tmp_path / "new.parquet").height > 0


def test_a_replaced_file_keeps_its_mode_and_owner(runs, tmp_path):
    out = tmp_path / "secret.csv"
    out.write_text("old\n")
    os.chmod(out, 0o600)
    if os.geteuid() == 0:
        os.chown(out, 12345, 23456)
    p = nb_export(runs, "ddp-00000001", "-o", str(out), "--tag", "train/loss")
    assert p.returncode == 0, p.stderr
    st = os.stat(out)
    assert stat.S_IMODE(st.st_mode) == 0o600
    if os.geteuid() == 0:
        assert (st.st_uid, st.st_gid) == (12345, 23456)
    assert set(pl.read_csv(out)["tag"]) == {"train/loss"}


def test_a_new_file_gets_the_umask_mode(runs, tmp_path):
    out = tmp_path / "new.csv"
    p = nb_export(runs, "ddp-00000001", "-o", str(out), preexec_fn=lambda: os.umask(0o027))
    assert p.returncode == 0, p.stderr
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o640


def test_a_link_planted_in_a_dataset_folder_is_replaced_not_followed(cli, runs, tmp_path):
    out = tmp_path / "ds"
    assert cli("export", "--root", str(runs), "-o", str(out), "--project", "vision").exit_code == 0
    part = out / "project=vision" / "run=ddp-00000001" / "rank=0" / "part-0.parquet"
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    part.unlink()
    part.symlink_to(victim)
    result = cli("export", "--root", str(runs), "-o", str(out), "--project", "vision")
    assert result.exit_code == 0, result.stderr
    assert victim.read_text() == "keep me"
    assert not part.is_symlink() and pl.read_parquet(part).height > 0


def test_a_linked_partition_folder_is_refused(cli, runs, tmp_path):
    out = tmp_path / "ds"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out.mkdir()
    (out / "project=vision").symlink_to(elsewhere)
    result = cli("export", "--root", str(runs), "-o", str(out), "--project", "vision")
    assert result.exit_code == 1
    assert "is a symlink" in result.stderr and "Traceback" not in result.stderr
    assert list(elsewhere.iterdir()) == []


def test_a_linked_dataset_folder_is_followed(cli, runs, tmp_path):
    real = tmp_path / "real-ds"
    real.mkdir()
    (tmp_path / "ds").symlink_to(real)
    result = cli("export", "--root", str(runs), "-o", str(tmp_path / "ds"), "--project", "vision")
    assert result.exit_code == 0, result.stderr
    assert (real / "project=vision" / "run=ddp-00000001" / "rank=0" / "part-0.parquet").exists()
