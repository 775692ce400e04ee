"""The test suite as a package: helpers import as ``tests.<layer>.<module>``."""
