"""The fused Hadamard + FP8 kernel keeps whole rows in one thread at 32 rows per warp (the per-head
default launch; kernels/triton/hadamard_fp8.py, "Layout"): compiled for sm_90 on this CPU (no
GPU), its butterflies need no lane shuffles and no local memory. The shuffles left are the
block-wide reductions (the token kernel's min over the block's descales, the amax pass's max): a
handful, where the row-major layout of H200 run 10 needed ~500 per thread (a row spread over 8
lanes: 41-57 instructions per element). The per-token default (16 rows per warp, two threads per
row: ~200 shuffles) trades some of that for wider loads; it was the faster one on the H200."""

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

triton = pytest.importorskip("triton")

from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.backends.nvidia.compiler import get_ptxas  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from zyfa.kernels.triton import hadamard_fp8 as H  # noqa: E402
from zyfa.numerics import rope_tables  # noqa: E402

# tools/hadamard_sass.py: compile for sm_90a without a GPU, count SASS per element
_SASS_TOOL = Path(__file__).resolve().parents[3] / "tools" / "hadamard_sass.py"
_spec = importlib.util.spec_from_file_location("hadamard_sass", _SASS_TOOL)
hadamard_sass = sys.modules["hadamard_sass"] = importlib.util.module_from_spec(_spec)  # registered: its dataclass
_spec.loader.exec_module(hadamard_sass)

ARGS = {
    "token": (H._hadamard_fp8_token, ["*bf16", "*fp8e4nv", "*fp32", "*fp32", "*fp32"] + ["i32"] * 11,
              ["D", "BLOCK_S", "INV_SQRT_D", "OUT_F32", "ROTATE", "ROPE", "TABLES_X", "CLAMP", "SIGN_BITS"]),
    "amax": (H._hadamard_amax_head, ["*bf16", "*fp32", "*fp32", "*fp32"] + ["i32"] * 7,
             ["D", "BLOCK_S", "INV_SQRT_D", "ROTATE", "ROPE", "TABLES_X"]),
    "head": (H._hadamard_fp8_head, ["*bf16", "*fp8e4nv", "*fp32", "*fp32", "*fp32", "*fp32"] + ["i32"] * 10,
             ["D", "BLOCK_S", "INV_SQRT_D", "OUT_F32", "ROTATE", "ROPE", "TABLES_X", "CLAMP", "SIGN_BITS"]),
    "rope": (H._rope_kernel, ["*bf16", "*bf16", "*fp32", "*fp32"] + ["i32"] * 9, ["D", "BLOCK_S", "OUT_F32", "TABLES_X"]),
}


def compile_sm90(kernel: str, d: int, num_warps: int = H.NUM_WARPS, rope: bool = False, fp_fusion: bool = False,
                 block_s: int | None = None, variant: str | None = None) -> str:
    """PTX of ``kernel`` for sm_90 at 32 rows per warp (one row per thread) unless ``block_s``,
    launched as the wrapper launches it (no FP contraction) unless ``fp_fusion``."""
    fn, types, constexprs = ARGS[kernel]
    names = fn.arg_names
    signature = dict(zip(names, types + ["constexpr"] * len(constexprs)))
    const = {"D": d, "BLOCK_S": block_s or 32 * num_warps, "INV_SQRT_D": d ** -0.5, "OUT_F32": False, "ROTATE": True,
             "ROPE": rope, **H._variant(variant)}
    # 16-divisible pointers and strides, as the launcher specialises contiguous tensors
    attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(names) if signature[n].startswith("*") or n.startswith("stride")}
    src = ASTSource(fn=fn, signature=signature, constexprs={k: const[k] for k in constexprs}, attrs=attrs)
    options = {"num_warps": num_warps, "enable_fp_fusion": fp_fusion}
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options).asm["ptx"]


@pytest.mark.parametrize("rope", [False, True])
@pytest.mark.parametrize("kernel", ["token", "amax", "head"])
def test_butterflies_stay_in_registers(kernel, rope):
    # RoPE pairs channel f with f + D/2, i.e. chunk c with c + C/2 in the same thread: no shuffles either
    ptx = compile_sm90(kernel, 128, rope=rope)
    shuffles = len(re.findall(r"shfl\.sync", ptx))
    assert shuffles <= 16, f"{kernel}: {shuffles} lane shuffles (a row left its thread)"
    assert not re.search(r"(ld|st)\.local", ptx), f"{kernel}: spills to local memory"
    assert len(re.findall(r"(?:add|sub)(?:\.rn)?\.f32", ptx)) >= 7 * 128  # the 7 stages of 128 channels are there


