"""The design-card folders install inside the zyfa namespace; nothing shadows the stdlib."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import zyfa

ROOT = Path(__file__).resolve().parents[1]


def test_namespace_mapping():
    for name, folder in [("zyfa.kernels", "kernels"), ("zyfa.trace", "trace"),
                         ("zyfa.analyzer", "analyzer"), ("zyfa.webui", "webui")]:
        spec = importlib.util.find_spec(name)
        assert spec is not None, name
        assert Path(spec.origin).parent.name == folder


def test_no_top_level_trace_or_kernels_module():
    # Run from / so the source checkout is not on sys.path: only installed packages are visible.
    code = (
        "import importlib.util, trace, sys\n"
        "assert trace.__file__.startswith(sys.base_prefix) or 'python3' in trace.__file__, trace.__file__\n"
        "assert hasattr(trace, 'Trace') and hasattr(trace, 'CoverageResults'), 'stdlib trace shadowed'\n"
        "for name in ('kernels', 'analyzer', 'webui'):\n"
        "    assert importlib.util.find_spec(name) is None, name\n"
        "import zyfa.trace\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd="/", check=True)


def test_cli_help_runs():
    out = subprocess.run([sys.executable, "-m", "zyfa.cli.trace_main", "--help"], capture_output=True, text=True, check=True)
    assert "zyfa-trace" in out.stdout and "demo" in out.stdout


def test_version():
    assert zyfa.__version__
