"""Bare hosts over SSH: inventory, preflight checks, tuning."""