def test_rope_rounds_each_product_and_sum():
    """The RoPE pass matches zyfa.numerics.rope bit for bit only if ``a cos - b sin`` is two rounded
    products and a rounded difference: launched as the wrapper launches it, the RoPE-only kernel
    has no fma (with FP contraction on, the compiler would fuse one product into each sum)."""
    ptx = compile_sm90("rope", 128)
    assert len(re.findall(r"mul\.f32|mul\.rn\.f32", ptx)) >= 128  # 4 products per channel pair, 64 pairs
    assert not re.search(r"fma\.rn\.f32", ptx), "RoPE products were contracted into FMAs"
    assert not re.search(r"(ld|st)\.local", ptx)
    assert re.search(r"fma\.rn\.f32", compile_sm90("rope", 128, fp_fusion=True))  # the check can fail


def spill_bytes(ptx: str, tmp_path: Path) -> int:
    """Spill store bytes ptxas (Triton's own, for sm_90a) reports for a kernel's PTX."""
    src = tmp_path / "k.ptx"
    src.write_text(ptx)
    out = subprocess.run([get_ptxas(90).path, "-arch=sm_90a", "-v", str(src), "-o", str(tmp_path / "k.cubin")],
                         capture_output=True, text=True, check=True).stderr
    return int(re.search(r"(\d+) bytes spill stores", out).group(1))


@pytest.mark.parametrize("kernel", ["amax", "head", "token"])
def test_rope_default_launch_does_not_spill(kernel, tmp_path):
    """With RoPE, one row per thread (128 rows per 4 warps) holds the row, its cos and sin and spills
    per head; the RoPE default (H.BLOCK_S_ROPE: two threads per row) does not."""
    gran = "token" if kernel == "token" else "head"
    assert spill_bytes(compile_sm90(kernel, 128, rope=True, block_s=H.BLOCK_S_ROPE[gran]), tmp_path) == 0
    if kernel != "token":  # the check can fail: the one-row-per-thread launch spills
        assert spill_bytes(compile_sm90(kernel, 128, rope=True, block_s=128), tmp_path) > 0


def test_rope_arguments_checked_before_any_launch():
    """Wrong RoPE tables fail with one line naming the argument (checked on the host, no GPU needed)."""
    x = torch.zeros(1, 6, 2, 64)
    cos, sin = rope_tables(6, 64)
    with pytest.raises(ValueError, match="pass both cos and sin"):
        H.hadamard_quantize_fp8(x, cos=cos)
    with pytest.raises(ValueError, match=r"sin must be a float32 tensor of shape \(seqlen, headdim // 2\) = \(6, 32\)"):
        H.hadamard_quantize_fp8(x, cos=cos, sin=rope_tables(5, 64)[1])
    with pytest.raises(ValueError, match="cos must be a float32 tensor"):
        H.rope_rows(x, cos.double(), sin)
    with pytest.raises(ValueError, match="unit column stride"):
        H.rope_rows(x, cos, rope_tables(6, 128)[1][:, ::2])


@pytest.mark.parametrize("kernel", ["amax", "head", "token", "rope"])
def test_tables_in_x_layout_need_no_shared_memory(kernel):
    """RoPE tables read in x's [D/8, rows, 8] shape (variant "tables_x") get x's register layout: at
    one row per thread (128 rows, 4 warps) no layout conversion through shared memory is left (the
    amax pass keeps its block-wide max: a few barriers), where the run-25 form (tables as
    [D/16, rows, 8]) converts through shared memory. (Both still spill a little at 128 rows: ptxas
    for sm_90a, CPU box, 24-40 bytes; the 64-row launch does not spill.)"""
    ptx = compile_sm90(kernel, 128, rope=True, block_s=128, variant="tables_x")
    assert len(re.findall(r"bar\.sync", ptx)) <= 8, "a layout conversion through shared memory is back"
    old = compile_sm90(kernel, 128, rope=True, block_s=128, variant="run25")
    assert len(re.findall(r"bar\.sync", old)) > 16  # the check can fail: run 25's tables convert


