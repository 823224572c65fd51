"""Two machines' view of one folder: a private OpenSSH server on 127.0.0.1 and two
``sshfs`` mounts of one folder, playing machines A and B (issue 13).

Tests that need the mounts are marked ``sharedfs`` and left out of a plain ``pytest``
run (deselected, with a note in the summary); ``bash scripts/test_sharedfs.sh`` runs
them (``.ci/run`` does): it installs ``openssh-server``, ``sshfs`` and ``fuse3`` when
missing and runs ``pytest -m sharedfs tests/sharedfs``. By hand, as root::

    pytest -m sharedfs tests/sharedfs

The server has its own config, host key and client key under a temp folder, takes
root key authentication only and listens on a random high port; the ``sshd`` fixture
starts it once per session and stops it at the end. ``mounts(variant_a, variant_b)``
mounts one fresh folder twice and unmounts both after the test. Variants (``VARIANTS``):

- ``default``: sshfs's caches as users get them (20 s of cached attributes and
  directory listings in sshfs, 1 s in the kernel);
- ``long``: 60 s attribute, entry and directory caches;
- ``negative``: the kernel caches a name's absence for 60 s (``negative_timeout``);
- ``norename``: an SFTP server that refuses ``posix-rename``, so a rename onto an
  existing file fails (as on some FUSE and SMB mounts).

Where the server or FUSE cannot be had, the tests are skipped with the reason and a
banner at the end of the run; ``NB_REQUIRE_SHAREDFS=1`` (set by the script once the
packages are installed) turns that into a failure.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

SFTP_SERVER = "/usr/lib/openssh/sftp-server"
VARIANTS = {
    "default": [],
    "long": ["dcache_timeout=60", "attr_timeout=60", "entry_timeout=60"],
    "negative": ["negative_timeout=60"],
    "norename": [f"sftp_server={SFTP_SERVER} -P posix-rename"],
}

_missing: list[str] = []


def pytest_configure(config):
    config.addinivalue_line("markers", "sharedfs: needs two sshfs mounts of one folder (FUSE, sshd)")


def pytest_collection_modifyitems(config, items):
    """Leave the sharedfs tests out unless ``-m`` names them (``-m sharedfs``)."""
    if "sharedfs" in (config.option.markexpr or ""):
        return
    ours = [i for i in items if i.get_closest_marker("sharedfs")]
    if ours:
        items[:] = [i for i in items if not i.get_closest_marker("sharedfs")]
        config.hook.pytest_deselected(items=ours)
        config._nb_sharedfs_deselected = len(ours)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    n = getattr(config, "_nb_sharedfs_deselected", 0)
    if n:
        terminalreporter.write_line(
            f"note: {n} shared-filesystem tests deselected; run them with "
            "`bash scripts/test_sharedfs.sh` (or `-m sharedfs`, as root)"
        )
    if _missing:
        bar = "!" * 78
        terminalreporter.write_line(bar, red=True, bold=True)
        terminalreporter.write_line("SHARED-FILESYSTEM TESTS NOT RUN (skipped):", red=True, bold=True)
        for line in _missing:
            terminalreporter.write_line(f"  {line}", red=True)
        terminalreporter.write_line(bar, red=True, bold=True)


def _unavailable(msg: str):
    if os.environ.get("NB_REQUIRE_SHAREDFS") == "1":
        pytest.fail(msg)
    if msg not in _missing:
        _missing.append(msg)
    pytest.skip(msg)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """The private sshd: ``port``, the client key, and the folder it serves from."""

    def __init__(self, base: Path):
        self.base = base
        self.port = _free_port()
        self.key = base / "client_key"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        b = self.base
        for name in ("host_key", "client_key"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(b / name)],
                           check=True, capture_output=True)
        shutil.copy(b / "client_key.pub", b / "authorized_keys")
        os.chmod(b / "authorized_keys", 0o600)
        (b / "sshd_config").write_text("\n".join([
            f"Port {self.port}",
            "ListenAddress 127.0.0.1",
            f"HostKey {b / 'host_key'}",
            f"PidFile {b / 'sshd.pid'}",
            f"AuthorizedKeysFile {b / 'authorized_keys'}",
            "AllowUsers root",
            "PermitRootLogin prohibit-password",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            "StrictModes no",
            f"Subsystem sftp {SFTP_SERVER}",
            "",
        ]))
        os.makedirs("/run/sshd", exist_ok=True)  # sshd's privilege-separation folder
        self.log = open(b / "sshd.log", "wb")
        self.proc = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", str(b / "sshd_config")],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sshd exited {self.proc.returncode}: {(b / 'sshd.log').read_text()[-500:]}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("sshd did not listen within 10 s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None:
            self.log.close()

    def mount(self, remote: Path, mountpoint: Path, variant: str) -> None:
        opts = [
            f"port={self.port}", f"IdentityFile={self.key}", "StrictHostKeyChecking=no",
            "UserKnownHostsFile=/dev/null", "BatchMode=yes", "LogLevel=ERROR", *VARIANTS[variant],
        ]
        mountpoint.mkdir(parents=True, exist_ok=True)
        res = subprocess.run(["sshfs", f"root@127.0.0.1:{remote}", str(mountpoint), "-o", ",".join(opts)],
                             capture_output=True, text=True, timeout=30)
        if res.returncode != 0:
            raise RuntimeError(f"sshfs ({variant}) failed: {res.stderr.strip()[-500:]}")


def _unmount(path: Path) -> None:
    for cmd in (["fusermount3", "-u", str(path)], ["fusermount3", "-uz", str(path)], ["umount", "-l", str(path)]):
        if subprocess.run(cmd, capture_output=True, timeout=30).returncode == 0:
            return


@pytest.fixture(scope="session")
def sshd(tmp_path_factory):
    """The private sshd for the session (skipped, with a banner, where it cannot run)."""
    if os.geteuid() != 0:
        _unavailable("not root: the private sshd and FUSE mounts need root")
    for tool in ("sshfs", "fusermount3", "ssh-keygen", "/usr/sbin/sshd", SFTP_SERVER):
        if shutil.which(tool) is None and not os.access(tool, os.X_OK):
            _unavailable(f"{tool} is not installed (apt-get install openssh-server sshfs fuse3)")
    if not os.path.exists("/dev/fuse"):
        _unavailable("/dev/fuse is missing: FUSE is not available here")
    server = Server(tmp_path_factory.mktemp("sshd"))
    try:
        server.start()
    except (OSError, RuntimeError, subprocess.SubprocessError) as err:
        server.stop()
        _unavailable(f"the private sshd did not start: {err}")
    yield server
    server.stop()


@pytest.fixture
def mounts(sshd, tmp_path):
    """``mounts(variant_a="default", variant_b="default") -> (A, B)``: two mount points
    of one fresh folder, unmounted after the test."""
    done: list[Path] = []
    share = tmp_path / "share"
    share.mkdir()

    def make(variant_a: str = "default", variant_b: str = "default") -> tuple[Path, Path]:
        out = []
        for name, variant in (("A", variant_a), ("B", variant_b)):
            point = tmp_path / f"{name}{len(done)}"
            try:
                sshd.mount(share, point, variant)
            except (OSError, RuntimeError, subprocess.SubprocessError) as err:
                _unavailable(f"cannot mount sshfs (FUSE): {err}")
            done.append(point)
            out.append(point)
        return out[0], out[1]

    yield make
    for point in reversed(done):
        _unmount(point)
