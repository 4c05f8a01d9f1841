"""Import a ``rocprofv3 --att`` output directory into trace schema v1 (``zyfa.trace.rocprof.att_dir``).

Layout, as written by rocprofv3's ATT tool (rocprofiler-sdk ``source/lib/att-tool``: ``wave.cpp``,
``code.cpp``, ``occupancy.cpp``, ``filenames.cpp``) and described in the rocprofiler-sdk guide
"Using thread trace" (section "rocprofv3 output files"):

    <output>/ui_output_agent_<agent>_dispatch_<dispatch>/
        filenames.json   {"gfxip": 9, "wave_filenames": {se: {simd: {slot: {id: [file, begin, end]}}}}, ...}
        code.json        {"header": "ISA, _, LineNumber, Source, Codeobj, Vaddr, Hit, ...", "code": [[...], ...]}
        occupancy.json   {"<se>": [[time, cu, simd, wave_id, start, kernel_id], ...], "dispatches": {id: name}}
        se<se>_sm<simd>_sl<slot>_wv<id>.json
                         {"name": "SE<se>", "wave": {"cu", "simd", "slot", "id", "begin", "end",
                          "instructions": [[time, category, stall, duration, line], ...], ...}}
    <output>/<name>_<gfx>_code_object_id_<id>.out   (code objects; their names carry the gfx target)

A wave instruction's ``line`` is the ``LineNumber`` column of a ``code.json`` row; rows whose ISA
starts with ``"; "`` are kernel labels (their Source column is the demangled name). ``category``
is a ``rocprofiler_thread_trace_decoder_inst_category_t``. Timing semantics: records.py.
"""

from __future__ import annotations

import bisect
import os
import re
from pathlib import Path
from typing import Any, Optional

from zyfa.trace.rocprof.records import AttInstruction, AttWave, MfmaCycles, RegionMap, annotate, wave_records
from zyfa.trace.safeio import SafeIOError, read_json
from zyfa.trace.schema import Trace, TraceMeta

DISPATCH_DIR = re.compile(r"^ui_output_agent_(\d+)_dispatch_(\d+)$")
_GFX_IN_NAME = re.compile(r"_(gfx[0-9a-f]+)_code_object_id_\d+\.out$")
REQUIRED_CODE_COLUMNS = ("ISA", "LineNumber", "Codeobj", "Vaddr")
MAX_SEARCH_DEPTH = 6       # levels below DIR searched for dispatch directories
MAX_SEARCH_DIRS = 10_000   # folders visited before giving up (DIR = / would walk the disk)


class AttFormatError(ValueError):
    """A rocprofv3 --att directory does not follow the documented layout.

    ``file`` is the offending file (or directory), ``field`` the JSON key or column at fault.
    """

    def __init__(self, file: Any, field: str, message: str):
        self.file = str(file)
        self.field = field
        super().__init__(f"{self.file}: field {field!r}: {message}")


# -- locating the dispatch directory ------------------------------------------------------------

def dispatch_dirs(path: str | Path) -> list[Path]:
    """The ``ui_output_agent_*_dispatch_*`` directories at ``path`` (itself one, or a rocprofv3 output dir)."""
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"ATT directory {path} does not exist or is not a directory")
    if DISPATCH_DIR.match(path.name):
        return [path]
    # bounded search (rocprofv3 nests them a few levels down): `import-att /` must not walk the disk
    found, visited = [], 0
    for root, dirs, _ in os.walk(path):  # symlinked folders are not followed
        depth = len(Path(root).relative_to(path).parts)
        visited += 1
        if visited > MAX_SEARCH_DIRS:
            raise ValueError(f"{path}: searched {MAX_SEARCH_DIRS} folders without finishing; pass the "
                             "ui_output_agent_<agent>_dispatch_<id> directory (or the rocprofv3 -d folder) itself")
        found += [Path(root) / d for d in dirs if DISPATCH_DIR.match(d)]
        dirs[:] = [] if depth >= MAX_SEARCH_DEPTH else [d for d in dirs if not DISPATCH_DIR.match(d)]
    return sorted(found)


def _select(path: Path, dispatch: Optional[int]) -> Path:
    found = dispatch_dirs(path)
    if dispatch is not None:
        found = [p for p in found if int(DISPATCH_DIR.match(p.name).group(2)) == dispatch]
    if not found:
        wanted = f" for dispatch {dispatch}" if dispatch is not None else ""
        raise AttFormatError(path, "ui_output_agent_*_dispatch_*",
                             f"no rocprofv3 --att dispatch directory{wanted} found (was the capture decoded? "
                             "rocprofv3 needs librocprof-trace-decoder.so to write them)")
    if len(found) > 1:
        names = ", ".join(p.name for p in found)
        raise ValueError(f"{path} holds {len(found)} traced dispatches ({names}); choose one with dispatch=N "
                         "(CLI: --dispatch N) or pass its directory")
    return found[0]


