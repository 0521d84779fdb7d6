"""Reporting a run: the tables, the A/B and the advisor beside it, repeats, capacity at the SLO, cost, the HTML page."""