@pytest.mark.parametrize("with_clamp, without", [("tables_x", "tables_x_noclamp"), ("run25", "lean")])
def test_noclamp_variant_relies_on_a_saturating_convert(with_clamp, without):
    """Without the explicit clamp the codes equal the clamped ones only because the fp32 -> e4m3
    convert saturates: the PTX must use cvt.rn.satfinite, and the clamp's min/max must be gone."""
    clamped = compile_sm90("token", 128, rope=True, variant=with_clamp)
    bare = compile_sm90("token", 128, rope=True, variant=without)
    cvts = re.findall(r"cvt\.rn[.a-z]*\.e4m3x2\.f32", bare)
    assert cvts and all(".satfinite" in c for c in cvts)
    count = lambda ptx: len(re.findall(r"(?:min|max)(?:\.NaN)?\.f32", ptx))  # noqa: E731
    assert count(clamped) - count(bare) >= 2 * 128 - 8  # the clamp's min and max per element (128 rows x 128 / 128 threads)


def test_lean_variant_keeps_signs_without_a_compare_per_element():
    """"lean" takes the quotient's sign from y's sign bit (so -0 keeps its code 0x80) instead of
    comparing every element with 0 and selecting: the per-element float compares are gone."""
    compares = lambda ptx: len(re.findall(r"setp\.(?:eq|neu)\.f32", ptx))  # noqa: E731
    assert compares(compile_sm90("token", 128, rope=True, variant="run25")) - \
        compares(compile_sm90("token", 128, rope=True, variant="lean")) >= 128 - 8


def test_maxnreg_is_checked_before_any_launch():
    x = torch.zeros(1, 4, 1, 64)
    with pytest.raises(ValueError, match=r"maxnreg must be an int in \[24, 255\] or None, got 300"):
        H.hadamard_quantize_fp8(x, maxnreg=300)
    with pytest.raises(ValueError, match="variant must be one of"):
        H.hadamard_quantize_fp8(x, variant="fast")


def test_sass_tool_prints_every_variant_and_keeps_its_files(tmp_path, capsys):
    """tools/hadamard_sass.py: one table line per variant and RoPE pass, NAME.sass written to --out,
    and a second run into the same folder refuses without --force (one line naming the option)."""
    assert hadamard_sass.main(["--headdim", "16", "--out", str(tmp_path)]) == 0
    table = capsys.readouterr().out
    for name in list(H.VARIANTS) + ["rope_pass_run25", "rope_pass_rows"]:
        assert re.search(rf"^{name}\s+\d+\.\d\d\s+\d+\s+\d+", table, re.M), (name, table)
        assert "F" in (tmp_path / f"{name}.sass").read_text()  # a disassembly, not an empty file
    with pytest.raises(SystemExit):
        hadamard_sass.main(["--headdim", "16", "--out", str(tmp_path)])
    assert "--force overwrites" in capsys.readouterr().err


def test_sass_tool_against_a_reference(tmp_path, capsys):
    """--against REF: every kernel's listing compared with REF/NAME.sass byte for byte; the same code
    gives "[same]" for all and exit 0; one edited byte, or a missing file, fails that kernel, exit 1."""
    ref = tmp_path / "ref"
    assert hadamard_sass.main(["--headdim", "16", "--out", str(ref)]) == 0
    capsys.readouterr()
    assert hadamard_sass.main(["--headdim", "16", "--against", str(ref)]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith(tuple(H.VARIANTS) + ("rope_pass",))]
    assert len(lines) == len(H.VARIANTS) + 2 and all(ln.endswith("[same]") for ln in lines), lines
    edited = ref / "lean.sass"
    edited.write_text(edited.read_text().replace("F", "G", 1))
    (ref / "rows.sass").unlink()
    assert hadamard_sass.main(["--headdim", "16", "--against", str(ref)]) == 1
    out = capsys.readouterr().out
    assert re.search(r"^lean\s.*\[DIFFERS\]$", out, re.M) and re.search(r"^rows\s.*\[\(no reference\)\]$", out, re.M)
    assert re.search(r"^run25\s.*\[same\]$", out, re.M), out
    with pytest.raises(SystemExit):
        hadamard_sass.main(["--headdim", "16", "--against", str(tmp_path / "none")])
    assert "--against:" in capsys.readouterr().err