# -- JSON helpers --------------------------------------------------------------------------------

def _load(file: Path) -> Any:
    """Parsed JSON of one capture file: regular, size- and nesting-bounded (zyfa.trace.safeio)."""
    if not file.exists() and not file.is_symlink():
        raise AttFormatError(file, "<file>", "missing (a decoded rocprofv3 --att directory always has it)")
    try:
        return read_json(file, what="JSON file")
    except SafeIOError as exc:
        raise AttFormatError(file, "<file>", str(exc).removeprefix(f"{file}: ")) from None


def _confined(dispatch_dir: Path, name: str, file: Path, where: str) -> Path:
    """``dispatch_dir / name`` for a plain file name that stays inside the capture directory
    (no ``/``, ``..``, absolute path, or symlink leading out): filenames.json is data, not a path."""
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise AttFormatError(file, where, f"wave file name {name!r} is not a plain file name in {dispatch_dir}")
    target = dispatch_dir / name
    if not target.resolve().is_relative_to(dispatch_dir.resolve()):
        raise AttFormatError(file, where, f"wave file {name!r} leads outside the capture directory {dispatch_dir}")
    return target


def _key(obj: Any, key: str, file: Path, kind: type | tuple = object, where: str = "") -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise AttFormatError(file, where + key, "missing key")
    value = obj[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        name = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise AttFormatError(file, where + key, f"expected {name}, got {type(value).__name__} {value!r}")
    return value


def _int(value: Any, file: Path, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise AttFormatError(file, field, f"expected an integer, got {value!r}")
    return value


# -- code.json -----------------------------------------------------------------------------------

def read_code(file: Path) -> tuple[dict[int, tuple[str, int, int]], list[tuple[int, int, str]]]:
    """``code.json`` -> ``({line: (isa, codeobj, vaddr)}, [(codeobj, vaddr, kernel label)])``."""
    data = _load(file)
    header = _key(data, "header", file, str)
    columns = [c.strip() for c in header.split(",")]
    missing = [c for c in REQUIRED_CODE_COLUMNS if c not in columns]
    if missing:
        raise AttFormatError(file, "header", f"lacks column(s) {missing}; got {columns}")
    col = {name: columns.index(name) for name in REQUIRED_CODE_COLUMNS}
    rows = _key(data, "code", file, list)
    lines: dict[int, tuple[str, int, int]] = {}
    labels: list[tuple[int, int, str]] = []
    for i, row in enumerate(rows):
        if not isinstance(row, list) or len(row) <= max(col.values()):
            raise AttFormatError(file, f"code[{i}]", f"expected a row of >= {max(col.values()) + 1} columns, got {row!r}")
        isa = row[col["ISA"]]
        if not isinstance(isa, str):
            raise AttFormatError(file, f"code[{i}].ISA", f"expected a string, got {isa!r}")
        codeobj = _int(row[col["Codeobj"]], file, f"code[{i}].Codeobj")
        vaddr = _int(row[col["Vaddr"]], file, f"code[{i}].Vaddr")
        if isa.startswith(";"):
            labels.append((codeobj, vaddr, isa.lstrip("; ").strip()))
            continue
        line = _int(row[col["LineNumber"]], file, f"code[{i}].LineNumber")
        if line in lines:
            raise AttFormatError(file, f"code[{i}].LineNumber", f"line {line} appears twice")
        lines[line] = (isa, codeobj, vaddr)
    return lines, labels


# -- wave files ----------------------------------------------------------------------------------

def kernel_entries(labels: list[tuple[int, int, str]]) -> dict[int, list[int]]:
    """``{codeobj: sorted kernel entry vaddrs}`` from code.json's kernel label rows."""
    entries: dict[int, list[int]] = {}
    for codeobj, vaddr, _ in labels:
        entries.setdefault(codeobj, []).append(vaddr)
    return {c: sorted(set(v)) for c, v in entries.items()}


def entry_of(entries: dict[int, list[int]], codeobj: int, vaddr: int) -> Optional[int]:
    """Entry vaddr of the kernel holding ``vaddr``: the last entry at or before it (None if none)."""
    starts = entries.get(codeobj, [])
    i = bisect.bisect_right(starts, vaddr)
    return starts[i - 1] if i else None


def read_wave(file: Path, se: int, lines: dict[int, tuple[str, int, int]],
              entries: Optional[dict[int, list[int]]] = None) -> AttWave:
    """One ``se*_sm*_sl*_wv*.json`` file -> :class:`AttWave` (instructions placed through ``lines``,
    kernel entries from ``entries``, see :func:`kernel_entries`)."""
    data = _load(file)
    name = data.get("name") if isinstance(data, dict) else None
    if name is not None and name != f"SE{se}":
        raise AttFormatError(file, "name", f"says {name!r} but filenames.json lists it under shader engine {se}")
    wave = _key(data, "wave", file, dict)
    fields = {k: _int(_key(wave, k, file, int, "wave."), file, f"wave.{k}")
              for k in ("cu", "simd", "slot", "begin", "end")}
    raw = _key(wave, "instructions", file, list, "wave.")
    instructions = []
    for i, inst in enumerate(raw):
        where = f"wave.instructions[{i}]"
        if not isinstance(inst, list) or len(inst) < 5:
            raise AttFormatError(file, where, f"expected [time, category, stall, duration, line], got {inst!r}")
        time, category, stall, duration, line = (_int(v, file, where) for v in inst[:5])
        isa, codeobj, vaddr = lines.get(line, (None, None, None))
        entry = entry_of(entries or {}, codeobj, vaddr) if isa is not None else None
        try:
            instructions.append(AttInstruction(time=time, category=category, stall=stall, duration=duration,
                                               vaddr=vaddr, isa=isa, entry=entry))
        except (TypeError, ValueError) as exc:
            raise AttFormatError(file, where, str(exc)) from exc
    try:
        return AttWave(se=se, cu=fields["cu"], simd=fields["simd"], slot=fields["slot"],
                       begin=fields["begin"], end=fields["end"], instructions=tuple(instructions))
    except ValueError as exc:
        raise AttFormatError(file, "wave", str(exc)) from exc


def _wave_files(file: Path, data: Any) -> list[tuple[int, str, str]]:
    """``filenames.json`` -> ``[(se, wave file name, its key)]`` from ``wave_filenames[se][simd][slot][id]``."""
    tree = _key(data, "wave_filenames", file, dict)
    out = []
    if not isinstance(tree, dict):
        raise AttFormatError(file, "wave_filenames", "expected an object {se: {simd: {slot: {id: [file, begin, end]}}}}")
    for se, simds in tree.items():
        if not (se.isascii() and se.isdigit()) or not isinstance(simds, dict):
            raise AttFormatError(file, f"wave_filenames.{se}", "expected a shader-engine number mapping SIMDs")
        for simd, slots in simds.items():
            if not isinstance(slots or {}, dict):
                raise AttFormatError(file, f"wave_filenames.{se}.{simd}", "expected an object {slot: {id: entry}}")
            for slot, ids in (slots or {}).items():
                if not isinstance(ids or {}, dict):
                    raise AttFormatError(file, f"wave_filenames.{se}.{simd}.{slot}", "expected an object {id: entry}")
                for wid, entry in (ids or {}).items():
                    where = f"wave_filenames.{se}.{simd}.{slot}.{wid}"
                    if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str)):
                        raise AttFormatError(file, where, f"expected [file, begin, end], got {entry!r}")
                    out.append((int(se), entry[0], where))
    return out


