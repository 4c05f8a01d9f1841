"""Safe file I/O for every reader and writer of traces, reports and sweep results.

Readers: regular files only (a FIFO, device or directory is refused before it is opened, so
nothing blocks or reads forever), size-bounded, and JSON nesting-bounded. Writers: a temporary
file in the target folder renamed over the target (a crash leaves the old file or the new one,
never half of one), and :func:`check_output` refuses an input of the same command, an existing
file unless ``force``, and a path outside the folder a caller confines it to.

Every failure is a :class:`SafeIOError` (an ``OSError``) whose message starts with the path.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional

MAX_JSON_BYTES = 64 * 2**20        # metadata sidecars, sweep specs and rocprof JSON are far smaller
MAX_JSON_DEPTH = 64                # nesting of JSON containers; none of ours nests beyond ~6
MAX_TRACE_BYTES = 16 * 2**30       # one Parquet trace

_UMASK = os.umask(0)
os.umask(_UMASK)                   # read once at import: new files get the usual 0o666 & ~umask


class SafeIOError(OSError):
    """A file was refused (not regular, too large, too deep, an input, exists, outside its folder)."""

    def __init__(self, path: Any, message: str):
        self.path = str(path)
        super().__init__(f"{self.path}: {message}")

    def __str__(self) -> str:
        return self.args[0]


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def check_regular(path: str | Path, limit: int = MAX_TRACE_BYTES, what: str = "file") -> int:
    """Size of ``path`` after checking it is a regular file (symlinks followed) of at most ``limit``
    bytes; ``stat`` does not open it, so a FIFO cannot block here."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise SafeIOError(path, f"no such {what}") from None
    except OSError as exc:
        raise SafeIOError(path, f"cannot read {what}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise SafeIOError(path, f"{_kind(st.st_mode)}, not a regular {what}")
    if st.st_size > limit:
        raise SafeIOError(path, f"{st.st_size} bytes is over the {limit}-byte limit for a {what}")
    return st.st_size


def read_bytes(path: str | Path, limit: int, what: str = "file") -> bytes:
    """Contents of the regular file ``path``, at most ``limit`` bytes (else SafeIOError).

    Opened non-blocking and re-checked on the descriptor, so a path swapped for a FIFO after the
    check still cannot block, and reads stop at ``limit + 1`` bytes whatever the file claims."""
    check_regular(path, limit, what)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise SafeIOError(path, f"cannot open {what}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SafeIOError(path, f"not a regular {what}")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise SafeIOError(path, f"more than the {limit}-byte limit for a {what}")
    return data


def _depth(value: Any) -> int:
    """Nesting depth of a parsed JSON value, iteratively (no recursion to exhaust)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth)
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


def loads_json(text: str | bytes, source: Any, max_depth: int = MAX_JSON_DEPTH, what: str = "JSON") -> Any:
    """``json.loads`` whose failures (syntax, not UTF-8, nesting) are one SafeIOError naming ``source``."""
    try:
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        value = json.loads(text)
    except UnicodeDecodeError as exc:
        raise SafeIOError(source, f"{what} is not UTF-8 (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise SafeIOError(source, f"unreadable or truncated {what}: {exc}") from None
    except RecursionError:
        raise SafeIOError(source, f"{what} nested too deeply (limit {max_depth} levels)") from None
    if _depth(value) > max_depth:
        raise SafeIOError(source, f"{what} nested too deeply (limit {max_depth} levels)")
    return value


def read_json(path: str | Path, limit: int = MAX_JSON_BYTES, max_depth: int = MAX_JSON_DEPTH,
              what: str = "JSON file") -> Any:
    """Parsed JSON of a regular file of at most ``limit`` bytes and ``max_depth`` nesting levels."""
    return loads_json(read_bytes(path, limit, what), path, max_depth, what)


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return a.resolve() == b.resolve()


def check_output(path: str | Path, *, force: bool = False, inputs: Iterable[str | Path] = (),
                 within: Optional[str | Path] = None, flag: str = "--force") -> Path:
    """Refuses ``path`` as an output when it is one of ``inputs`` (always), lies outside ``within``
    (when given), is an existing non-regular file, or exists and ``force`` is false."""
    path = Path(path)
    for source in inputs:
        if _same_file(path, Path(source)):
            raise SafeIOError(path, f"is an input of this command; refusing to overwrite it (choose another output)")
    if within is not None:
        root = Path(within).resolve()
        if not path.resolve().is_relative_to(root):
            raise SafeIOError(path, f"is outside {within}; refusing to write there")
    if os.path.lexists(path):
        if path.is_dir() or (path.exists() and not path.is_file()):
            raise SafeIOError(path, "exists and is not a regular file")
        if not force:
            raise SafeIOError(path, f"exists; pass {flag} to overwrite it")
    return path


def check_folder(path: str | Path, flag: str = "folder") -> Path:
    """``path`` as an output folder: an existing directory, or nothing yet (created on write)."""
    path = Path(path)
    if os.path.lexists(path) and not path.is_dir():
        raise SafeIOError(path, f"{flag}: exists and is not a directory")
    return path


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yields a temporary path in ``path``'s folder; on success it is renamed over ``path``
    (atomic on POSIX), on any exception removed. The folder is created if missing."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp's 0o600 would make every output private
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def write_text(path: str | Path, text: str) -> Path:
    """Atomically writes ``text`` (UTF-8) to ``path``; returns ``path``."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)
