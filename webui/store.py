"""Server-side trace store of the schedule explorer: what may be opened, and the cache.

Safety rules (the page is a local tool but still a web server):
- A file is opened only when its real path (symlinks resolved) lies under one of the trace
  directories given on the command line, or is one of the trace files named there. Anything
  else, including ``..`` escapes and absolute paths elsewhere, raises :class:`UnsafePathError`.
- Only ``.parquet`` traces are opened (their ``.json`` sidecar is read by ``Trace.load``).
- Uploads are decoded in memory, size-checked, written to a private temporary directory and
  validated by ``Trace.load``; anything malformed raises :class:`UploadError` with a message.
- Only regular files are read: a FIFO, a device, a directory named ``*.parquet`` or a dangling
  symlink is skipped (and listed in :attr:`TraceStore.skipped`), never opened, so it cannot block.
- Messages and ids name traces relative to their trace directory (or by file name), never by
  absolute path, so a refusal does not reveal where the server's files live.
The page refers to traces by opaque ids (``file:<relative name>``, ``upload:N``, ``sim:N``); every
id coming back from the browser is checked again here.
"""

from __future__ import annotations

import base64
import binascii
import os
import stat
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from zyfa.trace.schema import Trace, TraceError

MAX_UPLOAD_BYTES = 256 * 1024 * 1024
MAX_LISTED = 500  # traces listed per directory


class UnsafePathError(ValueError):
    """A path outside the trace directories/files the server was started with."""


class UploadError(ValueError):
    """An uploaded file that is not a valid trace."""


def regular_file_problem(path: Path) -> Optional[str]:
    """Why ``path`` cannot be read as a trace file without risk (None if it is a regular file).

    ``os.stat`` follows symlinks and never opens the file, so a FIFO is detected without blocking.
    """
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "dangling symlink" if os.path.islink(path) else "does not exist"
    except OSError as exc:
        return f"cannot stat: {exc.strerror}"
    if stat.S_ISDIR(mode):
        return "is a directory, not a trace file"
    if not stat.S_ISREG(mode):
        return "not a regular file (FIFO, socket or device)"
    return None


@dataclass(frozen=True)
class Entry:
    """A trace the page can show: ``id`` (opaque, sent to the browser) and a ``label``."""

    id: str
    label: str


