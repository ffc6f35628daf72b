"""Custom ops that stand in for aten ops while tracing: same schema, CPU kernel the real aten
op, so make_fx records one node where the aten op would decompose (or read values)."""
import torch

_libs = {}


def define(namespace, schemas, real_of):
    """Defines namespace::<key> for each {key: schema} once; real_of(key) is the aten op
    whose kernel each runs."""
    if namespace in _libs:
        return
    lib = torch.library.Library(namespace, "DEF")
    for key, schema in schemas.items():
        lib.define(schema)

        def impl(*args, _real=real_of(key), **kwargs):
            return _real(*args, **kwargs)
        lib.impl(key, impl, "CPU")
    _libs[namespace] = lib
