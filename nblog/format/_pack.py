"""The media pack: ``media.r<rank>.pack``, one append-only file of blobs per rank.

Images (PNG, JPEG), audio (WAV) and histograms are stored here as blobs; the event
log references each one by offset and length (a MEDIA frame, see ``_format``), so
scalar reads never touch media bytes. Everything is little-endian. Full description:
``man 5 nb-format``.

File header (8 bytes)::

    magic   4s   b"NBMP"
    version u16  PACK_VERSION
    flags   u16  0 (reserved)

Blob frame (20-byte header, then ``length`` payload bytes)::

    magic   3s   b"NBB"
    type    u8   BLOB_* below
    length  u64  payload length in bytes
    crc     u32  zlib.crc32 of the payload
    hcrc    u32  zlib.crc32 of the first 16 header bytes

A reference's offset is the offset of the *payload* (the header sits just before it),
so a blob can be cut out of the pack with ``dd`` alone. The blob is written before the
event-log frame that references it: a blob torn by ``kill -9`` is never referenced.
The session that creates ``media.r<rank>.pack`` is its only writer. A later session
never appends to a pack another session wrote (on a shared file system that session
may run on another machine, whose cached size of the file can be short: the offsets
it recorded would be wrong): it creates ``media.r<rank>.s<session>.pack``, exclusively,
as event logs are created. A record of session *s* is in ``media.r<rank>.s<s>.pack``
when that file exists, else in ``media.r<rank>.pack`` (so is every record of a run
written before this rule). A torn blob left by a killed session stays in its pack as
unreferenced bytes. Readers reach blobs only through references and verify both
checksums.

This module imports only the standard library.
"""

from __future__ import annotations

import os
import stat
import struct
import zlib

from .._errors import BlobError
from ._filesafety import create_exclusive, open_no_link

TYPE_CHECKING = False  # typing is not imported: `import nblog` stays light
if TYPE_CHECKING:
    from typing import BinaryIO

PACK_VERSION = 1
PACK_MAGIC = b"NBMP"
PACK_HEADER = struct.Struct("<4sHH")
BLOB_MAGIC = b"NBB"
BLOB_HEADER = struct.Struct("<3sBQII")
BLOB_HEADER_SIZE = BLOB_HEADER.size  # 20

# Blob types.
BLOB_PNG = 1  # a PNG file
BLOB_JPEG = 2  # a JPEG file (encoded bytes passed through)
BLOB_WAV = 3  # a WAV file, 16-bit PCM
BLOB_HISTOGRAM = 4  # bins+1 edges as <f8, then bins counts as <i8 (length = 16*bins + 8)
BLOB_NAMES = {BLOB_PNG: "png", BLOB_JPEG: "jpeg", BLOB_WAV: "wav", BLOB_HISTOGRAM: "histogram"}


def pack_header() -> bytes:
    """The 8 bytes that open every media pack."""
    return PACK_HEADER.pack(PACK_MAGIC, PACK_VERSION, 0)


def blob_header(kind: int, payload: bytes | bytearray | memoryview) -> bytes:
    """The 20-byte header that precedes ``payload`` in the pack."""
    head = struct.pack("<3sBQ", BLOB_MAGIC, kind, len(payload)) + struct.pack(
        "<I", zlib.crc32(payload)
    )
    return head + struct.pack("<I", zlib.crc32(head))


class PackError(OSError):
    """The pack cannot be appended to (not a pack, a newer version, not a file)."""


class PackWriter:
    """Appends blobs to one rank's pack. Used by the writer thread only.

    The file is created with ``O_CREAT | O_EXCL | O_NOFOLLOW`` by the session's first
    blob: ``path``, or ``session_path`` when ``path`` exists already (another session's
    pack, never appended to). Only when both exist (a session's own pack torn by
    ``kill -9``, or ``session_path`` None) is the existing file opened (never through a
    symbolic link) after checking its header. The file is opened once per batch of
    blobs and closed after it, so no descriptor outlives a drain (nothing to leak at exit or into a fork).
    A failed write is cut back with ``ftruncate``: the file stays a clean prefix.
    """

    def __init__(self, path: str, session_path: str | None = None):
        self.path = path
        self._session_path = session_path
        self._checked = False

    def open(self) -> _Batch:
        """Open the pack for one batch of appends.

        Raises:
            OSError: the file cannot be created or opened; ``PackError`` when the file
                is not a media pack this version may append to.
        """
        if not self._checked:
            fd = None
            for path in (self.path, self._session_path):
                if path is None:
                    break
                self.path = path
                try:
                    fd = create_exclusive(path)
                    break
                except FileExistsError:
                    if os.path.islink(path) or path == self._session_path:
                        break  # opened below (a link is refused there: O_NOFOLLOW)
                    if self._session_path is not None:
                        _check_foreign(path)  # someone else's file is refused, not worked around
            if fd is not None:
                batch = _Batch(fd, 0)
                try:
                    batch.raw(pack_header())
                except OSError:
                    batch.close()
                    raise
                self._checked = True
                return batch
        fd = open_no_link(self.path, os.O_RDWR | os.O_APPEND)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise PackError(f"{self.path} is not a regular file")
            size = st.st_size
            if not self._checked:
                head = os.pread(fd, PACK_HEADER.size, 0)
                if len(head) < PACK_HEADER.size and pack_header().startswith(head):
                    os.ftruncate(fd, 0)  # a header torn by kill -9: start the file again
                    size = 0
                    os.write(fd, pack_header())
                    size = PACK_HEADER.size
                else:
                    _check_head(self.path, head)
                self._checked = True
        except BaseException:
            os.close(fd)
            raise
        return _Batch(fd, size)