def _kernel_name(occupancy: Any, file: Path, labels: list[tuple[int, int, str]]) -> Optional[str]:
    """occupancy.json's single named dispatch, else code.json's single kernel label, else None."""
    dispatches = occupancy.get("dispatches", {}) if isinstance(occupancy, dict) else {}
    if not isinstance(dispatches, dict):
        raise AttFormatError(file, "dispatches", f"expected an object {{id: kernel name}}, got {dispatches!r}")
    named = sorted({n for k, n in dispatches.items() if k != "0" and isinstance(n, str)})
    if len(named) == 1:
        return named[0]
    kernels = sorted({label for _, _, label in labels})
    return kernels[0] if len(kernels) == 1 else None


def _check_occupancy(occupancy: Any, file: Path) -> int:
    """Validate the per-SE event lists; returns the number of wave-start events."""
    if not isinstance(occupancy, dict):
        raise AttFormatError(file, "<file>", f"expected an object {{\"<se>\": [events], \"dispatches\": {{...}}}}, "
                                             f"got {type(occupancy).__name__}")
    starts = 0
    for se, events in occupancy.items():
        if not se.isdigit():
            continue
        if not isinstance(events, list):
            raise AttFormatError(file, se, f"expected a list of events, got {type(events).__name__}")
        for i, event in enumerate(events):
            if not isinstance(event, list) or len(event) < 6:
                raise AttFormatError(file, f"{se}[{i}]",
                                     f"expected [time, cu, simd, wave_id, start, kernel_id], got {event!r}")
            starts += bool(event[4])
    return starts


