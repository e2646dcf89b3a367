"""Parse a `vllm serve` argument list with vLLM's own parser (run in the engine's environment) and print
the parsed settings as JSON. Usage: python vllm_parse.py '["MODEL", "--flag", "value", ...]'
With --batch-defaults WORLD_SIZE...: the release's default max_num_seqs and max_num_batched_tokens for `vllm serve`
(UsageContext.OPENAI_API_SERVER) on this platform, per world size (TP x PP), from EngineArgs.get_batch_defaults (a
classmethod: no model read), and the release's version."""

import json
import sys


def batch_defaults(world_sizes: list[int]) -> dict:
    import vllm
    from vllm.engine.arg_utils import EngineArgs
    from vllm.usage.usage_lib import UsageContext

    defaults = {}
    for world_size in world_sizes:
        tokens, seqs = EngineArgs.get_batch_defaults(world_size)
        defaults[world_size] = [seqs[UsageContext.OPENAI_API_SERVER], tokens[UsageContext.OPENAI_API_SERVER]]
    return {"version": vllm.__version__, "defaults": defaults}


def parsed(argv: list[str]) -> dict:
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser())
    args = parser.parse_args(argv)
    keys = ("tensor_parallel_size", "pipeline_parallel_size", "gpu_memory_utilization", "max_model_len",
            "max_num_seqs", "max_num_batched_tokens", "block_size", "dtype", "kv_cache_dtype", "kv_cache_memory_bytes",
            "enforce_eager", "speculative_config", "quantization")
    return {key: getattr(args, key, None) for key in keys}


if sys.argv[1] == "--batch-defaults":
    print(json.dumps(batch_defaults([int(size) for size in sys.argv[2:]])))
else:
    print(json.dumps(parsed(json.loads(sys.argv[1])), default=str))
