"""Launch a kernel on host arrays: lay out kernel arguments, copy arrays in and out."""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from zyfa.trace.emu.asm import AsmKernel, parse_asm
from zyfa.trace.emu.errors import EmulationError
from zyfa.trace.emu.machine import Launch, Program, Stats, run_kernel
from zyfa.trace.emu.state import Memory

_PROGRAMS: dict[int, Program] = {}


def program_for(asm: str | AsmKernel) -> Program:
    """Compile (and cache by text) a kernel's instruction functions."""
    key = hash(asm) if isinstance(asm, str) else id(asm)
    if key not in _PROGRAMS:
        _PROGRAMS[key] = Program(parse_asm(asm, check=True) if isinstance(asm, str) else asm)
    return _PROGRAMS[key]


@dataclass
class LaunchResult:
    """Arrays after the run (same order as the array arguments) and the emulator's counters."""

    arrays: list
    stats: Stats


def pack_kernargs(kernel: AsmKernel, values: list, memory: Memory) -> tuple[bytes, list]:
    """Kernel-argument bytes from ``values`` in metadata order.

    numpy arrays become device buffers (pointer arguments); Python ints fill integer arguments
    (4 bytes) and pointer slots (8 bytes, e.g. 0 for Triton's scratch pointers); floats fill
    4-byte arguments as fp32. Missing trailing arguments are zero.
    """
    if not kernel.args:
        raise EmulationError(f"kernel {kernel.name!r} has no .amdgpu_metadata argument list")
    if len(values) > len(kernel.args):
        raise ValueError(f"values has {len(values)} entries, kernel {kernel.name!r} takes "
                         f"{len(kernel.args)} arguments")
    size = kernel.desc("kernarg_size", max(a.offset + a.size for a in kernel.args))
    buf = bytearray(max(size, max(a.offset + a.size for a in kernel.args)))
    placed = []
    for arg, value in zip(kernel.args, values):
        if isinstance(value, np.ndarray):
            if arg.size != 8:
                raise ValueError(f"argument at offset {arg.offset} is {arg.size} bytes; an array "
                                 "needs a pointer argument")
            addr = memory.put(value)
            placed.append((value, addr))
            struct.pack_into("<Q", buf, arg.offset, addr)
        elif isinstance(value, (float, np.floating)):
            struct.pack_into("<f", buf, arg.offset, float(value))
        elif isinstance(value, (int, np.integer)):
            fmt = {4: "<I", 8: "<Q", 2: "<H", 1: "<B"}[arg.size]
            struct.pack_into(fmt, buf, arg.offset, int(value) & ((1 << (8 * arg.size)) - 1))
        else:
            raise TypeError(f"argument values must be numpy arrays, ints or floats, got "
                            f"{type(value).__name__}")
    return bytes(buf), placed


def launch(asm: str | AsmKernel, grid, block, values: list, workgroups=None) -> LaunchResult:
    """Run a kernel on host data and return copies of every array argument after the run."""
    program = program_for(asm)
    memory = Memory()
    kernargs, placed = pack_kernargs(program.kernel, values, memory)
    stats = run_kernel(program, Launch(tuple(grid), tuple(block)), kernargs, memory, workgroups)
    out = [memory.get(addr, value.nbytes).view(value.dtype).reshape(value.shape)
           for value, addr in placed]
    return LaunchResult(out, stats)
