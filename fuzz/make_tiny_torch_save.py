# SPDX-License-Identifier: GPL-3.0-or-later
# make_tiny_torch_save.py DIR: writes tiny torch.save archives (and their data.pkl) as seeds for the fuzz
# targets, without torch: stand-in modules named torch and torch._utils make pickle write the same globals,
# persistent ids and records torch.save writes, with a few bytes of storage instead of real weights.

import io, pickle, struct, sys, types, zipfile, collections

def mod(name):
    m = types.ModuleType(name); sys.modules[name] = m; return m
torch = mod('torch'); utils = mod('torch._utils')
def _rebuild_tensor_v2(*a): pass
_rebuild_tensor_v2.__module__ = 'torch._utils'; utils._rebuild_tensor_v2 = _rebuild_tensor_v2
def storage_class(name):  # stand-in for torch.FloatStorage and friends
    c = type(name, (), {}); c.__module__ = 'torch'; setattr(torch, name, c); return c

class T:
    def __init__(self, cls, key, numel, offset, shape, strides):
        self.cls, self.key, self.numel, self.offset, self.shape, self.strides = cls, key, numel, offset, shape, strides
    def __reduce__(self):
        st = StorageRef(self.cls, self.key, self.numel)
        return (_rebuild_tensor_v2, (st, self.offset, self.shape, self.strides, False, collections.OrderedDict()))
class StorageRef:
    def __init__(self, cls, key, numel): self.cls, self.key, self.numel = cls, key, numel

class P(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, StorageRef):
            return ('storage', obj.cls, obj.key, 'cpu', obj.numel)
        return None

def save(path, obj, storages, prefix='archive'):
    buf = io.BytesIO(); P(buf, protocol=2).dump(obj)
    with zipfile.ZipFile(path, 'w', zipfile.ZIP_STORED) as z:
        z.writestr(prefix + '/data.pkl', buf.getvalue())
        z.writestr(prefix + '/byteorder', b'little')
        for key, data in storages.items():
            z.writestr(prefix + '/data/' + key, data)
        z.writestr(prefix + '/version', b'3\n')
    return buf.getvalue()

F = storage_class('FloatStorage'); B = storage_class('BFloat16Storage'); L = storage_class('LongStorage')
sd = collections.OrderedDict()
sd['model.norm.weight'] = T(F, '0', 4, 0, (4,), (1,))
sd['model.embed_tokens.weight'] = T(B, '1', 6, 0, (3, 2), (2, 1))
sd['lm_head.weight'] = T(B, '1', 6, 2, (2, 2), (1, 2))
sd['step'] = 10
pk = save(sys.argv[1] + '/tiny_state_dict.pt', sd, {'0': struct.pack('<4f', 1, 2, 3, 4), '1': bytes(range(12))})
open(sys.argv[1] + '/tiny_state_dict.pkl', 'wb').write(pk)
one = T(L, '0', 3, 0, (3,), (1,))
pk = save(sys.argv[1] + '/tiny_tensor.pt', one, {'0': struct.pack('<3q', 5, 6, 7)}, prefix='tiny_tensor')
open(sys.argv[1] + '/tiny_tensor.pkl', 'wb').write(pk)
