#!/usr/bin/env python3
"""Diff the cycle model's MFMA and VALU rows against LLVM's ``AMDGPU/SISchedule.td``.

Usage: ``python3 tools/check_sischedule.py --td PATH/TO/SISchedule.td [--model NAME]``

Get the file from an llvm-project checkout (``llvm/lib/Target/AMDGPU/SISchedule.td``); nothing
is downloaded. The newest CDNA model in the file is used (``SIDPGFX950FullSpeedModel`` if
present, else ``SIDPGFX940FullSpeedModel``) unless ``--model`` names one. For each MFMA mnemonic
below (and every MFMA in ``--program`` code objects) the script compares our pass count with
the LLVM ``Write*PassMAI``/``DGEMM`` class its ``InstRW`` regexes select; for each VALU class of
ours named like an LLVM SchedWrite (``WriteTrans32`` ...) it compares latencies (passes).
Exit status 1 when a row differs; rows LLVM does not model are listed, not counted.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from zyfa.gfx950 import timing
from zyfa.gfx950.isa import load_program

MFMA_MNEMONICS = (
    "v_mfma_f32_32x32x64_f8f6f4", "v_mfma_f32_16x16x128_f8f6f4", "v_mfma_scale_f32_32x32x64_f8f6f4",
    "v_mfma_scale_f32_16x16x128_f8f6f4", "v_mfma_f32_32x32x16_bf16", "v_mfma_f32_16x16x32_bf16",
    "v_mfma_f32_32x32x16_f16", "v_mfma_f32_16x16x32_f16", "v_mfma_f32_32x32x16_fp8_fp8",
    "v_mfma_f32_16x16x32_fp8_fp8", "v_mfma_f32_32x32x2_f32", "v_mfma_f32_16x16x4_f32", "v_mfma_f32_32x32x1_2b_f32",
    "v_mfma_i32_16x16x64_i8", "v_smfmac_f32_32x32x32_bf16", "v_smfmac_f32_16x16x64_bf16",
)
_PASSES = {"Write2PassMAI": 2, "Write4PassMAI": 4, "Write8PassMAI": 8, "Write16PassMAI": 16,
           "Write4PassDGEMM": 4, "Write8PassDGEMM": 8, "Write16PassDGEMM": 16}


def _blocks(text: str) -> dict[str, str]:
    """``let SchedModel = NAME in { ... }`` bodies and the SICommonWriteRes multiclass body."""
    out = {}
    for match in re.finditer(r"(let SchedModel = (\w+) in \{|multiclass (SICommonWriteRes) \{)", text):
        name = match.group(2) or match.group(3)
        depth, i = 1, match.end()
        while depth and i < len(text):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        out[name] = text[match.end():i - 1]
    return out


def _latencies(body: str) -> dict[str, int]:
    found = {}
    for m in re.finditer(r"HWVALUWriteRes<(\w+),\s*(\d+)>", body):
        found[m.group(1)] = int(m.group(2))
    for m in re.finditer(r"HWWriteRes<(\w+),\s*\[[^\]]*\],\s*(\d+)>", body):
        found[m.group(1)] = int(m.group(2))
    return found


def _instrw(body: str) -> list[tuple[str, str]]:
    return [(m.group(2), m.group(1)) for m in
            re.finditer(r"InstRW<\[(\w+)[^\]]*\],\s*\(instregex\s+\"([^\"]+)\"\)>", body)]


def _f8_variants(body: str) -> dict[str, str]:
    """``SchedWriteVariant`` name -> the write its FP8-operand ``SchedVar`` selects (gfx950's
    ``WriteMFMAScale_*_F8F6F4``: ``PredIsF8_MFMA_SCALE`` -> 16/8 passes, else 8/4). Our f8f6f4
    rows are timed for FP8 operands, so that is the variant they are compared with."""
    out = {}
    for m in re.finditer(r"def (\w+)\s*:\s*SchedWriteVariant<\[(.*?)\]>;", body, re.S):
        for pred, write in re.findall(r"SchedVar<(\w+),\s*\[(\w+)\]>", m.group(2)):
            if "F8" in pred.upper():
                out[m.group(1)] = write
    return out


def llvm_mfma_passes(rules: list[tuple[str, str]], mnemonic: str, variants: dict | None = None):
    """(passes, class, regex) LLVM assigns to ``mnemonic``, or None; ``variants``: as
    :func:`_f8_variants` returns (the FP8-operand write of a SchedWriteVariant)."""
    printed = mnemonic.upper()
    variants = variants or {}
    # LLVM's internal opcode names drop the underscore after the shape (V_MFMA_F32_32X32X2F32)
    for name in (printed + "_e64", re.sub(r"^(V_\w+?_\d+X\d+X\d+)_", r"\1", printed) + "_e64"):
        for regex, cls in rules:
            write = variants.get(cls, cls)
            if write in _PASSES and re.match(regex, name):
                return _PASSES[write], cls if write == cls else f"{cls} (FP8 operands: {write})", regex
    return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--td", required=True, help="path to llvm/lib/Target/AMDGPU/SISchedule.td")
    parser.add_argument("--model", default=None, help="SchedModel to compare against (default: newest CDNA)")
    parser.add_argument("--program", action="append", default=[], help="code object / .s whose MFMAs to add")
    args = parser.parse_args(argv)
    td = Path(args.td)
    if not td.is_file():
        parser.error(f"--td {td} does not exist")
    blocks = _blocks(td.read_text())
    model = args.model or next((m for m in ("SIDPGFX950FullSpeedModel", "SIDPGFX940FullSpeedModel") if m in blocks), None)
    if model not in blocks:
        parser.error(f"model {model!r} not in {td}; models: {', '.join(sorted(blocks))}")
    rules = _instrw(blocks[model])
    variants = _f8_variants(blocks[model])
    latency = {**_latencies(blocks.get("SICommonWriteRes", "")), **_latencies(blocks[model])}
    mnemonics = list(MFMA_MNEMONICS)
    for path in args.program:
        mnemonics += sorted({i.base for i in load_program(path).instructions if i.unit == "MFMA"} - set(mnemonics))
    diffs = 0
    print(f"LLVM model: {model} ({td})")
    print(f"{'row':42s} {'ours':>5s} {'LLVM':>5s}  status")
    for mnemonic in mnemonics:
        ours = timing.op_class(mnemonic)
        theirs = llvm_mfma_passes(rules, mnemonic, variants)
        if theirs is None:
            status, value = f"not in {model} (ours: {ours.source})", "-"
        else:
            value = str(theirs[0])
            status = "match" if theirs[0] == ours.passes else f"DIFF ({theirs[1]} via {theirs[2]})"
            diffs += theirs[0] != ours.passes
        print(f"{mnemonic:42s} {ours.passes:5d} {value:>5s}  {status}")
    seen = set()
    for _, cls in timing.TABLE:
        if cls.unit not in ("VALU", "TRANS") or cls.name in seen:
            continue
        seen.add(cls.name)
        if cls.name in latency:
            ok = latency[cls.name] == cls.latency_passes
            diffs += not ok
            print(f"{cls.name + ' latency (passes)':42s} {cls.latency_passes:5d} {latency[cls.name]:5d}  "
                  f"{'match' if ok else 'DIFF'}")
        else:
            print(f"{cls.name + ' latency (passes)':42s} {cls.latency_passes:5d} {'-':>5s}  no LLVM SchedWrite of that name")
    print(f"{diffs} difference(s)")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
