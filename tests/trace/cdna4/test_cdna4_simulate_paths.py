"""One simulate path: ``zyfa-trace kernel``, the sweep evaluator and the web UI's what-if give
byte-identical traces for the same inputs (they all call ``zyfa.trace.cdna4.tracer.simulate``);
the launch the model runs carries the generator's cluster tags on its instructions."""

import io
from dataclasses import replace

import pyarrow as pa
import pytest

from zyfa.cli import trace_main
from zyfa.kernels import registry
from zyfa.shapes import AttnShape, parse_shape
from zyfa.sweep_eval import simulate as sweep_simulate
from zyfa.trace.cdna4 import tracer
from zyfa.trace.cdna4.estimate import estimate
from zyfa.trace.cdna4.launch import from_description, prepare
from zyfa.trace.schema import Trace
from zyfa.webui.whatif import WhatIf
from zyfa.webui.whatif import simulate as whatif_simulate

SHAPE_FIELDS = {"seqlen": 1024, "batch": 1, "heads": 1}  # b1 h1 s1024 d128 causal fp8


def _records_bytes(trace: Trace) -> bytes:
    """The records as Arrow IPC bytes (no schema metadata): equal bytes = identical records."""
    sink = io.BytesIO()
    table = trace.table.replace_schema_metadata(None)
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def _saved(trace: Trace, folder) -> Trace:
    return Trace.load(tracer.save(trace, folder))


def _meta(trace: Trace, *drop) -> dict:
    meta = trace.meta.to_dict()
    for key in ("provenance",) + drop:  # provenance: the command line, commit and date of the run
        meta.pop(key)
    return meta


def _cli(tmp_path, *args) -> Trace:
    out = tmp_path / "cli"
    parser, modules = trace_main.build_parser("kernel")
    parsed = parser.parse_args(["kernel", "--shape", "1k", "--batch", "1", "--heads", "1", "-o", str(out), *args])
    assert modules["kernel"].run(parsed) == 0
    (path,) = out.glob("*.parquet")
    return Trace.load(path)


@pytest.mark.parametrize("params", [{}, {"schedule": "serial"}], ids=["as-registered", "schedule=serial"])
def test_cli_sweep_and_whatif_give_identical_traces(tmp_path, params):
    whatif = _saved(whatif_simulate(WhatIf("zyfa-fp8", seqlen=1024, params=params)), tmp_path / "whatif")
    sweep, _ = sweep_simulate(SHAPE_FIELDS, params)
    sweep = _saved(sweep, tmp_path / "sweep")
    assert len(whatif) > 1000
    assert _records_bytes(sweep) == _records_bytes(whatif)
    # the sweep names its kernels after their parameters ("sweep_..."), the what-if after the variant
    assert _meta(sweep, "kernel") == _meta(whatif, "kernel")
    if not params:  # the CLI runs registered kernels as registered
        cli = _cli(tmp_path)
        assert _records_bytes(cli) == _records_bytes(whatif)
        assert _meta(cli) == _meta(whatif)
        assert cli.meta.kernel == whatif.meta.kernel == "zyfa-fp8"
    else:
        assert whatif.meta.kernel == "zyfa-fp8[schedule=serial]"


def test_overrides_are_checked():
    with pytest.raises(ValueError, match="unknown generator parameter"):
        whatif_simulate(WhatIf("zyfa-fp8", seqlen=256, params={"tile": 3}))
    with pytest.raises(ValueError, match="Unknown KernelConfig.schedule"):
        whatif_simulate(WhatIf("zyfa-fp8", seqlen=256, params={"schedule": "zigzag"}))


def test_cluster_tags_travel_with_the_instructions_and_a_mismatch_raises():
    desc = registry.resolve("zyfa-fp8", AttnShape(batch=1, heads=1, heads_k=1, seqlen_q=256, seqlen_k=256))
    launch = from_description(desc)
    tags = desc.build.meta["instruction_clusters"]
    assert [inst.cluster for inst in launch.program.instructions] == tags == launch.regions
    wrong = replace(desc, build=replace(desc.build, meta={**desc.build.meta, "instruction_clusters": tags[:-1]}))
    with pytest.raises(ValueError, match=r"cluster tags for \d+ instructions"):
        from_description(wrong)


def test_gfx950_kernels_state_their_work_axis_as_the_probe_finds_it():
    """The generator's build meta states the query-block axis (x) as the one that sets a
    workgroup's work, so the estimate simulates no probe along heads; the probe, run by dropping
    the statement, picks the same axis and gives the same kernel cycles."""
    launch = prepare("zyfa-fp8", parse_shape("2k", heads=2))
    assert launch.meta["work_axis"] == 0
    stated = estimate(launch)
    probed = estimate(replace(launch, meta={k: v for k, v in launch.meta.items() if k != "work_axis"}))
    assert "work axis probed" in probed.notes[1] and "work axis probed" not in stated.notes[1]
    assert probed.work_axis == stated.work_axis == 0
    assert probed.cycles == stated.cycles and probed.samples == stated.samples
    assert stated.simulated < probed.simulated  # the heads probe is not simulated
