"""Thin command modules for `tao` and `tao-run`: parse, call, print."""
