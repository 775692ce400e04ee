"""torch.library registrations of mydev's Python kernels, one module per op family."""