# -- variant "rows": the per-element budget, counted in SASS for sm_90a (tools/hadamard_sass.py) ----

@pytest.mark.parametrize("d, rope", [(128, True), (128, False), (64, True)])
def test_rows_variant_meets_its_instruction_budget(d, rope):
    """The "rows" kernel (one row per thread, pieces of 4 channels), per token, bf16 x, the wrapper's
    launch, compiled for sm_90a: its arithmetic per element is RoPE 3 (2 products, 1 sum), 7 (d128)
    butterfly stages + 1 scale, the amax 1, Markstein 3 (one FMUL, two FFMA), the widening 1 and half a
    convert, i.e. 16.5 (13.5 without RoPE) at d128; the budget allows 512 instructions per row (4 per
    element at d128, 8 at d64) for the per-row divisions and addresses, and 1 per element for the
    tiny-row branch (one FMUL, not executed on normal data). Registers stay below 176 (H200 run 16's default: 2 programs per SM; here 3), with
    no spill, no shared memory beyond the block-wide min (a few words) and no lane shuffle in the
    element path."""
    c = hadamard_sass.total(hadamard_sass.kernels(d, rope)["rows"])
    per_thread = c.elements_per_thread
    stages = d.bit_length() - 1
    assert c.per_element <= (3 if rope else 0) + stages + 1 + 1 + 3 + 1 + 0.5 + 512 / d + 1, (c.per_element, c.classes)
    # the element path is all there (the count is not low because something was dropped)
    assert c.count(r"FADD\b") >= (stages + rope) * per_thread
    assert c.count(r"FFMA\b") >= 2 * per_thread and c.count(r"F2FP\.SATFINITE\.E4M3") == per_thread // 2
    assert c.registers < 176 and c.spill_bytes == 0, (c.registers, c.spill_bytes)
    assert c.count(hadamard_sass.SHUFFLE) <= 8 and c.count(hadamard_sass.SHARED) <= 4, c.classes


def test_rows_variant_counts_far_below_the_default():
    """Against run25's per-token kernel (the default with RoPE until H200 run 32) compiled the same way:
    less than half the SASS per element (static; H200 run 16's ncu: ~42 executed per element for it)."""
    kernels = hadamard_sass.kernels(128, True)
    rows, old = (hadamard_sass.total(kernels[v]) for v in ("rows", "run25"))
    assert rows.per_element < 0.5 * old.per_element, (rows.per_element, old.per_element)


def test_rows_variant_per_head_budget():
    """Per head the "rows" form reads and rotates x twice (amax pass, then quantise pass): the amax pass
    does RoPE 3, butterflies 7, amax 1, widening 1 per element (the scale applied once to the max);
    the quantise pass as per token without the amax. Budget: that arithmetic (27.5) + 6 for the two
    passes' per-row work, no spill, no shuffle in the element path, registers below run 16's 176."""
    c = hadamard_sass.total(hadamard_sass.kernels(128, True, "head")["rows"])
    assert c.per_element <= (3 + 7 + 1 + 1) + (3 + 7 + 1 + 3 + 1 + 0.5) + 6, (c.per_element, c.classes)
    assert c.registers < 176 and c.spill_bytes == 0, (c.registers, c.spill_bytes)
    assert c.count(hadamard_sass.SHUFFLE) <= 16, c.classes  # the amax pass's block max: a few per thread


# -- variant "pairs": a row in two threads; the stage across them is lane shuffles, not shared memory --

