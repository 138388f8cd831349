"""Checking devices against golden answers: colibri-test, its pytest plugin and the golden suites."""
