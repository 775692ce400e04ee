"""Where loops' machine code comes from and how it is kept: the compiler (memory, numba's
on-disk cache or a child process), the cache's key and lock, the seal every numba module
ends with, literal widening, and the C entry conventions of direct calls and replays."""
