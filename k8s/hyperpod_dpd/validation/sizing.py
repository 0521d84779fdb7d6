"""Sizing rules (weights that do not fit, a PD buffer too small for one request) live here."""
