"""The seed article's 2-D linear regression: now shipped as :mod:`murphy.demos.linear_regression`
(the image ``murphy/linear-regression-demo:latest`` runs it). This file stays so that scripts and
examples that import ``linear_regression`` from here, or run it as a SageMaker script-mode entry
point (hyperparameters as ``--name value``), keep working.
"""

from __future__ import annotations

from murphy.demos.linear_regression import LinearRegression, TF1Adam, main, train

__all__ = ["LinearRegression", "TF1Adam", "main", "train"]

if __name__ == "__main__":
    main()
