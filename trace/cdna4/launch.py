"""A kernel launch as the cycle model runs it: the parsed program, kernel arguments, grid.

Kernel resolution (names, ``aiter:NAME``, paths, generator configurations) is
:func:`zyfa.kernels.registry.resolve`; it hands over a
:class:`~zyfa.kernels.spec.LaunchDescription`, which :func:`from_description` parses into the
model's :class:`Launch` (:func:`prepare` does both).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from zyfa.gfx950.isa import Program, load_program, parse_asm
from zyfa.kernels import gfx950, registry
from zyfa.kernels.spec import LaunchDescription
from zyfa.shapes import AttnShape


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
        """Schedule-cluster name per instruction: the tags the program's instructions carry
        (attached from the generator's ``instruction_clusters`` by :func:`from_description`)."""
        return self.program.clusters

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

    def rescale_rates(self, rate: float) -> dict:
        """pc -> ``rate`` for each lazy O rescale branch (``.L_rescale*``) the build meta states
        (``branch_assumptions``), as :class:`~zyfa.trace.cdna4.estimate.EstimateConfig`'s
        ``branch_policy`` takes it; empty for a kernel without one (AITER's)."""
        return {int(b["pc"]): rate for b in gfx950.rescale_branches(self.meta.get("branch_assumptions", ()))}

    def __post_init__(self):
        if not isinstance(self.program, Program):
            raise TypeError(f"Launch.program must be a Program, got {type(self.program).__name__}")
        if len(self.grid) != 3 or not all(isinstance(g, int) and g > 0 for g in self.grid):
            raise ValueError(f"Launch.grid must be three positive ints, got {self.grid!r}")
        if not isinstance(self.workgroup_size, int) or not 1 <= self.workgroup_size <= 1024:
            raise ValueError(f"Launch.workgroup_size must be 1..1024, got {self.workgroup_size!r}")


def from_description(desc: LaunchDescription) -> Launch:
    """The model's :class:`Launch` of a resolved kernel (its build meta carries the schedule
    clusters, loop-iteration starts and branch directions into the simulation)."""
    if not isinstance(desc, LaunchDescription):
        raise TypeError(f"expected a zyfa.kernels.spec.LaunchDescription, got {type(desc).__name__}")
    build = desc.build
    if build.asm is not None:
        program = parse_asm(build.asm, kernel=build.symbol, workgroup_size=desc.workgroup_size,
                            source=f"{desc.origin}:{build.name}", sizes=build.meta.get("instruction_sizes"))
    elif build.code_object is not None:
        program = load_program(build.code_object, build.symbol)
    else:
        raise ValueError(f"kernel {build.name!r}: its build has neither assembly nor a code object")
    if build.meta.get("instruction_clusters") is not None:
        program = program.with_clusters(build.meta["instruction_clusters"])
    return Launch(name=desc.name, program=program, kernargs=bytes(desc.kernargs), grid=tuple(desc.grid),
                  workgroup_size=desc.workgroup_size, shape=desc.shape, origin=desc.origin, meta=dict(build.meta))


def prepare(kernel, shape: AttnShape, overrides=None) -> Launch:
    """:func:`zyfa.kernels.registry.resolve` then :func:`from_description`."""
    return from_description(registry.resolve(kernel, shape, overrides))