def _check_head(path: str, head: bytes) -> None:
    """Raise ``PackError`` unless ``head`` opens a media pack this version writes."""
    magic, version, _flags = PACK_HEADER.unpack(head[: PACK_HEADER.size].ljust(8, b"\0"))
    if magic != PACK_MAGIC:
        raise PackError(f"{path} is not an nb media pack")
    if version > PACK_VERSION:
        raise PackError(f"{path} is a version {version} media pack; this nblog writes version {PACK_VERSION}")


def _check_foreign(path: str) -> None:
    """Raise ``PackError`` when the existing ``path`` is not a regular file, or not a
    media pack this version writes (a header torn by ``kill -9`` is a pack). Opened
    read-only and non-blocking: never written, and a FIFO there never blocks."""
    fd = open_no_link(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise PackError(f"{path} is not a regular file")
        head = os.pread(fd, PACK_HEADER.size, 0)
    finally:
        os.close(fd)
    if len(head) < PACK_HEADER.size and pack_header().startswith(head):
        return
    _check_head(path, head)


class _Batch:
    """An open pack: ``append`` blobs, then ``close``."""

    __slots__ = ("fd", "size")

    def __init__(self, fd: int, size: int):
        self.fd = fd
        self.size = size

    def raw(self, data: bytes) -> None:
        view = memoryview(data)
        try:
            while view:
                n = os.write(self.fd, view)
                view = view[n:]
        except OSError:
            try:  # cut the partial write: the pack stays a clean prefix
                os.ftruncate(self.fd, self.size)
            except OSError:
                pass
            raise
        self.size += len(data)

    def append(self, kind: int, payload: bytes) -> int:
        """Append one blob; return the offset of its payload. Raises OSError (cut back)."""
        offset = self.size + BLOB_HEADER_SIZE
        self.raw(blob_header(kind, payload) + payload)
        return offset

    def close(self) -> None:
        try:
            os.close(self.fd)
        except OSError:
            pass

    def __enter__(self) -> _Batch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_blob(f: BinaryIO, offset: int, length: int, path: str = "media pack") -> tuple[int, bytes]:
    """Read and verify the blob whose payload is at ``offset`` in the open pack ``f``.

    Returns ``(blob type, payload)``.

    Raises:
        BlobError: the header or the payload does not match the reference, or fails
            its checksum.
    """
    start = offset - BLOB_HEADER_SIZE
    if start < PACK_HEADER.size or length < 0:
        raise BlobError(f"{path}: no blob can start at offset {offset}", path, offset)
    size = f.seek(0, os.SEEK_END)  # never read (nor allocate) what a reference declares past the end
    if start + BLOB_HEADER_SIZE + length > size:
        raise BlobError(f"{path}: the blob at offset {offset} is missing or torn (the pack has {size} bytes, "
                        f"the reference {length})", path, offset)
    f.seek(start)
    head = f.read(BLOB_HEADER_SIZE)
    if len(head) < BLOB_HEADER_SIZE:
        raise BlobError(f"{path}: the blob at offset {offset} is missing (file too short)", path, offset)
    magic, kind, n, crc, hcrc = BLOB_HEADER.unpack(head)
    if magic != BLOB_MAGIC or zlib.crc32(head[:16]) != hcrc:
        raise BlobError(f"{path}: the blob header at offset {start} is corrupt", path, offset)
    if n != length:
        raise BlobError(f"{path}: the blob at offset {offset} has {n} bytes, the reference says {length}", path, offset)
    payload = f.read(length)
    if len(payload) < length:
        raise BlobError(f"{path}: the blob at offset {offset} is torn ({len(payload)} of {length} bytes)", path, offset)
    if zlib.crc32(payload) != crc:
        raise BlobError(f"{path}: the blob at offset {offset} fails its checksum", path, offset)
    return kind, payload
