"""Reads one string from a GGUF file's metadata (enough for the chat-template
test: it needs `tokenizer.chat_template` of real model files)."""
import struct

_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def _read_str(f):
    (n,) = struct.unpack("<Q", f.read(8))
    return f.read(n).decode("utf-8")


def _skip(f, t):
    if t == 8:
        _read_str(f)
    elif t == 9:
        et, n = struct.unpack("<IQ", f.read(12))
        if et == 8:
            for _ in range(n):
                _read_str(f)
        elif et in _SIZES:
            f.seek(_SIZES[et] * n, 1)
        else:
            for _ in range(n):
                _skip(f, et)
    else:
        f.seek(_SIZES[t], 1)


def read_string(path, key):
    """The string value of `key`, or None when the file has no such key."""
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise ValueError(path + " is not a GGUF file")
        _version, _n_tensors, n_kv = struct.unpack("<IQQ", f.read(20))
        for _ in range(n_kv):
            k = _read_str(f)
            (t,) = struct.unpack("<I", f.read(4))
            if k == key and t == 8:
                return _read_str(f)
            _skip(f, t)
    return None
