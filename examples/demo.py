"""`make demo`: the mydev device end to end, as far as the project goes today."""

import torch


def main() -> None:
    backend = torch._C._get_privateuse1_backend_name()
    print(f"torch {torch.__version__}; device backend: {backend}")
    mydev = torch.mydev
    print(f"torch.mydev: available={mydev.is_available()}, count={mydev.device_count()}")
    baseline = torch.mydev.memory_allocated()

    x = torch.empty(2, 3, 4, 5, device="mydev", memory_format=torch.channels_last)
    storage = x.untyped_storage()
    print("\nx = torch.empty(2, 3, 4, 5, device='mydev', memory_format=torch.channels_last)")
    print(f"  device={x.device} dtype={x.dtype} shape={tuple(x.shape)} stride={x.stride()}")
    print(f"  storage: data_ptr=0x{storage.data_ptr():x} nbytes={storage.nbytes()}")
    print(
        f"  is_contiguous()={x.is_contiguous()} "
        f"channels_last={x.is_contiguous(memory_format=torch.channels_last)}"
    )

    print("\nmemory_stats while x lives:")
    for key, value in torch.mydev.memory_stats().items():
        print(f"  {key:32s} {value}")
    del x, storage
    print(f"\nafter del x: memory_allocated={torch.mydev.memory_allocated()} (baseline {baseline})")


if __name__ == "__main__":
    main()
