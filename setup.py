"""Maps the design card's top-level folders into the ``zyfa`` namespace.

The tree keeps ``kernels/``, ``trace/``, ``analyzer/`` and ``webui/`` beside ``zyfa/`` so the layout
reads like the design card, but they install as ``zyfa.kernels``, ``zyfa.trace``, ... : a top-level
``trace`` module would shadow the standard library's. Subpackages are discovered, not listed.
"""

from setuptools import find_packages, setup

NAMESPACE_ROOTS = {
    "zyfa": "zyfa",
    "zyfa.kernels": "kernels",
    "zyfa.trace": "trace",
    "zyfa.analyzer": "analyzer",
    "zyfa.webui": "webui",
}

packages = []
for name, folder in NAMESPACE_ROOTS.items():
    packages.append(name)
    packages += [f"{name}.{sub}" for sub in find_packages(folder)]

setup(packages=packages, package_dir=NAMESPACE_ROOTS)
