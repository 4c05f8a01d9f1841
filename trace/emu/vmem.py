"""Vector memory (global/flat/buffer) and LDS (ds_*) semantics against numpy-backed memory.

Loads and stores complete at issue: the emulator computes values, not timing, so
``s_waitcnt`` is a no-op and a race-free program sees the same values as on hardware. Inactive
lanes neither load nor store. Buffer instructions apply raw-buffer range checking (stride 0):
a lane whose ``voffset + inst_offset + bytes`` exceeds ``num_records`` loads 0 and stores
nothing (what Triton's masked buffer accesses rely on).
"""

from __future__ import annotations

import re

import numpy as np

from zyfa.trace.emu.errors import EmulationError
from zyfa.trace.emu.operands import parse_operand, read_u32, read_u64, scalar_u32
from zyfa.trace.emu.state import LANES, M0, Lds

# suffix -> (bytes, how the loaded value lands in the destination)
_WIDTH = {"dword": (4, "u32"), "dwordx2": (8, "u32"), "dwordx3": (12, "u32"),
          "dwordx4": (16, "u32"), "ubyte": (1, "zext"), "sbyte": (1, "sext"),
          "ushort": (2, "zext"), "sshort": (2, "sext"), "short_d16": (2, "d16lo"),
          "short_d16_hi": (2, "d16hi"), "ubyte_d16": (1, "d16lo"), "ubyte_d16_hi": (1, "d16hi"),
          "sbyte_d16": (1, "d16lo_s"), "sbyte_d16_hi": (1, "d16hi_s"),
          "byte": (1, "u32"), "byte_d16_hi": (1, "hi"), "short": (2, "u32"),
          "short_d16_hi_store": (2, "hi")}
_DS_WIDTH = {"b32": (4, "u32"), "b64": (8, "u32"), "b96": (12, "u32"), "b128": (16, "u32"),
             "u8": (1, "zext"), "i8": (1, "sext"), "u16": (2, "zext"), "i16": (2, "sext"),
             "b8": (1, "u32"), "b16": (2, "u32"), "u16_d16": (2, "d16lo"),
             "u16_d16_hi": (2, "d16hi"), "u8_d16": (1, "d16lo"), "u8_d16_hi": (1, "d16hi"),
             "b8_d16_hi": (1, "hi"), "b16_d16_hi": (2, "hi")}


def _land(w, dst, raw: np.ndarray, mode: str, mask: np.ndarray) -> None:
    """Write loaded bytes (lanes, nbytes) into the destination VGPR(s)."""
    nbytes = raw.shape[1]
    if mode == "u32":
        words = raw.reshape(LANES, -1).copy().view(np.uint32)
        for i in range(words.shape[1]):
            np.copyto(w.v[dst.index + i], words[:, i], where=mask)
        return
    value = raw[:, 0].astype(np.uint32) if nbytes == 1 else raw.copy().view(np.uint16)[:, 0] \
        .astype(np.uint32)
    bits = 8 * nbytes
    if mode in ("sext", "d16lo_s", "d16hi_s"):
        value = ((value ^ (1 << (bits - 1))) - (1 << (bits - 1))).astype(np.uint32)
        value &= np.uint32(0xFFFFFFFF if mode == "sext" else 0xFFFF)
    old = w.v[dst.index]
    if mode.startswith("d16lo"):
        value = (old & np.uint32(0xFFFF0000)) | (value & np.uint32(0xFFFF))
    elif mode.startswith("d16hi"):
        value = (old & np.uint32(0xFFFF)) | (value << np.uint32(16))
    np.copyto(w.v[dst.index], value, where=mask)


