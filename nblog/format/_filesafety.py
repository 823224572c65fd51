"""How nb creates and replaces files: one policy, used by every writer of nblog and nb.

Three rules, written here and nowhere else (``tests/unit/test_filesafety.py`` checks that
no other module renames, replaces or creates a file exclusively by itself):

1. **Exclusive create** (:func:`create_exclusive`): a file nb makes and then appends to
   (an event log, a media pack, a console file) is created with
   ``O_CREAT | O_EXCL | O_NOFOLLOW``. It fails when anything is already under that name,
   a symbolic link too (a dangling one included), so another user of a shared folder
   cannot make nb write elsewhere by planting a link where its file will go.
2. **No link on reopening** (:func:`open_no_link`): a file nb opens again (its media pack
   of an earlier batch, a pack it checks before refusing it) is opened with
   ``O_NOFOLLOW``: a link there fails with ``ELOOP``.
3. **Atomic replace** (:func:`write_atomic`): a file nb rewrites whole (``run.json`` and
   ``run.json.bak``, envelope sidecars, provenance files, failure marks, the listing
   cache, ``nb_run_id`` beside a checkpoint, every output file of ``nb``) is written to
   a new hidden temp file in the same folder, created by rule 1, then renamed over the
   old name. A reader finds the old content or the new, never a torn file; a failed
   write (a full disk) leaves the old file as it was and removes the temp file; a
   symbolic link under the name is replaced by the new file, never written through.
   Where a rename cannot replace a file (an SFTP server without the posix-rename
   extension, which sshfs reports as ``EPERM``; some FUSE and SMB mounts), the old file
   is first moved aside (:func:`replace`): a reader may then find no file for a moment,
   never a torn one. The first time in a process this warns once.

Nothing is synced to the disk (``fsync``): a replaced file is new in the page cache, as
every file nb writes. The hidden names of temp and aside files come from
``_filenames``. Imports the standard library only.
"""

from __future__ import annotations

import errno
import os

from ._filenames import aside_file_name, temp_file_name

TYPE_CHECKING = False  # typing is not imported: `import nblog` stays light
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import BinaryIO

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC

#: errno of a rename that cannot replace an existing file: an SFTP server without the
#: posix-rename extension (sshfs answers EPERM), some FUSE and SMB mounts.
NO_REPLACE = (errno.EPERM, errno.EEXIST, errno.EACCES, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS)
_warned_rename = False


def create_exclusive(path: str, mode: int = 0o666) -> int:
    """Create ``path`` for appending and return its file descriptor (rule 1).

    The mode is filtered by the umask as usual.

    Raises:
        FileExistsError: anything is under that name already, a symbolic link included.
        OSError: the file cannot be created (``ENOENT``, ``EACCES``, ``ENOSPC``, ...).
    """
    return os.open(path, _CREATE | os.O_APPEND, mode)


def open_no_link(path: str, flags: int) -> int:
    """Open the existing ``path`` with ``flags`` (``os.O_*``), never through a symbolic
    link (rule 2); returns the file descriptor.

    Raises:
        OSError: as ``os.open``; ``ELOOP`` when ``path`` is a symbolic link.
    """
    return os.open(path, flags | _NOFOLLOW | _CLOEXEC)


def write_atomic(path: str, data: bytes | Callable[[BinaryIO], object], mode: int = 0o666) -> None:
    """Put new content at ``path`` in one step (rule 3): ``data`` (bytes), or what the
    callable ``data`` writes to the binary file object it is handed, goes to a new
    temp file beside ``path`` (created exclusively with ``mode``, filtered by the
    umask), which then replaces ``path`` (:func:`replace`).

    Raises:
        OSError: the temp file cannot be created (``FileExistsError``: something was
            planted under its name) or written, or it cannot replace ``path``; the
            temp file is removed and ``path`` is left as it was. An exception ``data``
            raises is raised after the same clean-up.
    """
    folder, name = os.path.split(path)
    tmp = os.path.join(folder, temp_file_name(name))
    fd = os.open(tmp, _CREATE, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            if callable(data):
                data(f)
            else:
                f.write(data)
        replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def replace(tmp: str, path: str) -> None:
    """Rename ``tmp`` over ``path`` (``os.replace``). Where the file system refuses to
    rename over an existing file (:data:`NO_REPLACE`), the old file is moved aside under
    a hidden name in the same folder, ``tmp`` renamed in and the old file removed; if
    that second rename fails the old file is moved back. A ``.<name>.*.old`` file is
    left only when this is interrupted (``run.json``'s is read by a resume).

    Raises:
        OSError: the rename failed otherwise, or the old file cannot be moved aside, or
            the new one cannot be put in its place.
    """
    try:
        os.replace(tmp, path)
        return
    except OSError as err:
        if err.errno not in NO_REPLACE:
            raise
        failed = err
    folder, name = os.path.split(path)
    aside_path = os.path.join(folder, aside_file_name(name))
    aside: str | None = aside_path
    try:
        os.rename(path, aside_path)
    except FileNotFoundError:
        aside = None
    try:
        os.rename(tmp, path)
    except BaseException:
        if aside is not None:
            try:
                os.rename(aside, path)
            except OSError:
                pass
        raise
    if aside is not None:
        try:
            os.unlink(aside)
        except OSError:
            pass
    _warn_rename(path, failed)


def _warn_rename(path: str, err: OSError) -> None:
    global _warned_rename
    if _warned_rename:
        return
    _warned_rename = True
    from .. import _log as log

    log.warning(
        "nblog: this file system cannot replace a file by renaming over it (%s: %s); "
        "%s is updated by moving the old file aside first, so a reader may find no "
        "file there for a moment. On sshfs, mount with -o workaround=rename.",
        type(err).__name__, err.strerror or err, path,
    )
