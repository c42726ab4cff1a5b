"""Wall-clock budget for a training run (`--time-budget-s`).

The GPU machine runs one command for at most 10 minutes, and a run cut off there loses its
model. So a trainer with a budget stops taking steps while `reserve` seconds are still left
for what must follow (final evaluation, checkpoint, export), measured as the run goes.
Counted from the trainer's main(), so interpreter start-up and imports (a few seconds) are
outside it: the scripts pass the command's limit minus a margin.
"""
import math
import time

from .common import fmt_eta


class TimeBudget:
    def __init__(self, total_s: float, reserve_s: float):
        self.total = float(total_s)        # <= 0: unlimited
        self.reserve = self.min_reserve = float(reserve_s)
        self.t0 = time.time()

    @property
    def enabled(self) -> bool:
        return self.total > 0

    def elapsed(self) -> float:
        return time.time() - self.t0

    def left(self) -> float:
        return self.total - self.elapsed() if self.enabled else math.inf

    def allows(self, cost_s: float) -> bool:
        """True when something taking cost_s seconds still leaves the reserve afterwards."""
        return self.left() - cost_s >= self.reserve

    def set_need(self, seconds: float) -> None:
        """Reserve what the ending was last measured to need (e.g. 1.5x the latest evaluation
        plus checkpoint), never less than the reserve asked for. The latest measurement wins:
        the first evaluation of a compiled model also pays for its compilation."""
        self.reserve = max(self.min_reserve, seconds)

    def spendable(self) -> float:
        """Seconds that may still go to training steps (the reserve excluded)."""
        return self.left() - self.reserve

    def describe(self) -> str:
        if not self.enabled:
            return ""
        return f"budget {fmt_eta(self.elapsed())}/{fmt_eta(self.total)}"


def fit_steps(step: int, spendable_s: float, step_s: float, eval_every: int,
              eval_cost_steps: float, margin: float = 0.97) -> int:
    """The total step count (`--auto-steps`) whose remaining training steps, plus an evaluation
    every eval_every steps costing eval_cost_steps steps' time each, fit in spendable_s seconds
    (with a margin for jitter). Fixing it once, early, keeps the LR schedule a plain cosine."""
    per_step = step_s * (1.0 + (eval_cost_steps / eval_every if eval_every > 0 else 0.0))
    return step + max(int(spendable_s * margin / max(per_step, 1e-9)), 0)
