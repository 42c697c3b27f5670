"""Atrium benchmarks (DESIGN §9): `make bench` runs them on both profiles.

Not part of `make test`. Every budget is measured against a floor taken in the same run
(see bench/README.md).
"""