@pytest.mark.parametrize("d, rope", [(128, True), (128, False), (64, True)])
def test_pairs_variant_crosses_the_pair_by_shuffles(d, rope):
    """The "pairs" kernel (each row in two threads, d/2 channels each), per token, bf16 x, the wrapper's
    launch, sm_90a: the butterfly stage across the pair is one lane shuffle per element (plus one per
    row for the amax and "rows"' 7 of the block-wide min), and nothing goes through shared memory but
    "rows"' block-wide min (a few words); the per-thread arithmetic is "rows"' with one butterfly stage
    an FFMA (a + b or a - b by a +-1 factor) instead of an FADD. Registers: at most 100 at d128, under
    "rows"' count at every shape (Triton 3.9 on the CPU box: 88 at d128, 3.6: 96; "rows" 168), no spill.
    Budget: "rows"' (above) with 1 per element for the shuffle and 512 per row spread over d/2
    elements (the per-row divisions run in both threads)."""
    kernels = hadamard_sass.kernels(d, rope)
    c, rows = hadamard_sass.total(kernels["pairs"]), hadamard_sass.total(kernels["rows"])
    per_thread = c.elements_per_thread
    assert per_thread == d // 2
    stages = d.bit_length() - 1
    assert c.count(r"SHFL\.BFLY\b") >= per_thread  # the stage across the pair: a shuffle per element
    assert c.count(hadamard_sass.SHUFFLE) <= per_thread + 1 + 8, c.classes
    assert c.count(hadamard_sass.SHARED) <= 4 and c.count(hadamard_sass.BARRIER) <= 2, c.classes
    assert c.count(r"FADD\b") >= (stages - 1 + rope) * per_thread and c.count(r"FFMA\b") >= 3 * per_thread
    assert c.count(r"F2FP\.SATFINITE\.E4M3") == per_thread // 2
    assert c.per_element <= (3 if rope else 0) + stages + 1 + 1 + 3 + 1 + 0.5 + 1 + 1024 / d + 1, (c.per_element,
                                                                                                 c.classes)
    assert c.spill_bytes == 0 and c.registers < rows.registers and (d != 128 or c.registers <= 100), (
        c.registers, rows.registers, c.spill_bytes)


def test_pairs_variant_per_head_crosses_by_shuffles():
    """Per head (amax pass + quantise pass), "pairs" as "rows" with the pair stage in both passes:
    shuffles for it, no more shared memory than "rows", fewer registers, no spill."""
    kernels = hadamard_sass.kernels(128, True, "head")
    c, rows = hadamard_sass.total(kernels["pairs"]), hadamard_sass.total(kernels["rows"])
    assert c.count(r"SHFL\.BFLY\b") >= 2 * c.elements_per_thread
    assert c.count(hadamard_sass.SHARED) <= rows.count(hadamard_sass.SHARED), c.classes
    assert c.spill_bytes == 0 and c.registers < rows.registers, (c.registers, rows.registers)


def test_pairs_variant_rejects_small_headdim():
    x = torch.zeros(1, 4, 2, 32)
    with pytest.raises(ValueError, match="pairs"):
        H.hadamard_quantize_fp8(x, "token", variant="pairs")


@pytest.mark.parametrize("granularity, bound", [("token", 62), ("head", 76)])
def test_default_variant_stays_within_its_counted_budget(granularity, bound):
    """run25 (the default without RoPE and at headdim 256; with RoPE until H200 run 32) pinned at its
    count, so that a change that makes it worse shows here: static SASS per element for sm_90a (d128, RoPE; per head both passes),
    Triton 3.9 on the CPU box 57.75 per token and 73.38 per head (3.6, the H200's: 60.50 / 74.12),
    no spill. Static, with the per-element div_rn copy for tiny descales that normal data skips."""
    c = hadamard_sass.total(hadamard_sass.kernels(128, True, granularity)[H.DEFAULT_VARIANT])
    assert c.per_element <= bound and c.spill_bytes == 0, (c.per_element, c.spill_bytes)


def test_rows_variant_reads_words_only_from_aligned_bf16():
    """The "rows" kernels read bf16 rows as uint32 words only when every row starts 4-byte aligned: a
    view one element into its storage (even strides, odd start) or with odd strides reads bf16."""
    base = torch.zeros(1, 4, 2, 130, dtype=torch.bfloat16)
    assert H._words(base[..., :128])
    assert not H._words(base[..., 1:129])  # even strides, the start 2 bytes off
    assert not H._words(torch.zeros(1, 4, 2, 129, dtype=torch.bfloat16)[..., 1:])  # odd strides
    assert not H._words(torch.zeros(1, 4, 2, 128, dtype=torch.float16))


