"""Cluster bring-up: the emulated edge cluster (network namespaces)."""
