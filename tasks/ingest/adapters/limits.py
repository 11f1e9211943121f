"""Limits on what a compressed input may expand to (gzip streams, zip archives, .eval logs).

A 522 KB zip can hold a 512 MiB member of zeros; read whole, it takes a gigabyte of memory
before a single row is checked.  Every decompressing read in the adapters goes through this
module, which counts the bytes it hands out and refuses the file as soon as a limit is
crossed (the declared sizes in a zip directory are checked first, but they can lie, so the
count is what holds).  The defaults are generous for real evaluation logs and can be set
per process through environment variables:

``BENCHCERT_MAX_DECOMPRESSED_BYTES``
    total bytes one input may decompress to (default 16 GiB; a 10-million-row CSV is ~1 GiB);
``BENCHCERT_MAX_ARCHIVE_MEMBERS``
    members of one zip archive (default 100,000);
``BENCHCERT_MAX_COMPRESSION_RATIO``
    decompressed / compressed size once more than 64 MiB have come out (default 200; real
    JSON and CSV logs compress 5-30x, a bomb of zeros ~1000x);
``BENCHCERT_MAX_GZIP_MEMBERS``
    members of one gzip stream (default 1,000,000). A gzip file may be many members one after
    another (``cat a.gz b.gz``; BGZF writes one per 64 KiB), and an empty member is 20 bytes
    that decompress to nothing, so neither the byte nor the ratio limit ever sees a file of
    millions of them. The default admits a BGZF file at the byte limit (16 GiB / 64 KiB =
    262,144 members).
"""

from __future__ import annotations

import io
import os
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from benchcert.tasks.errors import DataError, UsageError

_DEFAULTS = {"max_bytes": 16 << 30, "max_members": 100_000, "max_ratio": 200.0, "max_gzip_members": 1_000_000}
_ENV = {"max_bytes": "BENCHCERT_MAX_DECOMPRESSED_BYTES", "max_members": "BENCHCERT_MAX_ARCHIVE_MEMBERS",
        "max_ratio": "BENCHCERT_MAX_COMPRESSION_RATIO", "max_gzip_members": "BENCHCERT_MAX_GZIP_MEMBERS"}
#: Below this many decompressed bytes the ratio is not judged (small, repetitive files are fine).
RATIO_FLOOR = 64 << 20


class DecompressionLimitError(DataError, ValueError):
    """An input would decompress beyond a configured limit; the file is refused.

    A :class:`~benchcert.tasks.errors.DataError`; still a ValueError, which the readers' format
    probes catch to mean "not this format" (the reader that takes the file then reports the limit).
    """


@dataclass(frozen=True)
class Limits:
    max_bytes: int
    max_members: int
    max_ratio: float
    max_gzip_members: int = _DEFAULTS["max_gzip_members"]


def current() -> Limits:
    """The limits in force, from the environment (read at every call so tests and servers can set them)."""
    values = {}
    for key, default in _DEFAULTS.items():
        raw = os.environ.get(_ENV[key])
        if raw is None or raw.strip() == "":
            values[key] = default
        else:
            values[key] = setting(_ENV[key], raw, whole=key != "max_ratio", default=default,
                                  maximum=None if key == "max_ratio" else MAX_WHOLE)
    return Limits(**values)


class LimitSettingError(UsageError, DecompressionLimitError):
    """A limit's environment variable holds no usable value: a usage error (exit 2), not the file's."""


#: The largest whole limit (bytes, members): a value past a 64-bit integer failed in the readers
#: as an OverflowError that named no variable (issue #39).
MAX_WHOLE = 1 << 62


def setting(name: str, raw: str, *, whole: bool, default, maximum: int | None = None) -> int | float:
    """The value of the limit variable ``name`` set to ``raw``: a positive whole number (bytes,
    members) of at most ``maximum``, or for a ratio any positive number (``inf``: no ratio limit).

    Raises
    ------
    LimitSettingError
        ``raw`` is no such number (``inf``, ``nan``, ``1.5``, ``-3``, ``abc``, or past ``maximum``
        for a whole one), naming the variable, the value and the allowed range.
    """
    import math

    try:
        value = float(raw)
    except (ValueError, OverflowError):
        value = math.nan
    ok = (math.isfinite(value) and value >= 1 and value.is_integer()
          and (maximum is None or value <= maximum)) if whole else value > 0
    if not ok:
        kind = ("a positive number" if not whole else "a positive whole number"
                + (f" (from 1 to {maximum:,})" if maximum is not None else ""))
        raise LimitSettingError(f"{name}={raw!r} is not {kind}; set it to one (e.g. {default}) or unset it "
                                f"for the default")
    return int(value) if whole else value


