"""Resolve ``--kernel`` names into a cycle-model launch: program, kernel arguments, grid.

Accepted: a name registered in :mod:`zyfa.kernels.registry` (our generated kernels, Triton AOT
builds), ``aiter:NAME`` (:mod:`zyfa.kernels.aiter`), or a path to a ``.co``/``.hsaco``/``.s``
file (then the caller supplies ``kernargs``/``grid``/``workgroup_size`` or the defaults below
apply: no kernel arguments, one workgroup, the metadata's workgroup size).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from zyfa.shapes import AttnShape
from zyfa.kernels import aiter
from zyfa.gfx950.isa import Program, disassemble, load_program, parse_asm

DEFAULT_KERNEL = "zyfa-fp8"


@dataclass(frozen=True)
class Launch:
    """Everything the cycle model needs to run one kernel on one shape."""

    name: str
    program: Program
    kernargs: bytes
    grid: tuple
    workgroup_size: int
    shape: AttnShape
    origin: str = ""  # "registry", "aiter", "file"
    meta: dict = field(default_factory=dict)

    @property
    def regions(self) -> Optional[list]:
        """Schedule-cluster name per instruction (generator meta ``instruction_clusters``)."""
        clusters = self.meta.get("instruction_clusters")
        return list(clusters) if clusters is not None and len(clusters) == len(self.program) else None

    @property
    def iteration_starts(self) -> Optional[frozenset]:
        """Instruction indices that start one main-loop iteration (generator meta
        ``iteration_starts``: one per 128-key tile of a loop unrolled by two); None: count
        back-edges instead."""
        starts = self.meta.get("iteration_starts")
        return frozenset(int(i) for i in starts) if starts else None

    @property
    def branch_policy(self) -> dict:
        """pc -> steady-state direction of data-dependent branches (generator meta
        ``branch_assumptions``)."""
        return {int(b["pc"]): b["steady_state"] for b in self.meta.get("branch_assumptions", ())
                if b.get("steady_state") in ("taken", "not-taken")}

    def __post_init__(self):
        if not isinstance(self.program, Program):
            raise TypeError(f"Launch.program must be a Program, got {type(self.program).__name__}")
        if len(self.grid) != 3 or not all(isinstance(g, int) and g > 0 for g in self.grid):
            raise ValueError(f"Launch.grid must be three positive ints, got {self.grid!r}")
        if not isinstance(self.workgroup_size, int) or not 1 <= self.workgroup_size <= 1024:
            raise ValueError(f"Launch.workgroup_size must be 1..1024, got {self.workgroup_size!r}")


def list_kernels() -> list[tuple[str, str]]:
    """(name, description) of every kernel ``--kernel`` accepts here."""
    from zyfa.kernels.registry import kernels

    out = [(name, spec.description) for name, spec in sorted(kernels().items())]
    try:
        out += [(f"aiter:{stem}", "AITER gfx950 fmha v3 forward code object (amd-aiter wheel)") for stem in aiter.available()]
    except aiter.AiterUnavailable as exc:
        out.append(("aiter:NAME", f"unavailable here: {exc}"))
    out.append(("PATH.co|.hsaco|.s", "any gfx950 code object or llvm-mc assembly file"))
    return out


def default_kernel() -> tuple[str, str]:
    """(name, why): ``zyfa-fp8`` if registered, else the first registered kernel, else AITER's
    BF16 causal forward."""
    from zyfa.kernels.registry import kernels

    registered = kernels()
    if DEFAULT_KERNEL in registered:
        return DEFAULT_KERNEL, "default"
    for name in ("zyfa-fp8-exact", "aiter-like-fp8", "zyfa-bf16", "triton-fp8", "triton-bf16"):
        if name in registered:
            return name, f"{DEFAULT_KERNEL} is not registered; using {name}"
    if registered:
        name = sorted(registered)[0]
        return name, f"{DEFAULT_KERNEL} is not registered; using {name}"
    return "aiter:fwd_hd128_bf16_causal", "no kernel is registered; using AITER's BF16 causal forward"


def resolve(name: str, shape: AttnShape) -> Launch:
    """A :class:`Launch` for kernel ``name`` on ``shape``."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"kernel name must be a non-empty string, got {name!r}")
    if not isinstance(shape, AttnShape):
        raise TypeError(f"shape must be a zyfa.shapes.AttnShape, got {type(shape).__name__}")
    if name.startswith("aiter:"):
        path = aiter.resolve(name)
        aiter.check_shape(path, shape)
        program = disassemble(path)
        return Launch(name=name, program=program, kernargs=aiter.kernargs(program, path, shape),
                      grid=aiter.grid(path, shape), workgroup_size=aiter.workgroup_size(path), shape=shape,
                      origin="aiter", meta={"code_object": str(path)})
    if Path(name).suffix in (".co", ".hsaco", ".s") and Path(name).exists():
        program = load_program(name)
        if aiter.is_fmha_v3(program):  # an AITER fmha v3 forward code object given by path
            path = Path(name)
            aiter.check_shape(path, shape)
            return Launch(name=path.stem, program=program, kernargs=aiter.kernargs(program, path, shape),
                          grid=aiter.grid(path, shape), workgroup_size=aiter.workgroup_size(path), shape=shape,
                          origin="aiter", meta={"code_object": str(path.resolve())})
        wg = program.descriptor.workgroup_size or 64
        return Launch(name=Path(name).name, program=program, kernargs=bytes(program.descriptor.kernarg_size),
                      grid=(1, 1, 1), workgroup_size=wg, shape=shape, origin="file",
                      meta={"path": str(Path(name).resolve()), "note": "no kernel arguments known: zero-filled; one workgroup"})
    from zyfa.kernels.registry import get_kernel

    spec = get_kernel(name)
    return from_build(spec.build(shape), shape, spec.kernargs(shape), spec.grid(shape), spec.workgroup_size,
                      origin="registry")


def from_build(build, shape: AttnShape, kernargs: bytes, grid, workgroup_size: int, origin: str) -> Launch:
    """A :class:`Launch` of a :class:`zyfa.kernels.registry.KernelBuild` (its meta carries the
    schedule clusters, loop-iteration starts and branch directions into the simulation)."""
    if build.asm is not None:
        program = parse_asm(build.asm, kernel=build.symbol, workgroup_size=workgroup_size,
                            source=f"{origin}:{build.name}")
    elif build.code_object is not None:
        program = disassemble(build.code_object, build.symbol)
    else:
        raise ValueError(f"kernel {build.name!r}: its build has neither assembly nor a code object")
    return Launch(name=build.name, program=program, kernargs=bytes(kernargs), grid=tuple(int(g) for g in grid),
                  workgroup_size=workgroup_size, shape=shape, origin=origin, meta=dict(build.meta))


def from_config(config, shape: AttnShape, origin: str = "config") -> Launch:
    """A :class:`Launch` of any gfx950 generator :class:`KernelConfig` (sweeps, what-if)."""
    from zyfa.kernels.gfx950 import build_config, grid, kernargs
    from zyfa.kernels.gfx950.schedule import WAVES

    return from_build(build_config(config), shape, kernargs.pack(shape), grid(shape), WAVES * 64, origin)
