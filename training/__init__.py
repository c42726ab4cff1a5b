"""crossreg training: the tiny default model and the Cross-Regression predictive-stream adapter.

Commands (run from the repository root):
  python3 -m training corpus ...          (= python3 -m training.corpus)
  python3 -m training pretrain ...        (= python3 -m training.pretrain)
  python3 -m training distill ...         (= python3 -m training.distill)
  python3 -m training export-fixture ...  (= python3 -m training.export_fixture)
"""
