import os
import sys

# tests/launch.py is imported as a helper module by the tests beside it.
sys.path.insert(0, os.path.dirname(__file__))
