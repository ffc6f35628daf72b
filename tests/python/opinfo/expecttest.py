"""Stand-in for the `expecttest` package (pip), which Debian's python3-torch needs for
torch.testing._internal.common_utils but does not ship; common_utils only subclasses
TestCase and reads/writes ACCEPT. Used by opinfo_sweep.py to reach OpInfo's op_db."""
import unittest

ACCEPT = False


class TestCase(unittest.TestCase):
    pass
