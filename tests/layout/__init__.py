"""Tests of torch_mydev.layout against the flags and strides torch reports on CPU."""
