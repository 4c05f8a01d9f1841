"""Instruction identity: the rocprofv3 --att importer and the CDNA4 cycle model name every executed
instruction of one of our generated gfx950 kernels by the same pc and opcode.

The ATT directory is written here, in the documented layout (rocprofiler-sdk att-tool writer:
code.json rows [ISA, _, LineNumber, Source, Codeobj, Vaddr, ...], wave files
{"wave": {"instructions": [[time, category, stall, duration, line], ...]}}), from two independent
sources: code.json is llvm-objdump's disassembly of the kernel's code object (what rocprofv3 puts
there, with the kernel's label row at its entry symbol's vaddr), and the per-wave instruction streams are the cycle model's records, each placed through its
pc -> code.json line. Importing must give back, record for record, the model's pc, opcode, unit,
issue cycle and stall, and (given the program's schedule clusters / labels) its region and loop
iteration. Not a hardware capture: no MI3xx is available. The fixture is generated at test time
from the current generator so it cannot go stale.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from zyfa.shapes import AttnShape
from zyfa.trace.rocprof import import_att_dir
from zyfa.trace.cdna4.launch import prepare as resolve
from zyfa.trace.rocprof.isa import CATEGORIES
from zyfa.trace.rocprof.records import RegionMap
from zyfa.trace.rocprof.sdk import disassembly, kernel_entries
from zyfa.trace.rocprof.timing import model_mfma_cycles

# schema unit -> a decoder category the hardware reports for it (MFMA and TRANS come as VALU)
_CATEGORY = {name: value for value, (name, _) in CATEGORIES.items()}
UNIT_CATEGORY = {"MFMA": _CATEGORY["VALU"], "TRANS": _CATEGORY["VALU"], "VALU": _CATEGORY["VALU"],
                 "SALU": _CATEGORY["SALU"], "SMEM": _CATEGORY["SMEM"], "LDS": _CATEGORY["LDS"],
                 "VMEM": _CATEGORY["VMEM"], "BRANCH": _CATEGORY["JUMP"], "BARRIER": _CATEGORY["IMMED"],
                 "WAIT": _CATEGORY["IMMED"], "MISC": _CATEGORY["IMMED"]}


def write_att_dir(root: Path, kernel: str, entry: int, code: dict[int, str], records: list[dict]) -> Path:
    """A ui_output_agent_1_dispatch_1 directory holding ``records`` (model records of CU 0, SE 0;
    their pc is counted from the kernel entry at ELF vaddr ``entry``)."""
    d = root / "ui_output_agent_1_dispatch_1"
    d.mkdir(parents=True)
    vaddrs = sorted(code)
    line_of = {v - entry: i + 1 for i, v in enumerate(vaddrs)}
    rows = [[f"; {kernel}", 0, 0, kernel, 1, entry, 0, 0, 0, 0, 0, 0, 0, []]]
    rows += [[code[v], 0, line_of[v - entry], "", 1, v, 0, 0, 0, 0, 0, 0, 0, []] for v in vaddrs]
    header = "ISA, _, LineNumber, Source, Codeobj, Vaddr, Hit, Latency, Stall, Idle, ServiceType, Issued, Stalled, NotIssuedReasons"
    (d / "code.json").write_text(json.dumps({"code": rows, "header": header, "version": "test"}))
    waves: dict[tuple, list[dict]] = {}
    for r in records:
        waves.setdefault((r["simd"], r["slot"], r["wave"]), []).append(r)
    names, occupancy, per_slot = {}, [], {}
    for (simd, slot, _wave), recs in sorted(waves.items(), key=lambda kv: min(r["issue"] for r in kv[1])):
        recs.sort(key=lambda r: r["issue"])
        k = per_slot.setdefault((simd, slot), 0)
        per_slot[(simd, slot)] = k + 1
        name = f"se0_sm{simd}_sl{slot}_wv{k}.json"
        insts = [[r["issue"] - r["stall"], UNIT_CATEGORY[r["unit"]], r["stall"], r["end"] - r["issue"] + r["stall"],
                  line_of[r["pc"]]] for r in recs]
        begin, end = insts[0][0], max(r["end"] for r in recs)
        (d / name).write_text(json.dumps({"name": "SE0", "duration": end - begin, "wave": {
            "cu": 0, "id": k, "simd": simd, "slot": slot, "begin": begin, "end": end, "instructions": insts,
            "timeline": [[2, end - begin]], "waitcnt": []}, "num_stitched": len(insts), "num_insts": len(insts)}))
        names.setdefault("0", {}).setdefault(str(simd), {}).setdefault(str(slot), {})[str(k)] = [name, begin, end]
        occupancy += [[begin, 0, simd, slot, 1, 1], [end, 0, simd, slot, 0, 1]]
    (d / "occupancy.json").write_text(json.dumps({"0": sorted(occupancy), "dispatches": {"0": "0 / 0x0", "1": kernel},
                                                  "version": "3.0.0"}))
    (d / "filenames.json").write_text(json.dumps({"global_begin_time": 0, "gfxv": "vega", "gfxip": 9, "version": "test",
                                                  "counter_names": [], "wave_filenames": names}))
    return d


@pytest.mark.parametrize("kernel,dtype", [("zyfa-fp8", "fp8"), ("aiter-like-fp8", "fp8"), ("zyfa-bf16", "bf16")])
def test_importer_and_model_agree_on_every_instruction(tmp_path, kernel, dtype):
    if not all(shutil.which(t) for t in ("llvm-mc-22", "ld.lld-22", "llvm-objdump-22", "llvm-readelf-22")):
        pytest.skip("LLVM 22 tools not available")
    from zyfa.kernels.registry import get_kernel
    from zyfa.trace.cdna4.tracer import simulate as model_trace

    shape = AttnShape(batch=1, heads=1, heads_k=1, seqlen_q=256, seqlen_k=256, dtype=dtype)
    model, _ = model_trace(kernel, shape)
    build = get_kernel(kernel).build(shape)
    image = Path(build.code_object).read_bytes()
    code = disassembly(image)
    (entry,) = [v for v, name in kernel_entries(image).items() if name == build.symbol]
    recs = model.table.to_pylist()
    assert len(recs) > 1000 and {r["cu"] for r in recs} == {0}
    assert all(r["pc"] + entry in code for r in recs), "a model pc is not an instruction of the code object"

    launch = resolve(kernel, shape)  # what the model ran: its program and the generator's clusters
    regions = RegionMap.from_program(launch.program, launch.meta.get("iteration_starts"))
    hw = import_att_dir(write_att_dir(tmp_path, kernel, entry, code, recs), arch="gfx950",
                        mfma_cycles=model_mfma_cycles(), regions=regions)
    assert len(hw) == len(recs) and hw.meta.extra["unmapped_records"] == 0

    key = ("simd", "slot", "issue")
    a = sorted(recs, key=lambda r: tuple(r[k] for k in key))
    b = sorted(hw.table.to_pylist(), key=lambda r: tuple(r[k] for k in key))
    fields = ("pc", "opcode", "unit", "issue", "stall", "region", "iteration")
    mismatches = [(tuple(x[f] for f in fields), tuple(y[f] for f in fields)) for x, y in zip(a, b)
                  if any(x[f] != y[f] for f in fields)]
    assert not mismatches, f"{len(mismatches)} records differ, first 20: {mismatches[:20]}"
    assert sorted({r["opcode"] for r in recs}) == sorted({r["opcode"] for r in hw.table.to_pylist()})
