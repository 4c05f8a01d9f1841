"""``zyfa-ui`` / ``zyfa-trace ui`` command line: help, argument errors, and a live smoke run."""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from zyfa.cli import ui_main
from zyfa.kernels.baseline import default_pairs
from zyfa.webui.app import prepare
from zyfa.webui.whatif import default_simulator


def test_help_of_both_entry_points():
    for argv in (["-m", "zyfa.cli.ui_main", "--help"], ["-m", "zyfa.cli.trace_main", "ui", "--help"]):
        out = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert "--trace-dir" in out.stdout and "127.0.0.1" in out.stdout


def test_bad_arguments_exit_2_with_a_message(tmp_path, capsys):
    assert ui_main.main(["--port", "70000"]) == 2
    assert "--port must be in 0..65535" in capsys.readouterr().err
    assert ui_main.main([str(tmp_path / "missing.parquet")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert ui_main.main(["--trace-dir", str(tmp_path / "nodir")]) == 2
    assert "not a directory" in capsys.readouterr().err


def test_startup_skips_and_lists_unreadable_traces(tmp_path, make_trace, capsys):
    """A corrupt file, a dangling symlink, a FIFO and a directory named *.parquet are skipped (never
    opened: a FIFO would block) and listed, by relative name; the good trace is served."""
    make_trace("zyfa-fp8").save(tmp_path / "good")
    (tmp_path / "broken.parquet").write_bytes(b"PAR1 truncated")
    os.symlink(tmp_path / "gone.parquet", tmp_path / "dangling.parquet")
    os.mkfifo(tmp_path / "fifo.parquet")
    (tmp_path / "dir.parquet").mkdir()
    parser = argparse.ArgumentParser()
    ui_main.add_arguments(parser)
    args = parser.parse_args(["--trace-dir", str(tmp_path), "--port", "0"])
    args.seqlen = 256
    server, status = prepare(args)
    try:
        assert status == 0 and server is not None
        err = capsys.readouterr().err
        for name in ("broken.parquet", "dangling.parquet", "fifo.parquet", "dir.parquet"):
            assert f"skipped {name}: " in err, (name, err)
        assert str(tmp_path) not in err  # relative names only
        assert [e.label for e in server.app_store.entries()] == ["good.parquet"]
        assert set(server.app_store.skipped) == {"broken.parquet", "dangling.parquet", "fifo.parquet", "dir.parquet"}
    finally:
        server.close()


def test_serves_the_page_on_loopback(tmp_path, make_trace):
    make_trace("zyfa-fp8").save(tmp_path / "zyfa")
    proc = subprocess.Popen([sys.executable, "-m", "zyfa.cli.ui_main", str(tmp_path / "zyfa.parquet"), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        match = re.search(r"open (http://127\.0\.0\.1:\d+)/", line)
        assert match, (line, proc.stderr.read() if proc.poll() is not None else "")
        url = match.group(1)
        with urllib.request.urlopen(url + "/", timeout=30) as resp:
            assert b"zyfa schedule explorer" in resp.read()
        with urllib.request.urlopen(url + "/_dash-layout", timeout=30) as resp:
            assert b"zyfa.parquet" in resp.read()
        with urllib.request.urlopen(url + "/traces/zyfa.parquet", timeout=30) as resp:
            assert resp.read()[:4] == b"PAR1"
        with pytest.raises(urllib.error.HTTPError) as err:  # no trace directory: nothing else is served
            urllib.request.urlopen(url + "/traces/zyfa.json", timeout=30)
        assert err.value.code == 403
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_without_traces_starts_from_the_clis_default_pairs():
    """No trace: the page simulates zyfa-trace kernel's default pairs (zyfa.kernels.baseline.default_pairs,
    computed here in the same environment), shows the first as A and B, and labels a reconstruction."""
    if default_simulator()[0] is None:
        pytest.skip("the CDNA4 cycle model is not available")
    pairs, _ = default_pairs()
    kernels = [k for pair in pairs for k in (pair.ours, pair.baseline)]
    proc = subprocess.Popen([sys.executable, "-m", "zyfa.cli.ui_main", "--port", "0", "--shape", "256"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        while not lines or "open http" not in lines[-1]:
            line = proc.stdout.readline()
            assert line, (lines, proc.stderr.read())
            lines.append(line)
        assert "default pairs" in lines[0]
        simulated = [ln for ln in lines if "zyfa-ui: simulating " in ln]
        assert [ln.split("zyfa-ui: simulating ")[1].split(" · ")[0] for ln in simulated] == kernels
        assert all("b1 h1 s256 d128" in ln for ln in simulated)
        url = re.search(r"open (http://127\.0\.0\.1:\d+)/", lines[-1]).group(1)
        with urllib.request.urlopen(url + "/_dash-layout", timeout=30) as resp:
            layout = json.loads(resp.read().decode())
        dropdowns = {}

        def walk(node):
            if isinstance(node, dict):
                props = node.get("props") or {}
                if props.get("id") in ("trace-a", "trace-b"):
                    dropdowns[props["id"]] = props
                for v in node.values():
                    walk(v)
            elif isinstance(node, list):
                for v in node:
                    walk(v)
        walk(layout)
        labels = {o["value"]: o["label"] for o in dropdowns["trace-a"]["options"]}
        first = pairs[0]
        assert labels[dropdowns["trace-a"]["value"]].startswith(f"simulated: {first.ours} ")
        assert labels[dropdowns["trace-b"]["value"]].startswith(f"simulated: {first.baseline} ")
        for pair in pairs:  # the baseline's label says what it is (a reconstruction says so)
            assert any(label.startswith(f"simulated: {pair.baseline} ") and label.endswith(f"({pair.label})")
                       for label in labels.values())
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_bad_shape_exits_2(capsys):
    assert ui_main.main(["--shape", "12q"]) == 2
    assert "bad sequence length" in capsys.readouterr().err


@pytest.mark.parametrize("host", ["no-such-host.invalid", "192.0.2.1"])  # unknown name; TEST-NET-1, not ours
def test_unusable_host_is_one_line_before_simulating(tmp_path, capsys, monkeypatch, host):
    """werkzeug printed the bare reason (the resolver's or the kernel's words) and exited 1."""
    monkeypatch.setattr("zyfa.webui.app.default_simulator", lambda: pytest.fail("simulated before refusing"))
    assert ui_main.main(["--host", host, "--port", "0", "--trace-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"zyfa-ui: cannot listen on --host {host} --port 0: ")


def test_port_in_use_is_one_line(tmp_path, capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert ui_main.main(["--port", str(port), "--trace-dir", str(tmp_path), "--no-simulate"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"cannot listen on --host 127.0.0.1 --port {port}: Address already in use" in err
