"""Tests of torch_mydev_rules.layout against the flags and strides torch reports on CPU."""
