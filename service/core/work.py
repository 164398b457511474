"""Operation and byte counts of one kernel execution on one GPU."""

from __future__ import annotations

from typing import NamedTuple


class Work(NamedTuple):
    """What one execution of a kernel does on one GPU.

    Attributes:
        tensor_flops: tensor-core operations, 2 x multiply-accumulates [FLOP].
        padded_tensor_flops: the same with GEMM rows padded to the tile height [FLOP]; sets
            compute time only (padding moves no extra bytes).
        cuda_core_ops: elementwise/reduction arithmetic on the vector units [op].
        special_function_ops: exp, rsqrt, tanh on the special-function units [op].
        weight_bytes: weights read [B].
        activation_read_bytes / activation_write_bytes: activations read / written [B].
        kv_cache_read_bytes / kv_cache_write_bytes: KV cache read / written [B].
        network_bytes: bytes this GPU sends over the interconnect [B].
        collective_steps: sequential hops of a collective (each pays a link latency).
    """

    tensor_flops: float = 0.0
    padded_tensor_flops: float = 0.0
    cuda_core_ops: float = 0.0
    special_function_ops: float = 0.0
    weight_bytes: float = 0.0
    activation_read_bytes: float = 0.0
    activation_write_bytes: float = 0.0
    kv_cache_read_bytes: float = 0.0
    kv_cache_write_bytes: float = 0.0
    network_bytes: float = 0.0
    collective_steps: float = 0.0

    @property
    def memory_bytes(self) -> float:
        return (
            self.weight_bytes
            + self.activation_read_bytes
            + self.activation_write_bytes
            + self.kv_cache_read_bytes
            + self.kv_cache_write_bytes
        )

    def scaled(self, factor: float) -> Work:
        """Every count multiplied by `factor`."""
        return Work(*(value * factor for value in self))

    def plus(self, other: Work) -> Work:
        return Work(*(a + b for a, b in zip(self, other, strict=True)))

    def minus(self, other: Work) -> Work:
        return Work(*(a - b for a, b in zip(self, other, strict=True)))


WORK_FIELDS: tuple[str, ...] = Work._fields
MEMORY_FIELDS = slice(4, 9)
"""Columns of a Work row that are bytes through device memory."""
