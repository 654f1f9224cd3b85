"""Keyed state: key-group assignment and Java-compatible hashing."""
