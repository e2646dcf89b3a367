"""Units: bytes are ints inside; GiB = 2**30, GB = 10**9; time is seconds."""

GiB = 1 << 30
MiB = 1 << 20
GB = 10**9


def gib(n_bytes: int | float) -> float:
    return n_bytes / GiB


def from_gib(value: float) -> int:
    return int(round(value * GiB))


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)
