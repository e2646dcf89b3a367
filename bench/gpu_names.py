"""The catalog GPU each published GPU name stands for, one map for the accuracy benches (bench/accuracy_serving.py,
bench/accuracy_speedup.py): the names their sources print ("H100", "A100 40GB", "RTX PRO 6000 Blackwell")."""

GPUS = {"H100": "H100-SXM-80GB", "H100 80GB": "H100-SXM-80GB", "H200": "H200-141GB", "A100": "A100-80GB",
        "A100 40GB": "A100-40GB", "A100-40GB": "A100-40GB", "A100 80GB PCIe": "A100-80GB-PCIe", "B200": "B200-180GB",
        "GB200": "GB200-186GB", "MI300X": "MI300X-192GB", "MI325X": "MI325X-256GB", "MI355X": "MI355X-288GB",
        "L4": "L4-24GB", "RTX 4090": "RTX-4090-24GB", "RTX 3090": "RTX-3090-24GB",
        "RTX PRO 6000 Blackwell": "RTX-PRO-6000-96GB"}
