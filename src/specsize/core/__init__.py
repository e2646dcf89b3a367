"""Pure calculation core: specs, weights, KV cache, memory accounting, envelope. No I/O, no imports of ours from above."""