def _too_big(path, what: str, limits: Limits, out: int, compressed: int | None) -> str | None:
    if out > limits.max_bytes:
        return (f"{path}: {what} decompresses to more than {limits.max_bytes:,} bytes "
                f"(limit {_ENV['max_bytes']}); refused")
    if compressed and out > RATIO_FLOOR and out > limits.max_ratio * compressed:
        return (f"{path}: {what} decompresses more than {limits.max_ratio:g} times its compressed size "
                f"({compressed:,} bytes; limit {_ENV['max_ratio']}); refused as a likely decompression bomb")
    return None


class _Checked(io.RawIOBase):
    """A readable binary stream over ``_inner`` that a subclass checks as the bytes go by."""

    _inner = None

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        try:
            if self._inner is not None:
                self._inner.close()
        finally:
            super().close()


class LimitedReader(_Checked):
    """A binary stream that raises :class:`DecompressionLimitError` once it has yielded too much.

    ``compressed`` is the size of the compressed input, for the ratio limit.
    """

    def __init__(self, inner, path, what: str, *, compressed: int | None, limits: Limits | None = None):
        self._inner, self._path, self._what = inner, path, what
        self._compressed = compressed
        self._limits = limits or current()
        self.count = 0

    def readinto(self, b) -> int:
        data = self._inner.read(len(b))
        n = len(data)
        b[:n] = data
        self.count += n
        problem = _too_big(self._path, self._what, self._limits, self.count, self._compressed)
        if problem:
            raise DecompressionLimitError(problem)
        return n


#: The longest line a line-based reader (CSV, JSONL) takes, in bytes (``BENCHCERT_MAX_LINE_BYTES``).
LINE_ENV = "BENCHCERT_MAX_LINE_BYTES"
DEFAULT_MAX_LINE = 64 << 20
#: The longest line limit: the CSV reader's block (twice the limit) is a 32-bit size in pyarrow.
MAX_LINE = 1 << 30


def max_line_bytes() -> int:
    """The line limit in force (the environment's, read at every call, else 64 MiB).

    Raises
    ------
    LimitSettingError
        ``BENCHCERT_MAX_LINE_BYTES`` is set to something other than a positive whole number.
    """
    raw = os.environ.get(LINE_ENV)
    if raw is None or not raw.strip():
        return DEFAULT_MAX_LINE
    return setting(LINE_ENV, raw, whole=True, default=DEFAULT_MAX_LINE, maximum=MAX_LINE)


def check_settings() -> None:
    """Read every limit variable once, so a bad value is a usage error before any file is read.

    Raises
    ------
    LimitSettingError
        A limit variable that is set holds no usable value.
    """
    current()
    max_line_bytes()


class LineTooLongError(DecompressionLimitError):
    """A line longer than the line limit; the file is refused after reading at most about that much of it."""


class LineLimitedReader(_Checked):
    """A binary stream that raises :class:`LineTooLongError` once a line passes ``limit`` bytes.

    Reads are at most ``limit`` bytes, so a line inside one read is within the limit and only
    the bytes since the last newline need counting: the check costs a ``find`` per read, and
    a line is refused after at most ``limit`` bytes of it have been read (memory stays bounded
    by the limit, whatever the reader above buffers per line).
    """

    def __init__(self, inner, path, *, limit: int | None = None):
        self._inner, self._path = inner, path
        self.limit = limit or max_line_bytes()
        self._gap = 0      # bytes since the last newline
        self._lines = 0    # newlines seen

    def readinto(self, b) -> int:
        data = self._inner.read(min(len(b), self.limit))
        n = len(data)
        first = data.find(b"\n")
        if self._gap + (n if first < 0 else first) > self.limit:
            raise LineTooLongError(
                f"{self._path}: line {self._lines + 1} is longer than {self.limit:,} bytes (limit {LINE_ENV}); "
                f"refused after reading {self.limit:,} bytes of it; nothing from this file is stored")
        if first < 0:
            self._gap += n
        else:
            self._lines += data.count(b"\n")
            self._gap = n - data.rfind(b"\n") - 1
        b[:n] = data
        return n


_GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 1 << 16


class GzipMembers(io.RawIOBase):
    """A gzip stream's decompressed bytes, member by member, refusing more than ``max_members``.

    What :func:`gzip.open` reads, with the members counted: each member is inflated by its own
    zlib decompressor (gzip header, CRC-32 and length checked by zlib); zero bytes between or
    after members are skipped and anything else there is not gzip, as in the gzip module. A
    stream that ends inside a member raises EOFError, a corrupt one zlib.error or
    gzip.BadGzipFile - the errors ingest already reports per file.
    """

    def __init__(self, fh, path, *, max_members: int):
        self._fh, self._path, self._max = fh, path, max_members
        self._d = None
        self._pending = b""  # compressed bytes read but not yet given to a decompressor
        self.members = 0

    def readable(self) -> bool:
        return True

    def _next_member(self) -> bool:
        data, self._pending = self._pending, b""
        while True:
            data = data.lstrip(b"\0")
            if data:
                break
            data = self._fh.read(_CHUNK)
            if not data:
                return False
        if len(data) < 2:
            data += self._fh.read(1)
        if data[:2] != _GZIP_MAGIC:
            import gzip

            raise gzip.BadGzipFile(f"Not a gzipped file ({data[:2]!r})")
        self.members += 1
        if self.members > self._max:
            raise DecompressionLimitError(
                f"{self._path}: the gzip stream has more than {self._max:,} members (limit "
                f"{_ENV['max_gzip_members']}); refused")
        self._d = zlib.decompressobj(31)  # 16 + 15: one gzip member
        self._pending = data
        return True

    def readinto(self, b) -> int:
        if not len(b):
            return 0
        while True:
            if self._d is None and not self._next_member():
                return 0
            data = self._d.unconsumed_tail or self._pending or self._fh.read(_CHUNK)
            self._pending = b""
            out = self._d.decompress(data, len(b))  # b"" drains output zlib still holds
            if self._d.eof:
                self._pending, self._d = self._d.unused_data, None
            elif not out and not data:
                raise EOFError("Compressed file ended before the end-of-stream marker was reached")
            if out:
                b[:len(out)] = out
                return len(out)

    def close(self) -> None:
        try:
            self._fh.close()
        finally:
            super().close()


def open_gzip(path: Path) -> io.BufferedReader:
    """A gzip file's decompressed bytes, within the limits (bytes, ratio and members)."""
    lim = current()
    members = GzipMembers(open(path, "rb"), path, max_members=lim.max_gzip_members)
    raw = LimitedReader(members, path, "the gzip stream", compressed=os.path.getsize(path), limits=lim)
    return io.BufferedReader(raw, buffer_size=1 << 20)


def check_archive(z: zipfile.ZipFile, path) -> None:
    """Refuse an archive whose directory already declares too many members or too many bytes."""
    limits = current()
    infos = z.infolist()
    if len(infos) > limits.max_members:
        raise DecompressionLimitError(f"{path}: zip archive has {len(infos):,} members "
                                      f"(limit {limits.max_members:,}, {_ENV['max_members']}); refused")
    declared = sum(i.file_size for i in infos)
    compressed = os.path.getsize(path) if isinstance(path, (str, os.PathLike)) else None
    problem = _too_big(path, "the archive", limits, declared, compressed)
    if problem:
        raise DecompressionLimitError(problem + " (sizes declared in its directory)")


def read_member(z: zipfile.ZipFile, name: str | zipfile.ZipInfo, path, *, limit: int | None = None) -> bytes:
    """One member's bytes, read in chunks and refused as soon as it exceeds the limits.

    ``name``: the member's name (its last entry when the archive repeats it) or one entry's ``ZipInfo``.
    ``limit`` caps the member below the configured total (e.g. a small header).
    """
    limits = current()
    if limit is not None:
        limits = Limits(max_bytes=min(limits.max_bytes, limit), max_members=limits.max_members,
                        max_ratio=limits.max_ratio, max_gzip_members=limits.max_gzip_members)
    info = name if isinstance(name, zipfile.ZipInfo) else z.getinfo(name)
    name = info.filename
    with z.open(info) as fh:
        reader = LimitedReader(fh, path, f"member {name!r}", compressed=max(info.compress_size, 1), limits=limits)
        chunks = []
        while True:
            chunk = reader.read(1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks)
