"""Names the device goes by: the one place that spells them (imports nothing)."""

DEVICE = "mydev"  # the device string: torch.device("mydev"), Tensor.mydev(), torch.mydev
