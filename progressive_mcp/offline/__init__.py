"""Offline stand-ins for upstream APIs, for tests, demos and benchmarks (never part of the Lambda asset)."""
