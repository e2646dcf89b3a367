"""specsize: will a speculative-decoding deployment fit, with headroom, at the load you expect?"""

__version__ = "0.1.0"
