"""Shipped data: Atre et al.'s anonymised 5K-request trace (Clear BSD, CMU 2020; licence beside it)."""
