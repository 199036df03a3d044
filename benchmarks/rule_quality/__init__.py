"""Rule quality on real PyTorch training runs: a labelled suite of faulty runs and healthy twins,
the built-in rules run over each, recall / false alarms / detection latency per rule.

Run ``python benchmarks/rule_quality/run.py [--quick] [--out DIR]``.
"""
