"""Load results, draw plots."""
