"""The runtime that builds ``torch.mydev``, named and behaving as ``torch.cuda``: ``module``
(the device module: memory, RNG, synchronisation), ``devices`` (which devices exist, the
current one), ``streams`` (streams and events), ``device_info`` (device context managers
and properties), ``lazy_init`` (initialisation and fork poisoning), ``autocast``, and
``surface``, which installs the functions of the others."""