def _arch(dispatch_dir: Path, gfxip: int) -> str:
    targets = sorted({m.group(1) for p in dispatch_dir.parent.glob("*.out") if (m := _GFX_IN_NAME.search(p.name))})
    if len(targets) == 1:
        return targets[0]
    return f"gfx{gfxip}"  # family only: the code-object files that name the exact target are absent


# -- the importer --------------------------------------------------------------------------------

def import_att_dir(path: str | Path, *, dispatch: Optional[int] = None, kernel: Optional[str] = None,
                   arch: Optional[str] = None, clock_mhz: Optional[float] = None, shape: Optional[dict] = None,
                   mfma_cycles: Optional[MfmaCycles] = None, regions: Optional[RegionMap] = None,
                   provenance: Optional[dict] = None) -> Trace:
    """Read one traced dispatch of a ``rocprofv3 --att`` output and return it as a :class:`Trace`.

    Args:
        path: a ``ui_output_agent_<agent>_dispatch_<id>`` directory or a rocprofv3 output directory
            holding exactly one (else pass ``dispatch``).
        dispatch: dispatch id to pick when ``path`` holds several.
        kernel, arch: override the kernel name (default: occupancy.json's dispatch name) and the gfx
            target (default: from the ``*_code_object_id_*.out`` names beside the directory).
        clock_mhz: shader clock of the capture, if known; thread trace counts shader cycles only.
        shape: AttnShape fields of the traced problem, if known.
        mfma_cycles: matrix-pipe cycles per MFMA opcode (see records.py); None keeps issue completion.
        regions: the kernel's labels / schedule clusters (:class:`records.RegionMap`); fills
            ``region`` and ``iteration`` as the cycle model does. None leaves them null.

    Returns:
        A trace with ``source="rocprof-att"``, ``simulated=False``; ``pc`` is the byte offset of the
        instruction from its kernel's entry (code.json's label row), as in the cycle model;
        ``extra["kernel_labels"]`` keeps each kernel's [code object, entry vaddr, name].

    Raises:
        AttFormatError: a file is missing or does not follow the layout (names file and field).
        ValueError: several dispatches and none chosen.
    """
    dispatch_dir = _select(Path(path), dispatch)
    filenames_file, code_file, occ_file = (dispatch_dir / n for n in ("filenames.json", "code.json", "occupancy.json"))
    names = _load(filenames_file)
    gfxip = _int(_key(names, "gfxip", filenames_file, int), filenames_file, "gfxip")
    if gfxip != 9:
        raise AttFormatError(filenames_file, "gfxip", f"gfxip {gfxip} is not CDNA (gfx9); zyfa models gfx9 timing "
                                                      "semantics only (issue, not execution, durations)")
    lines, code_labels = read_code(code_file)
    occupancy = _load(occ_file)
    wave_starts = _check_occupancy(occupancy, occ_file)
    entries = kernel_entries(code_labels)
    waves = []
    for se, name, where in _wave_files(filenames_file, names):
        waves.append(read_wave(_confined(dispatch_dir, name, filenames_file, where), se, lines, entries))
    records, stats = wave_records(waves, mfma_cycles)
    if regions is not None:
        annotate(records, regions)
    agent, disp = (int(g) for g in DISPATCH_DIR.match(dispatch_dir.name).groups())
    meta = TraceMeta(
        kernel=kernel or _kernel_name(occupancy, occ_file, code_labels) or dispatch_dir.name,
        arch=arch or _arch(dispatch_dir, gfxip),
        source="rocprof-att",
        clock_mhz=clock_mhz,
        shape=shape,
        provenance={"imported_from": str(dispatch_dir.resolve()), "tool": "rocprofv3 --att",
                    "att_tool_version": names.get("version"), **(provenance or {})},
        simulated=False,
        extra={"agent": agent, "dispatch": disp, "waves": stats["waves"], "occupancy_wave_starts": wave_starts,
               "unmapped_records": stats["unmapped"], "mfma_end": stats["mfma_end"],
               "end": "issue completion (gfx9 thread trace times issue, not execution)",
               "pc": stats["pc"],
               "code_objects": sorted({c for _, c, _ in lines.values()}),
               "kernel_labels": [[c, v, n] for c, v, n in code_labels]},
    )
    return Trace.from_records(records, meta)