def _store_bytes(w, data_op, nbytes: int, mode: str) -> np.ndarray:
    """Bytes to store per lane: (lanes, nbytes) uint8."""
    ndw = max(1, nbytes // 4)
    words = np.stack([read_u32(w, data_op, i) for i in range(ndw)], axis=1)
    if mode == "hi":
        words = words >> np.uint32(16)
    return np.ascontiguousarray(words).view(np.uint8).reshape(LANES, -1)[:, :nbytes]


def compile_vmem(inst):
    op = inst.opcode
    m = re.match(r"^(global|flat|buffer)_(load|store)_(\w+?)(_lds)?$", op)
    if m:
        space, kind, width = m.group(1), m.group(2), m.group(3)
        if kind == "store" and width == "short_d16_hi":
            width = "short_d16_hi_store"
        if space == "global" and kind == "load" and width.startswith("lds_") and width[4:] in _WIDTH:
            return _global_to_lds(inst, _WIDTH[width[4:]][0])
        if width not in _WIDTH:
            raise EmulationError(f"unsupported memory width {width!r} in {inst.text}")
        nbytes, mode = _WIDTH[width]
        if space == "buffer" and inst.mod("lds") is not None:
            return _buffer(inst, kind, nbytes, mode)
        fn = _buffer(inst, kind, nbytes, mode) if space == "buffer" else \
            _global(inst, space, kind, nbytes, mode)

        def counted(w, g):  # completes at issue; still one outstanding op for vmcnt order
            fn(w, g)
            w.vm_queue.append(None)
        return counted
    if op.startswith("ds_"):
        return _compile_ds(inst)
    return None


def _global(inst, space, kind, nbytes, mode):
    ops = [parse_operand(o) for o in inst.operands]
    offset = int(inst.mod("offset", "0"), 0)
    if kind == "load":
        dst, addr = ops[0], ops[1]
        saddr = ops[2] if len(ops) > 2 else parse_operand("off")
    else:
        addr, data = ops[0], ops[1]
        saddr = ops[2] if len(ops) > 2 else parse_operand("off")

    def address(w):
        if saddr.kind == "off":
            return read_u64(w, addr) + np.uint64(offset & (2**64 - 1))
        base = np.uint64(w.get_s64(saddr.index))
        return base + read_u32(w, addr).astype(np.uint64) + np.uint64(offset)

    if kind == "load":
        def run(w, g):
            mask = w.exec_mask
            if not mask.any():
                return None
            a = address(w)
            raw = np.zeros((LANES, nbytes), np.uint8)
            raw[mask] = g.memory.gather(a[mask], nbytes)
            _land(w, dst, raw, mode, mask)
            return None
    else:
        def run(w, g):
            mask = w.exec_mask
            if mask.any():
                g.memory.scatter(address(w)[mask], _store_bytes(w, data, nbytes, mode)[mask])
            return None
    return run


def _buffer(inst, kind, nbytes, mode):
    ops = [parse_operand(o) for o in inst.operands]
    if inst.mod("lds") is not None:
        return _buffer_to_lds(inst, ops, nbytes)
    vdata, vaddr, srsrc, soffset = ops[:4]
    offset = int(inst.mod("offset", "0"), 0)
    offen = inst.mod("offen") is not None
    idxen = inst.mod("idxen") is not None

    return _buffer_access(inst, kind, nbytes, mode, vdata, vaddr, srsrc, soffset, offset, offen,
                          idxen)


def _buffer_address(w, vaddr, srsrc, soffset, offset, offen, idxen, nbytes):
    """Per-lane byte address and raw-buffer range check of a MUBUF access."""
    s = w.s[srsrc.index: srsrc.index + 4]
    base = s[0] | ((s[1] & 0xFFFF) << 32)
    stride = (s[1] >> 16) & 0x3FFF
    num_records = s[2]
    index = read_u32(w, vaddr, 0).astype(np.uint64) if idxen else np.zeros(LANES, np.uint64)
    voff = read_u32(w, vaddr, 1 if idxen else 0).astype(np.uint64) if offen else \
        np.zeros(LANES, np.uint64)
    off = voff + np.uint64(offset)
    if stride == 0:
        inside = off + np.uint64(nbytes) <= np.uint64(num_records)
    else:
        inside = index < np.uint64(num_records)
    addr = np.uint64(base) + np.uint64(scalar_u32(w, soffset)) + off + index * np.uint64(stride)
    return addr, inside


def _buffer_to_lds(inst, ops, nbytes):
    """MUBUF load with ``lds``: lane i's bytes go to LDS at M0 + inst_offset + i * nbytes
    (CDNA3/4 ISA guide, LDS DMA), not to VGPRs; out-of-range lanes write zeros. Global memory
    is read at issue; the LDS write lands when ``s_waitcnt vmcnt`` retires the operation (LDS
    reads issued before that see the old contents, as on hardware)."""
    vaddr, srsrc, soffset = ops[:3]
    offset = int(inst.mod("offset", "0"), 0)
    offen = inst.mod("offen") is not None
    idxen = inst.mod("idxen") is not None

    def run(w, g):
        mask = w.exec_mask
        addr, inside = _buffer_address(w, vaddr, srsrc, soffset, offset, offen, idxen, nbytes)
        live = mask & inside
        raw = np.zeros((LANES, nbytes), np.uint8)
        if live.any():
            raw[live] = g.memory.gather(addr[live], nbytes)
        lds_addr = (w.s[M0] & 0x3FFFF) + offset + np.arange(LANES) * nbytes
        addrs, data = lds_addr[mask], raw[mask]
        w.vm_queue.append(lambda: g.lds.scatter(addrs, data))
        return None
    return run


def _global_to_lds(inst, nbytes):
    """``global_load_lds_*``: the global-address form of the LDS DMA (:func:`_buffer_to_lds`):
    lane i's bytes from ``vaddr (+ saddr) + inst_offset`` go to LDS at M0 + inst_offset +
    i * nbytes, landing when ``s_waitcnt vmcnt`` retires the operation."""
    ops = [parse_operand(o) for o in inst.operands]
    addr = ops[0]
    saddr = ops[1] if len(ops) > 1 else parse_operand("off")
    offset = int(inst.mod("offset", "0"), 0)

    def run(w, g):
        mask = w.exec_mask
        if saddr.kind == "off":
            a = read_u64(w, addr) + np.uint64(offset & (2**64 - 1))
        else:
            a = np.uint64(w.get_s64(saddr.index)) + read_u32(w, addr).astype(np.uint64) + np.uint64(offset)
        raw = np.zeros((LANES, nbytes), np.uint8)
        if mask.any():
            raw[mask] = g.memory.gather(a[mask], nbytes)
        lds_addr = (w.s[M0] & 0x3FFFF) + offset + np.arange(LANES) * nbytes
        addrs, data = lds_addr[mask], raw[mask]
        w.vm_queue.append(lambda: g.lds.scatter(addrs, data))
        return None
    return run


def _buffer_access(inst, kind, nbytes, mode, vdata, vaddr, srsrc, soffset, offset, offen, idxen):
    def address(w):
        return _buffer_address(w, vaddr, srsrc, soffset, offset, offen, idxen, nbytes)

    if kind == "load":
        def run(w, g):
            mask = w.exec_mask
            addr, inside = address(w)
            live = mask & inside
            raw = np.zeros((LANES, nbytes), np.uint8)
            if live.any():
                raw[live] = g.memory.gather(addr[live], nbytes)
            _land(w, vdata, raw, mode, mask)
            return None
    else:
        def run(w, g):
            addr, inside = address(w)
            live = w.exec_mask & inside
            if live.any():
                g.memory.scatter(addr[live], _store_bytes(w, vdata, nbytes, mode)[live])
            return None
    return run


# -- LDS ----
def _compile_ds(inst):
    op = inst.opcode
    ops = [parse_operand(o) for o in inst.operands]
    offset = int(inst.mod("offset", "0"), 0)
    m = re.match(r"^ds_read_b64_tr_b(4|8|16)$", op)
    if m:
        return _ds_read_tr(inst, ops, offset, int(m.group(1)))
    m = re.match(r"^ds_(read|write)(2|2st64)?_(\w+)$", op)
    if m:
        kind, pair, width = m.group(1), m.group(2), m.group(3)
        if width not in _DS_WIDTH:
            raise EmulationError(f"unsupported LDS width {width!r} in {inst.text}")
        nbytes, mode = _DS_WIDTH[width]
        if pair:
            scale = nbytes * (64 if pair == "2st64" else 1)
            offs = (int(inst.mod("offset0", "0"), 0) * scale, int(inst.mod("offset1", "0"), 0) * scale)
            return _ds_pair(inst, ops, kind, nbytes, offs)
        if kind == "read":
            return _ds_read(inst, ops, offset, nbytes, mode)
        return _ds_write(inst, ops, offset, nbytes, mode)
    if op in ("ds_bpermute_b32", "ds_permute_b32"):
        return _ds_permute(inst, ops, offset, op == "ds_bpermute_b32")
    if op == "ds_swizzle_b32":
        raise EmulationError(f"ds_swizzle_b32 is not implemented: {inst.text}")
    return None


def _lds_addresses(w, addr_op, offset):
    return read_u32(w, addr_op).astype(np.int64) + offset


def _count(g, inst, addrs, nbytes):
    g.count_lds(inst, Lds.conflict_cycles(addrs, nbytes))


def _ds_read(inst, ops, offset, nbytes, mode):
    dst, addr = ops[0], ops[1]

    def run(w, g):
        mask = w.exec_mask
        a = _lds_addresses(w, addr, offset)
        raw = np.zeros((LANES, nbytes), np.uint8)
        raw[mask] = g.lds.gather(a[mask], nbytes)
        _count(g, inst, a[mask], nbytes)
        _land(w, dst, raw, mode, mask)
        return None
    return run


def _ds_write(inst, ops, offset, nbytes, mode):
    addr, data = ops[0], ops[1]

    def run(w, g):
        mask = w.exec_mask
        a = _lds_addresses(w, addr, offset)[mask]
        g.lds.scatter(a, _store_bytes(w, data, nbytes, mode)[mask])
        _count(g, inst, a, nbytes)
        return None
    return run


def _ds_pair(inst, ops, kind, nbytes, offs):
    ndw = nbytes // 4

    def run(w, g):
        mask = w.exec_mask
        if kind == "read":
            dst, addr = ops[0], ops[1]
            for half, off in enumerate(offs):
                a = _lds_addresses(w, addr, off)
                raw = np.zeros((LANES, nbytes), np.uint8)
                raw[mask] = g.lds.gather(a[mask], nbytes)
                _count(g, inst, a[mask], nbytes)
                words = raw.view(np.uint32)
                for i in range(ndw):
                    np.copyto(w.v[dst.index + half * ndw + i], words[:, i], where=mask)
        else:
            addr, d0, d1 = ops[0], ops[1], ops[2]
            for data, off in ((d0, offs[0]), (d1, offs[1])):
                a = _lds_addresses(w, addr, off)[mask]
                g.lds.scatter(a, _store_bytes(w, data, nbytes, "u32")[mask])
                _count(g, inst, a, nbytes)
        return None
    return run


def _ds_read_tr(inst, ops, offset, bits):
    """DS_READ_B64_TR_B{4,8,16}: each lane reads 64 bits (``n = 64 / bits`` elements); within
    each block of 16 lanes, element ``e`` of lane ``d`` comes from element ``d % n`` of lane
    ``e * (16 / n) + d // n``. So the 16 x n (lane, element) block holding 16/n K rows of
    n consecutive M/N values leaves each lane with n consecutive K values of one M/N index.
    Derived by matching Triton's gfx950 bf16 GEMM (b16) and fp8 GEMM (b8) to torch; b4 follows
    the same rule (not validated)."""
    dst, addr = ops[0], ops[1]
    n = 64 // bits
    d = np.arange(LANES)[:, None]
    e = np.arange(n)[None, :]
    src_lane = d // 16 * 16 + e * (16 // n) + (d % 16) // n
    src_elem = np.broadcast_to((d % 16) % n, src_lane.shape)

    def run(w, g):
        mask = w.exec_mask
        a = _lds_addresses(w, addr, offset)
        raw = np.zeros((LANES, 8), np.uint8)
        raw[mask] = g.lds.gather(a[mask], 8)
        _count(g, inst, a[mask], 8)
        if bits == 4:
            elems = np.stack([raw & 0xF, raw >> 4], axis=2).reshape(LANES, 16)
        else:
            elems = raw.copy().view(np.uint16 if bits == 16 else np.uint8)
        tr = elems[src_lane, src_elem]
        if bits == 4:
            pairs = tr.reshape(LANES, 8, 2)
            out = (pairs[:, :, 0] | (pairs[:, :, 1] << 4)).astype(np.uint8)
        else:
            out = np.ascontiguousarray(tr).view(np.uint8)
        _land(w, dst, out.reshape(LANES, 8), "u32", mask)
        return None
    return run


def _ds_permute(inst, ops, offset, backward):
    dst, addr, data = ops[0], ops[1], ops[2]

    def run(w, g):
        mask = w.exec_mask
        lane = ((read_u32(w, addr).astype(np.int64) + offset) // 4) % LANES
        src = read_u32(w, data)
        if backward:  # dst[i] = src[lane[i]], 0 from inactive source lanes
            res = np.where(mask[lane], src[lane], 0).astype(np.uint32)
        else:  # dst[lane[i]] = src[i]
            res = np.zeros(LANES, np.uint32)
            res[lane[mask]] = src[mask]
        np.copyto(w.v[dst.index], res, where=mask)
        return None
    return run


