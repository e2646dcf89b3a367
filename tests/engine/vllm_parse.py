"""Parse a `vllm serve` argument list with vLLM's own parser (run in the engine's environment) and print
the parsed settings as JSON. Usage: python vllm_parse.py '["MODEL", "--flag", "value", ...]'"""

import json
import sys

from vllm.entrypoints.launchers.cli_args import make_arg_parser
from vllm.utils.argparse_utils import FlexibleArgumentParser

parser = make_arg_parser(FlexibleArgumentParser())
args = parser.parse_args(json.loads(sys.argv[1]))
keys = ("tensor_parallel_size", "pipeline_parallel_size", "gpu_memory_utilization", "max_model_len", "max_num_seqs",
        "max_num_batched_tokens", "block_size", "dtype", "kv_cache_dtype", "kv_cache_memory_bytes", "enforce_eager",
        "speculative_config", "quantization")
print(json.dumps({key: getattr(args, key, None) for key in keys}, default=str))
