"""Proving a level: which path the requests took, from the servers' own counters, and when not to trust it."""