class TraceStore:
    """Traces the page may show, loaded once and cached.

    Args:
        trace_dirs: directories whose ``*.parquet`` traces (recursively) may be opened.
        trace_files: individual trace files that may be opened.
        max_upload_bytes: largest accepted upload (sum of its files).
    """

    def __init__(self, trace_dirs: Sequence[str | Path] = (), trace_files: Sequence[str | Path] = (),
                 max_upload_bytes: int = MAX_UPLOAD_BYTES):
        self.trace_dirs: tuple[Path, ...] = tuple(self._real_dir(d) for d in trace_dirs)
        self.trace_files: tuple[Path, ...] = tuple(self._real_file(f) for f in trace_files)
        if isinstance(max_upload_bytes, bool) or not isinstance(max_upload_bytes, int) or max_upload_bytes <= 0:
            raise ValueError(f"max_upload_bytes must be a positive int, got {max_upload_bytes!r}")
        self.max_upload_bytes = max_upload_bytes
        self._lock = threading.Lock()
        self._cache: dict[str, Trace] = {}
        self._labels: dict[str, str] = {}
        self._counter = 0
        self._upload_dir: Optional[tempfile.TemporaryDirectory] = None
        self._paths: dict[str, Path] = {}  # file id -> real path, for files listed or opened
        self._skipped: dict[str, str] = {}

    # -- configuration checks ----------------------------------------------------------------
    @staticmethod
    def _real_dir(d: str | Path) -> Path:
        if not isinstance(d, (str, Path)):
            raise TypeError(f"trace_dirs entries must be paths, got {type(d).__name__}")
        path = Path(d).expanduser().resolve()
        if not path.is_dir():
            raise ValueError(f"trace directory {str(d)!r} does not exist or is not a directory")
        return path

    @staticmethod
    def _real_file(f: str | Path) -> Path:
        if not isinstance(f, (str, Path)):
            raise TypeError(f"trace_files entries must be paths, got {type(f).__name__}")
        path = Path(f).expanduser()
        if path.suffix == "" and path.with_name(path.name + ".parquet").exists():
            path = path.with_name(path.name + ".parquet")
        path = path.resolve()
        if path.suffix != ".parquet":
            raise ValueError(f"trace file {str(f)!r} must be a .parquet trace (with its .json sidecar)")
        if not path.is_file():
            raise ValueError(f"trace file {str(f)!r} does not exist")
        return path

    # -- path safety -------------------------------------------------------------------------
    def resolve(self, name: str) -> Path:
        """The real path of trace ``name`` if the server may open it, else :class:`UnsafePathError`.

        ``name`` is absolute, relative to one of the trace directories (tried in order), or the
        plain file name of a named trace file.
        """
        if not isinstance(name, str) or not name.strip():
            raise UnsafePathError(f"trace path must be a non-empty string, got {name!r}")
        if "\x00" in name:
            raise UnsafePathError("trace path contains a NUL byte")
        given = Path(name.strip())
        if given.is_absolute():
            candidates = [given]
        else:  # under a trace directory, or the plain file name of a named trace file
            candidates = [d / given for d in self.trace_dirs] + [f for f in self.trace_files if str(given) == f.name]
        for candidate in candidates:
            real = candidate.resolve()
            if real.suffix != ".parquet":
                continue
            allowed = real in self.trace_files or any(real.is_relative_to(d) for d in self.trace_dirs)
            if not allowed or regular_file_problem(real) is not None:
                continue
            sidecar = real.with_suffix(".json")
            if os.path.lexists(sidecar) and regular_file_problem(sidecar) is not None:
                raise UnsafePathError(f"refused {self.display_name(real)!r}: its sidecar {sidecar.name!r} is not a "
                                      f"regular file")
            return real
        raise UnsafePathError(f"refused {name!r}: only .parquet traces under the trace directories or the named "
                              "trace files given at start-up may be opened")

    def display_name(self, real: Path) -> str:
        """``real`` relative to its trace directory, or its file name: never the absolute path."""
        for d in self.trace_dirs:
            if real.is_relative_to(d):
                return str(real.relative_to(d))
        return real.name

    # -- listing and loading -----------------------------------------------------------------
    def entries(self) -> list[Entry]:
        """Every trace the page may show: named files, files under the directories, uploads, simulations.

        Files that are not regular files, or failed to load, are left out and listed in :attr:`skipped`.
        """
        files: list[tuple[str, Path]] = [(f.name, f) for f in self.trace_files]
        for d in self.trace_dirs:
            for i, f in enumerate(sorted(d.rglob("*.parquet"))):
                if i >= MAX_LISTED:
                    break
                name = str(f.relative_to(d))
                problem = regular_file_problem(f)
                if problem is not None:
                    self._skip(name, problem)
                    continue
                real = f.resolve()
                if real.is_relative_to(d):
                    files.append((name, real))
        out, seen = [], set()
        with self._lock:
            for name, real in files:
                if real in seen or name in self._skipped:
                    continue
                seen.add(real)
                out.append(Entry(self._file_id(name, real), name))
            out += [Entry(k, v) for k, v in self._labels.items()]
        return out

    def _skip(self, name: str, why: str) -> None:
        with self._lock:
            self._skipped[name] = why

    @property
    def skipped(self) -> dict[str, str]:
        """Traces left out of :meth:`entries`: relative name -> why (unreadable, not a regular file ...)."""
        with self._lock:
            return dict(self._skipped)

    def load_all(self) -> dict[str, str]:
        """Load every listed trace once; those that fail are skipped from now on. Returns :attr:`skipped`."""
        for entry in self.entries():
            try:
                self.get(entry.id)
            except (TraceError, UnsafePathError, OSError) as exc:
                self._skip(entry.label, _reason(exc))
        return self.skipped

    def get(self, trace_id: str) -> Trace:
        """The trace behind an id from :meth:`entries` (loaded on first use, then cached).

        Raises :class:`UnsafePathError` for a file id outside the allowed paths, ``KeyError`` for
        an unknown id and :class:`zyfa.trace.schema.TraceError` for an invalid file.
        """
        if not isinstance(trace_id, str):
            raise TypeError(f"trace id must be a string, got {type(trace_id).__name__}")
        with self._lock:
            if trace_id in self._cache:
                return self._cache[trace_id]
            known = self._paths.get(trace_id)
        if not trace_id.startswith("file:"):
            raise KeyError(f"unknown trace id {trace_id!r}")
        path = self.resolve(trace_id[len("file:"):]) if known is None else known
        if known is not None and regular_file_problem(path) is not None:  # replaced since it was listed
            path = self.resolve(trace_id[len("file:"):])
        try:
            trace = Trace.load(path)
        except TraceError as exc:  # name the file relative to its directory, not by absolute path
            raise TraceError(self.display_name(path), exc.field, _reason(exc)) from None
        with self._lock:
            self._cache[trace_id] = trace
            self._paths[trace_id] = path
        return trace

    def open_path(self, name: str) -> str:
        """Check ``name`` (see :meth:`resolve`), load it and return its id."""
        real = self.resolve(name)
        with self._lock:
            trace_id = self._file_id(self.display_name(real), real)
        self.get(trace_id)
        return trace_id

    def _file_id(self, name: str, real: Path) -> str:
        """The id of file ``real`` shown as ``name`` (``#k`` added when two directories share a name).
        Call with the lock held."""
        trace_id, k = f"file:{name}", 1
        while self._paths.get(trace_id, real) != real:
            k += 1
            trace_id = f"file:{name}#{k}"
        self._paths[trace_id] = real
        return trace_id

    def add(self, trace: Trace, label: str, kind: str = "sim") -> str:
        """Keep an in-memory trace (a simulation or an upload); returns its id."""
        if not isinstance(trace, Trace):
            raise TypeError(f"add: trace must be a Trace, got {type(trace).__name__}")
        if kind not in ("sim", "upload"):
            raise ValueError(f"add: kind must be 'sim' or 'upload', got {kind!r}")
        with self._lock:
            self._counter += 1
            trace_id = f"{kind}:{self._counter}"
            self._cache[trace_id] = trace
            self._labels[trace_id] = label
        return trace_id

    def label(self, trace_id: str) -> str:
        with self._lock:
            if trace_id in self._labels:
                return self._labels[trace_id]
        return trace_id.split(":", 1)[-1]

    # -- uploads -----------------------------------------------------------------------------
    def add_upload(self, filenames: Sequence[str], contents: Sequence[str]) -> str:
        """Validate an upload (``dcc.Upload`` data URLs) of one ``.parquet`` and optionally its ``.json``.

        Returns the new trace id; raises :class:`UploadError` naming what is wrong.
        """
        if isinstance(filenames, str):
            filenames, contents = [filenames], [contents]
        if not filenames or len(filenames) != len(contents or []):
            raise UploadError("upload: expected one .parquet trace (and optionally its .json sidecar)")
        files: dict[str, bytes] = {}
        total = 0
        for name, content in zip(filenames, contents):
            base = os.path.basename(str(name))
            if base != name or base in ("", ".", ".."):
                raise UploadError(f"upload: file name {name!r} must be a plain name without directories")
            suffix = Path(base).suffix
            if suffix not in (".parquet", ".json"):
                raise UploadError(f"upload: {base!r} is neither a .parquet trace nor its .json sidecar")
            if suffix in files:
                raise UploadError(f"upload: more than one {suffix} file; upload one trace at a time")
            if not isinstance(content, str) or "," not in content:
                raise UploadError(f"upload: {base!r}: content is not a data URL")
            try:
                data = base64.b64decode(content.split(",", 1)[1], validate=True)
            except (binascii.Error, ValueError) as exc:
                raise UploadError(f"upload: {base!r}: content is not valid base64 ({exc})") from exc
            total += len(data)
            if total > self.max_upload_bytes:
                raise UploadError(f"upload: larger than the {self.max_upload_bytes} byte limit")
            files[suffix] = data
            files[suffix + ":name"] = base.encode()
        if ".parquet" not in files:
            raise UploadError("upload: no .parquet trace among the files")
        with self._lock:
            if self._upload_dir is None:
                self._upload_dir = tempfile.TemporaryDirectory(prefix="zyfa-ui-uploads-")
            self._counter += 1
            folder = Path(self._upload_dir.name) / str(self._counter)
        folder.mkdir()
        (folder / "trace.parquet").write_bytes(files[".parquet"])
        if ".json" in files:
            (folder / "trace.json").write_bytes(files[".json"])
        try:
            trace = Trace.load(folder / "trace.parquet")
        except TraceError as exc:
            name = files[".parquet:name"].decode()
            detail = str(exc).split(": ", 1)[-1]
            raise UploadError(f"upload: {name!r} is not a valid zyfa trace: {detail}") from exc
        return self.add(trace, f"upload: {files['.parquet:name'].decode()}", kind="upload")


def _reason(exc: Exception) -> str:
    """The message of a trace error without its file name (the caller names the file its own way)."""
    if isinstance(exc, TraceError):
        head = f"{exc.file}: field {exc.field!r}: "
        text = str(exc)
        return text[len(head):] if text.startswith(head) else text
    if isinstance(exc, OSError):
        return exc.strerror or type(exc).__name__
    return str(exc)