def test_sweep_register_cap_trades_spills_for_warps():
    """tools/hadamard_sass.py --sweep (the launches of fused_rope_quant.py --sweep, H200 run 33): the
    "rows" kernel per token at 64 rows x 2 warps under maxnreg 128 obeys the cap, which lets 16 warps
    share an SM instead of 12 (168 registers uncapped, H200 run 32's ncu) and costs spill stores: a row
    of 128 fp32 channels is 128 registers by itself."""
    c = hadamard_sass.total(hadamard_sass.kernels(128, True, "token", 2, 64)["rows"], 2, 128)
    assert c.registers <= 128 and c.spill_bytes > 0, (c.registers, c.spill_bytes)
    assert hadamard_sass.warps_per_sm(c.registers, 2) == 16 and hadamard_sass.warps_per_sm(168, 2) == 12
    assert hadamard_sass.warps_per_sm(168, 8) == 8 and hadamard_sass.warps_per_sm(32, 1) == 32  # whole programs; 32 max
    sweep = hadamard_sass.load_sweep()
    assert ("token", "rows", 64, 2, 128) in sweep and all(len(p) == 5 for p in sweep)


def test_sass_tool_sweep_refuses_options_it_ignores(capsys):
    with pytest.raises(SystemExit):
        hadamard_sass.main(["--sweep", "--granularity", "head"])
    assert "--sweep counts its own launches" in capsys.readouterr().err


class _Recorder:
    """Stands in for a Triton kernel: records each launch's keyword arguments (no GPU needed)."""

    def __init__(self, name: str, calls: list):
        self.name, self.calls = name, calls

    def __getitem__(self, grid):
        return lambda *args, **kw: self.calls.append((self.name, kw))


KERNELS = ("_hadamard_fp8_token", "_hadamard_amax_head", "_hadamard_fp8_head", "_hadamard_fp8_token_rows",
           "_hadamard_amax_head_rows", "_hadamard_fp8_head_rows")


@pytest.mark.parametrize("granularity, d, rope, variant, num_warps, want", [
    # with RoPE at d <= 128, variant None: DEFAULT_ROPE_LAUNCH (H200 run 32's fastest)
    ("token", 128, True, None, None, [("_hadamard_fp8_token_rows", 64, 2, None)]),
    ("token", 64, True, None, 4, [("_hadamard_fp8_token_rows", 128, 4, None)]),  # rows scale with the warps
    ("head", 128, True, None, None, [("_hadamard_amax_head", 64, 4, 128), ("_hadamard_fp8_head", 64, 4, 128)]),
    # without RoPE, at d256, or a named variant: as before
    ("token", 128, False, None, None, [("_hadamard_fp8_token", 64, 4, None)]),
    ("head", 128, False, None, None, [("_hadamard_amax_head", 128, 4, None), ("_hadamard_fp8_head", 128, 4, None)]),
    ("token", 256, True, None, None, [("_hadamard_fp8_token", 64, 4, None)]),
    ("token", 128, True, "run25", None, [("_hadamard_fp8_token", 64, 4, None)]),
    ("head", 128, True, "lean", None, [("_hadamard_amax_head", 64, 4, None), ("_hadamard_fp8_head", 64, 4, None)]),
])
def test_default_launch(monkeypatch, granularity, d, rope, variant, num_warps, want):
    calls = []
    for name in KERNELS:
        monkeypatch.setattr(H, name, _Recorder(name, calls))
    monkeypatch.setattr(H, "_INTERPRET", False)
    x = torch.zeros(1, 8, 2, d, dtype=torch.bfloat16)
    tables = dict(zip(("cos", "sin"), rope_tables(8, d))) if rope else {}
    H.hadamard_quantize_fp8(x, granularity, variant=variant, num_warps=num_warps, check_finite=False, **tables)
    assert [(name, kw["BLOCK_S"], kw["num_warps"], kw.get("maxnreg")) for name, kw in calls] == want
    if rope and d <= 128 and variant is None:  # the table says which variant: its flags reach the kernel
        flags = H.VARIANTS[H.DEFAULT_ROPE_LAUNCH[granularity][0]]
        assert all(kw.get("SIGN_BITS", False) == flags["SIGN_BITS"] for name, kw in calls if "amax" not in name)
