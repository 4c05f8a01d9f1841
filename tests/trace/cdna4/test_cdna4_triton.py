"""A Triton AOT gfx950 attention kernel (compiled on this CPU) through the front end and model."""

import re
import struct

import pytest

from zyfa.gfx950.isa import disassemble, parse_asm
from zyfa.trace.cdna4.sim import CUSim

BLOCK_M, BLOCK_N, D = 128, 64, 128


@pytest.fixture(scope="module")
def triton_attn(tmp_path_factory, llvm_tools):
    triton = pytest.importorskip("triton")
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    @triton.jit
    def attn_fwd(Q, K, V, O, seqlen, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr):
        pid = tl.program_id(0)
        offs_m = pid * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = tl.arange(0, BLOCK_N)
        offs_d = tl.arange(0, D)
        q = tl.load(Q + offs_m[:, None] * D + offs_d[None, :])
        m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
        l_i = tl.zeros([BLOCK_M], tl.float32)
        acc = tl.zeros([BLOCK_M, D], tl.float32)
        for start in range(0, (pid + 1) * BLOCK_M, BLOCK_N):  # causal: key blocks up to the diagonal
            k = tl.load(K + (start + offs_n)[None, :] * D + offs_d[:, None])
            s = tl.dot(q, k)
            s = tl.where(offs_m[:, None] >= (start + offs_n)[None, :], s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            p = tl.exp2(s - m_new[:, None])
            alpha = tl.exp2(m_i - m_new)
            l_i = l_i * alpha + tl.sum(p, 1)
            v = tl.load(V + (start + offs_n)[:, None] * D + offs_d[None, :])
            acc = acc * alpha[:, None] + tl.dot(p.to(tl.bfloat16), v)
            m_i = m_new
        tl.store(O + offs_m[:, None] * D + offs_d[None, :], (acc / l_i[:, None]).to(tl.bfloat16))

    signature = {"Q": "*bf16", "K": "*bf16", "V": "*bf16", "O": "*bf16", "seqlen": "i32",
                 "BLOCK_M": "constexpr", "BLOCK_N": "constexpr", "D": "constexpr"}
    src = ASTSource(attn_fwd, signature, {"BLOCK_M": BLOCK_M, "BLOCK_N": BLOCK_N, "D": D})
    compiled = triton.compile(src, target=GPUTarget("hip", "gfx950", 64))
    root = tmp_path_factory.mktemp("triton")
    hsaco = root / "attn.hsaco"
    hsaco.write_bytes(compiled.asm["hsaco"])
    return hsaco, compiled.asm["amdgcn"]


def test_triton_assembly_text_matches_its_assembled_code_object(triton_attn, assemble):
    _, amdgcn = triton_attn
    co = assemble(re.sub(r"^\s*\.amdgcn_target.*$", "", amdgcn, flags=re.M))  # triple spelled for llvm-mc-22
    dis, src = disassemble(co), parse_asm(amdgcn)
    base = dis.instructions[0].pc
    at = {i.pc - base: i.opcode for i in dis.instructions}
    assert all(at.get(i.pc) == i.opcode for i in src.instructions)  # same opcode at every .s offset
    index = {i.pc: n for n, i in enumerate(dis.instructions)}
    assert {index[src.instructions[b].pc + base]: index[src.instructions[t].pc + base]
            for b, t in src.branch_targets.items()} == dis.branch_targets
    assert src.descriptor.workgroup_size == dis.descriptor.workgroup_size == 256


def test_triton_causal_trip_counts(triton_attn):
    hsaco, _ = triton_attn
    program = disassemble(hsaco)
    layout = program.descriptor.sgpr_layout()
    assert layout["workgroup_id_x"] == layout["kernarg_preload"] + program.descriptor.get("user_sgpr_kernarg_preload_length")
    kernarg = struct.pack("<QQQQiiQQ", 1 << 40, 2 << 40, 3 << 40, 4 << 40, 1024, 0, 0, 0)
    per_block = 2 * (2 * BLOCK_M * BLOCK_N * D)  # QK^T and PV of one 64-key block
    cycles = []
    for pid in (0, 3):
        result = CUSim(program, kernarg, [(pid, 0, 0)], 256).run()
        # program pid walks keys 0 .. (pid+1)*128: 2 * (pid + 1) blocks of 64
        assert result.mfma_flops(program) == 2 * (pid + 1) * per_block
        cycles.append(result.cycles)
    assert cycles[1] > cycles[0]
