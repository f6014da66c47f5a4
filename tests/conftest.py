import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import flowgrad  # noqa: E402,F401 - registers its warning filter before pytest collects
