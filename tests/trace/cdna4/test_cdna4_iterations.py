"""The trace's ``iteration`` is one 128-key tile, also for the generator's loop unrolled by two:
the cycle model, the generator's static counts and the analyzer agree on "VALU cycles per block"."""

from zyfa.analyzer import summary
from zyfa.kernels.gfx950 import config_for
from zyfa.kernels.gfx950.counts import tile_counts
from zyfa.kernels.gfx950.generator import generate
from zyfa.shapes import parse_shape
from zyfa.trace.cdna4.tracer import simulate


def test_iteration_is_one_tile_and_matches_static_counts():
    shape = parse_shape("1k", heads=1)
    trace, _ = simulate("zyfa-fp8", shape)
    df = trace.df
    static = tile_counts(generate(config_for("zyfa-fp8", shape)))
    softmax = df[(df.unit == "VALU") & (df.region == "softmax_j")]
    per_tile = (softmax.end - softmax.start).groupby([softmax.wave, softmax.iteration]).sum()
    assert len(per_tile) > 8 * 2
    assert set(per_tile.tolist()) == {static.valu_cycles}
    # one softmax_j instance per (wave, iteration): its first instruction appears once
    first_pc = softmax.groupby([softmax.wave, softmax.iteration]).pc.min()
    assert (softmax[softmax.pc == first_pc.iloc[0]].groupby(["wave", "iteration"]).size() == 1).all()
    # the analyzer's per-block figure counts every VALU op of a tile (softmax, mask on the
    # diagonal, bookkeeping), so it is at least the softmax cost
    assert summary(trace, "steady")["valu_cycles_per_block"] >= static.valu_cycles
