"""The one file-safety policy (``nblog/format/_filesafety.py``): exclusive create, no
link on reopening, atomic replace with the fallback for file systems whose rename cannot
replace a file; and no other module of nblog or nbcli renames, replaces or creates a file
exclusively by itself (an ``ast`` scan of their source)."""

from __future__ import annotations

import ast
import errno
import logging
import os
from pathlib import Path

import pytest

from nblog.format import _filesafety as S
from nblog.format._filenames import is_aside_of, is_temp_of

ROOT = Path(__file__).resolve().parents[2]
HOME = ROOT / "nblog" / "format" / "_filesafety.py"
SECRET = b"someone else's file: never written through a link\n"


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    path = tmp_path / "victim.txt"
    path.write_bytes(SECRET)
    return path


@pytest.fixture(autouse=True)
def _fresh_warning(monkeypatch):
    monkeypatch.setattr(S, "_warned_rename", False)


def leftovers(folder: Path, name: str) -> list[str]:
    return [n for n in os.listdir(folder) if is_temp_of(n, name) or is_aside_of(n, name)]


# -- exclusive create --------------------------------------------------------------------------


def test_create_exclusive_makes_a_new_file_for_appending(tmp_path: Path) -> None:
    path = tmp_path / "events.r0.s0.log"
    fd = S.create_exclusive(str(path))
    try:
        os.write(fd, b"ab")
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, b"cd")  # O_APPEND: to the end whatever the offset
    finally:
        os.close(fd)
    assert path.read_bytes() == b"abcd"


def test_create_exclusive_refuses_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "media.r0.pack"
    path.write_bytes(b"kept")
    with pytest.raises(FileExistsError):
        S.create_exclusive(str(path))
    assert path.read_bytes() == b"kept"


@pytest.mark.parametrize("dangling", [False, True])
def test_create_exclusive_refuses_a_link(tmp_path: Path, victim: Path, dangling: bool) -> None:
    link = tmp_path / "console.r0.s0.log"
    link.symlink_to(tmp_path / "nowhere" if dangling else victim)
    with pytest.raises(FileExistsError):
        S.create_exclusive(str(link))
    assert victim.read_bytes() == SECRET and not (tmp_path / "nowhere").exists()


def test_open_no_link_opens_a_file_and_refuses_a_link(tmp_path: Path, victim: Path) -> None:
    path = tmp_path / "media.r0.pack"
    path.write_bytes(b"NBMP")
    fd = S.open_no_link(str(path), os.O_RDWR | os.O_APPEND)
    try:
        os.write(fd, b"+")
    finally:
        os.close(fd)
    assert path.read_bytes() == b"NBMP+"
    link = tmp_path / "media.r1.pack"
    link.symlink_to(victim)
    with pytest.raises(OSError) as info:
        S.open_no_link(str(link), os.O_RDWR | os.O_APPEND)
    assert info.value.errno == errno.ELOOP and victim.read_bytes() == SECRET


# -- atomic replace ------------------------------------------------------------------------------


@pytest.mark.parametrize("as_callable", [False, True])
def test_write_atomic_creates_and_replaces(tmp_path: Path, as_callable: bool) -> None:
    path = tmp_path / "run.json"
    for content in (b"first\n", b"second, longer\n", b"3\n"):
        S.write_atomic(str(path), (lambda f, c=content: f.write(c)) if as_callable else content)
        assert path.read_bytes() == content
    assert leftovers(tmp_path, "run.json") == []


def test_write_atomic_honours_mode_and_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        S.write_atomic(str(tmp_path / "a"), b"x")
        S.write_atomic(str(tmp_path / "b"), b"x", mode=0o600)
    finally:
        os.umask(old)
    assert (tmp_path / "a").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "b").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("error", [OSError(errno.ENOSPC, "No space left on device"), KeyboardInterrupt()])
def test_a_failed_write_leaves_the_old_file_whole_and_no_temp(tmp_path: Path, error: BaseException) -> None:
    """Half the new content is written, then the disk is full (or the user presses ^C):
    the old file is there as it was, never torn, and the temp file is gone."""
    path = tmp_path / "run.json"
    path.write_bytes(b'{"status": "running"}\n')

    def half(f):
        f.write(b'{"status": "fin')
        f.flush()
        raise error

    with pytest.raises(type(error)):
        S.write_atomic(str(path), half)
    assert path.read_bytes() == b'{"status": "running"}\n'
    assert leftovers(tmp_path, "run.json") == []


def test_write_atomic_replaces_a_link_and_never_writes_through_it(tmp_path: Path, victim: Path) -> None:
    path = tmp_path / "run.json"
    path.symlink_to(victim)
    S.write_atomic(str(path), b"new\n")
    assert victim.read_bytes() == SECRET
    assert not path.is_symlink() and path.read_bytes() == b"new\n"


def test_a_link_planted_under_the_temp_name_is_refused(tmp_path: Path, victim: Path, monkeypatch) -> None:
    path = tmp_path / "run.json"
    path.write_bytes(b"old\n")
    monkeypatch.setattr(os, "urandom", lambda n: b"\xab" * n)  # a temp name someone guessed
    (tmp_path / f".run.json.{os.getpid()}.{'ab' * 4}.tmp").symlink_to(victim)
    with pytest.raises(FileExistsError):
        S.write_atomic(str(path), b"new\n")
    assert victim.read_bytes() == SECRET and path.read_bytes() == b"old\n"


