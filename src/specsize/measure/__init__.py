"""Optional: real runs with PyTorch (specsize[measure]) to check the memory model."""
