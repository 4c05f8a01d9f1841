"""Functional (value) emulation of gfx950 code: see README.md in this folder."""