# -- where a rename cannot replace a file ----------------------------------------------------------


def refusing_replace(monkeypatch, code: int) -> list[tuple[str, str]]:
    """``os.replace`` fails as on an SFTP server without posix-rename (sshfs: EPERM) when
    its target exists; ``os.rename`` onto a missing name still works, as there."""
    calls: list[tuple[str, str]] = []
    real = os.replace

    def replace(src, dst, *a, **kw):
        calls.append((os.path.basename(src), os.path.basename(dst)))
        if os.path.lexists(dst):
            raise OSError(code, os.strerror(code), dst)
        return real(src, dst, *a, **kw)

    monkeypatch.setattr(os, "replace", replace)
    return calls


@pytest.mark.parametrize("code", sorted(set(S.NO_REPLACE)), ids=errno.errorcode.get)
def test_the_fallback_moves_the_old_file_aside(tmp_path: Path, monkeypatch, caplog, code: int) -> None:
    caplog.set_level(logging.WARNING, logger="nblog")
    path = tmp_path / "envelope.r0.s0.bin"
    path.write_bytes(b"old")
    calls = refusing_replace(monkeypatch, code)
    S.write_atomic(str(path), b"new")
    S.write_atomic(str(path), b"newer")
    assert calls and path.read_bytes() == b"newer"
    assert leftovers(tmp_path, path.name) == []
    warnings = [r.getMessage() for r in caplog.records if "cannot replace a file by renaming" in r.getMessage()]
    assert len(warnings) == 1 and "workaround=rename" in warnings[0]  # once per process


def test_the_fallback_never_follows_a_link(tmp_path: Path, victim: Path, monkeypatch) -> None:
    path = tmp_path / "run.json"
    path.symlink_to(victim)
    refusing_replace(monkeypatch, errno.EPERM)
    S.write_atomic(str(path), b"new\n")
    assert victim.read_bytes() == SECRET
    assert not path.is_symlink() and path.read_bytes() == b"new\n"


def test_the_fallback_puts_the_old_file_back_when_the_new_one_cannot_go_in(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "run.json"
    path.write_bytes(b"old\n")
    refusing_replace(monkeypatch, errno.EPERM)
    real = os.rename

    def rename(src, dst, *a, **kw):
        if is_temp_of(os.path.basename(src), "run.json"):
            raise OSError(errno.EIO, "Input/output error", src)
        return real(src, dst, *a, **kw)

    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(OSError) as info:
        S.write_atomic(str(path), b"new\n")
    assert info.value.errno == errno.EIO
    assert path.read_bytes() == b"old\n" and leftovers(tmp_path, "run.json") == []


def test_another_rename_error_is_raised_and_changes_nothing(tmp_path: Path, monkeypatch, caplog) -> None:
    path = tmp_path / "run.json"
    path.write_bytes(b"old\n")
    refusing_replace(monkeypatch, errno.EIO)
    with pytest.raises(OSError) as info:
        S.write_atomic(str(path), b"new\n")
    assert info.value.errno == errno.EIO
    assert path.read_bytes() == b"old\n" and leftovers(tmp_path, "run.json") == []
    assert "renaming" not in caplog.text


# -- nobody else does it by hand ---------------------------------------------------------------------

#: calls and flags that rename, replace or create a file exclusively
_BY_HAND = {"replace", "rename", "renames", "move", "mkstemp", "mktemp", "NamedTemporaryFile", "O_EXCL",
            "O_NOFOLLOW"}
_OWNERS = {"os", "shutil", "tempfile"}


def by_hand(source: str) -> list[tuple[int, str]]:
    """``(line, what)`` of each ``os.replace``/``os.rename``/``shutil.move``/``tempfile``
    temp file, and each ``O_EXCL``/``O_NOFOLLOW`` flag (also spelled as a string for
    ``getattr``) in ``source``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in _BY_HAND and isinstance(node.value, ast.Name) \
                and node.value.id in _OWNERS:
            out.append((node.lineno, f"{node.value.id}.{node.attr}"))
        elif isinstance(node, ast.ImportFrom) and node.module in _OWNERS:
            out += [(node.lineno, f"{node.module}.{a.name}") for a in node.names if a.name in _BY_HAND]
        elif isinstance(node, ast.Constant) and node.value in ("O_EXCL", "O_NOFOLLOW"):
            out.append((node.lineno, str(node.value)))
    return sorted(out)


def test_the_scan_finds_a_writer_of_its_own() -> None:
    src = ("import os, tempfile\nfrom os import replace\n"
           "def f(tmp, path):\n    fd, t = tempfile.mkstemp()\n    os.replace(t, path)\n"
           "    os.open(path, os.O_CREAT | os.O_EXCL | getattr(os, 'O_NOFOLLOW', 0))\n"
           "    'a.b'.replace('.', '/')\n    path.rename('x')\n")
    assert by_hand(src) == [(2, "os.replace"), (4, "tempfile.mkstemp"), (5, "os.replace"), (6, "O_NOFOLLOW"),
                            (6, "os.O_EXCL")]


def test_no_other_module_renames_or_creates_exclusively_by_itself() -> None:
    found = []
    for pkg in ("nblog", "nbcli"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if path != HOME:
                found += [f"{path.relative_to(ROOT)}:{line}: {what}" for line, what in by_hand(path.read_text())]
    assert found == []
    assert by_hand(HOME.read_text())  # the scan sees the policy's own
