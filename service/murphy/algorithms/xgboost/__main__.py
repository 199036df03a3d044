"""``python -m murphy.algorithms.xgboost``: train the built-in XGBoost algorithm."""

import sys

from murphy.algorithms.xgboost.train import main

sys.exit(main())
