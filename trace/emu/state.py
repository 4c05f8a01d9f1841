"""Machine state the emulator reads and writes: global memory, LDS, one wave's registers.

``Memory`` backs device addresses with one growing numpy byte array (allocations are 256-byte
aligned and separated by a guard gap, so a stray access raises instead of reading a neighbour).
``Wave`` holds 64-lane VGPRs/AGPRs as uint32 rows, SGPRs, EXEC/VCC/SCC/M0 and the program counter.
"""

from __future__ import annotations

import numpy as np

from zyfa.trace.emu.errors import EmulationError

LANES = 64
LANE = np.arange(LANES)
_GUARD = 4096

# SGPR file indices of the named scalar registers (gfx9 encoding)
VCC = 106
M0 = 124
EXEC = 126
NUM_SGPRS = 128
AGPR_BASE = 256  # AGPR a[i] is row AGPR_BASE + i of Wave.v


class Memory:
    """Global memory: device addresses [BASE, BASE + size) backed by a numpy byte array."""

    BASE = 0x1_0000_0000

    def __init__(self) -> None:
        self.data = np.zeros(0, dtype=np.uint8)

    def alloc(self, nbytes: int, align: int = 256) -> int:
        if nbytes < 0:
            raise ValueError(f"nbytes must be >= 0, got {nbytes}")
        start = -(-(len(self.data) + _GUARD) // align) * align
        self.data = np.concatenate([self.data, np.zeros(start + nbytes - len(self.data), np.uint8)])
        return self.BASE + start

    def place(self, addr: int, nbytes: int) -> None:
        """Make [addr, addr + nbytes) valid (for kernels that expect fixed addresses)."""
        if addr < self.BASE:
            raise ValueError(f"addr must be >= {self.BASE:#x}, got {addr:#x}")
        end = addr - self.BASE + nbytes
        if end > len(self.data):
            self.data = np.concatenate([self.data, np.zeros(end - len(self.data), np.uint8)])

    def write(self, addr: int, array: np.ndarray) -> None:
        raw = np.ascontiguousarray(array).view(np.uint8).reshape(-1)
        off = self._check_range(addr, len(raw))
        self.data[off: off + len(raw)] = raw

    def put(self, array: np.ndarray, tail: int = 0) -> int:
        """Allocate and copy a host array, followed by ``tail`` zero bytes; returns its device
        address."""
        raw = np.ascontiguousarray(array).view(np.uint8).reshape(-1)
        addr = self.alloc(len(raw) + tail)
        self.data[addr - self.BASE: addr - self.BASE + len(raw)] = raw
        return addr

    def get(self, addr: int, nbytes: int) -> np.ndarray:
        off = self._check_range(addr, nbytes)
        return self.data[off: off + nbytes].copy()

    def _check_range(self, addr: int, nbytes: int) -> int:
        off = addr - self.BASE
        if off < 0 or off + nbytes > len(self.data):
            raise EmulationError(f"global access [{addr:#x}, +{nbytes}) outside allocated memory")
        return off

    def _offsets(self, addrs: np.ndarray, nbytes: int) -> np.ndarray:
        off = addrs.astype(np.int64) - self.BASE
        if off.size and (off.min() < 0 or off.max() + nbytes > len(self.data)):
            bad = addrs[(off < 0) | (off + nbytes > len(self.data))][0]
            raise EmulationError(f"global access at {int(bad):#x} (+{nbytes} bytes) outside "
                                 "allocated memory")
        return off

    def gather(self, addrs: np.ndarray, nbytes: int) -> np.ndarray:
        """Bytes at each address: (len(addrs), nbytes) uint8."""
        off = self._offsets(addrs, nbytes)
        return self.data[off[:, None] + np.arange(nbytes)]

    def scatter(self, addrs: np.ndarray, values: np.ndarray) -> None:
        off = self._offsets(addrs, values.shape[1])
        self.data[off[:, None] + np.arange(values.shape[1])] = values


class Lds:
    """Workgroup local data share with a bank-conflict counter (64 banks of 4 bytes)."""

    BANKS = 64

    def __init__(self, nbytes: int) -> None:
        self.data = np.zeros(nbytes, dtype=np.uint8)

    def _offsets(self, addrs: np.ndarray, nbytes: int) -> np.ndarray:
        off = addrs.astype(np.int64)
        if off.size and (off.min() < 0 or off.max() + nbytes > len(self.data)):
            raise EmulationError(f"LDS access at {int(off.max())} (+{nbytes} bytes) outside the "
                                 f"{len(self.data)}-byte LDS allocation")
        return off

    def gather(self, addrs: np.ndarray, nbytes: int) -> np.ndarray:
        off = self._offsets(addrs, nbytes)
        return self.data[off[:, None] + np.arange(nbytes)]

    def scatter(self, addrs: np.ndarray, values: np.ndarray) -> None:
        off = self._offsets(addrs, values.shape[1])
        self.data[off[:, None] + np.arange(values.shape[1])] = values

    @classmethod
    def conflict_cycles(cls, addrs: np.ndarray, nbytes: int) -> int:
        """Extra LDS cycles of one access beyond the conflict-free minimum.

        Model (not hardware-measured): the active lanes are served in phases of
        ``64 banks * 4 bytes / nbytes`` lanes in lane order; a phase takes as many cycles as the
        largest number of *distinct* dwords that fall in one bank (equal dwords broadcast).
        The result is the sum over phases of (cycles - 1).
        """
        if addrs.size == 0:
            return 0
        per_phase = max(1, cls.BANKS * 4 // max(nbytes, 4))
        ndw = max(1, nbytes // 4)
        dwords = (addrs.astype(np.int64)[:, None] // 4 + np.arange(ndw)).reshape(-1)
        phase = np.repeat(np.arange(len(addrs)) // per_phase, ndw)
        distinct = np.unique(phase * (1 << 40) + dwords)
        phase, dwords = distinct >> 40, distinct & ((1 << 40) - 1)
        nphase = int(phase.max()) + 1
        counts = np.bincount(phase * cls.BANKS + dwords % cls.BANKS,
                             minlength=nphase * cls.BANKS).reshape(nphase, cls.BANKS)
        return int((counts.max(axis=1) - 1).clip(min=0).sum())


def mask_to_int(mask: np.ndarray) -> int:
    return int.from_bytes(np.packbits(mask.astype(bool), bitorder="little").tobytes(), "little")


_MASK_CACHE: dict[int, np.ndarray] = {}


def int_to_mask(value: int) -> np.ndarray:
    mask = _MASK_CACHE.get(value)
    if mask is None:
        raw = np.frombuffer(int(value & (2**64 - 1)).to_bytes(8, "little"), dtype=np.uint8)
        mask = np.unpackbits(raw, bitorder="little").astype(bool)
        mask.flags.writeable = False
        if len(_MASK_CACHE) < 4096:
            _MASK_CACHE[value] = mask
    return mask


class Wave:
    """Registers of one wave64."""

    def __init__(self, wave_id: int, num_vgprs: int = 512) -> None:
        self.wave_id = wave_id
        self.s = [0] * NUM_SGPRS
        self.v = np.zeros((num_vgprs, LANES), dtype=np.uint32)
        self.scc = 0
        self.pc = 0
        self.done = False
        self.at_barrier = False
        self.executed = 0
        # outstanding vector-memory operations in issue order; an entry is a function that
        # finishes the operation (LDS DMA writes) or None (already complete)
        self.vm_queue: list = []

    def wait_vm(self, remaining: int) -> None:
        """``s_waitcnt vmcnt(remaining)``: complete the oldest operations until at most
        ``remaining`` are outstanding."""
        while len(self.vm_queue) > remaining:
            finish = self.vm_queue.pop(0)
            if finish is not None:
                finish()

    @property
    def exec(self) -> int:
        return self.s[EXEC] | (self.s[EXEC + 1] << 32)

    @exec.setter
    def exec(self, value: int) -> None:
        self.s[EXEC] = value & 0xFFFFFFFF
        self.s[EXEC + 1] = (value >> 32) & 0xFFFFFFFF

    @property
    def exec_mask(self) -> np.ndarray:
        return int_to_mask(self.exec)

    def get_s64(self, index: int) -> int:
        return self.s[index] | (self.s[index + 1] << 32)

    def set_s64(self, index: int, value: int) -> None:
        self.s[index] = value & 0xFFFFFFFF
        self.s[index + 1] = (value >> 32) & 0xFFFFFFFF
