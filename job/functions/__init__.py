"""Vectorised scalar functions behind Daggers SQL built-ins (S2 cell ids, ...)."""
