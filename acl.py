"""``import acl``: the seed's ACL-style runtime, provided by ``ge.runtime.acl``."""

import sys

from ge.runtime import acl as _acl

sys.modules[__name__] = _acl
