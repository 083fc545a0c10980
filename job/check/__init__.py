"""Checks of a spec as data: no file, environment, network or code is touched."""
