#!/usr/bin/env python3
# Seeds for the gguf and sentencepiece fuzz targets: small GGUF v3 files (every metadata value type, arrays,
# F32/F16/Q8_0 tensors, a custom alignment) and SentencePiece ModelProto files, written from their specs.
import struct, sys

def s(x): b = x.encode(); return struct.pack('<Q', len(b)) + b

def kv(key, t, payload): return s(key) + struct.pack('<I', t) + payload

def gguf(path, kvs, tensors, alignment=32):
    head = b'GGUF' + struct.pack('<IQQ', 3, len(tensors), len(kvs)) + b''.join(kvs)
    data = b''
    infos = b''
    for name, dims, typ, payload in tensors:
        off = len(data)
        infos += s(name) + struct.pack('<I', len(dims)) + b''.join(struct.pack('<Q', d) for d in dims) + struct.pack('<IQ', typ, off)
        data += payload + b'\0' * ((-len(payload)) % alignment)
    h = head + infos
    h += b'\0' * ((-len(h)) % alignment)
    open(path, 'wb').write(h + data)

out, sp = sys.argv[1], sys.argv[2]
strings = lambda xs: struct.pack('<IQ', 8, len(xs)) + b''.join(s(x) for x in xs)
meta = [kv('general.architecture', 8, s('llama')), kv('llama.block_count', 4, struct.pack('<I', 1)),
        kv('llama.attention.head_count', 4, struct.pack('<I', 2)), kv('llama.rope.freq_base', 6, struct.pack('<f', 1e4)),
        kv('tokenizer.ggml.model', 8, s('gpt2')), kv('tokenizer.ggml.tokens', 9, strings(['a', 'b', '<s>'])),
        kv('tokenizer.ggml.token_type', 9, struct.pack('<IQ', 5, 3) + struct.pack('<3i', 1, 1, 3)),
        kv('tokenizer.ggml.scores', 9, struct.pack('<IQ', 6, 3) + struct.pack('<3f', 0, -1, -2)),
        kv('tokenizer.ggml.add_bos_token', 7, b'\1'), kv('x.u8', 0, b'\7'), kv('x.i8', 1, b'\xff'),
        kv('x.u16', 2, struct.pack('<H', 7)), kv('x.i16', 3, struct.pack('<h', -7)), kv('x.i32', 5, struct.pack('<i', -7)),
        kv('x.u64', 10, struct.pack('<Q', 7)), kv('x.i64', 11, struct.pack('<q', -7)), kv('x.f64', 12, struct.pack('<d', 0.5)),
        kv('x.bools', 9, struct.pack('<IQ', 7, 2) + b'\1\0')]
q8 = (struct.pack('<e', 0.25) + bytes(range(32))) * 2
tensors = [('token_embd.weight', [4, 3], 0, struct.pack('<12f', *range(12))),
           ('blk.0.attn_q.weight', [4, 4], 1, struct.pack('<16e', *range(16))),
           ('blk.0.ffn_gate_exps.weight', [32, 1, 2], 8, q8),
           ('output_norm.weight', [4], 30, b'\0\x3f' * 4)]
gguf(out + '/llama_small.gguf', meta, tensors)
gguf(out + '/aligned_64.gguf', meta[:2] + [kv('general.alignment', 4, struct.pack('<I', 64))], tensors[:2], 64)
gguf(out + '/empty.gguf', [], [])

def varint(v):
    v &= (1 << 64) - 1
    b = b''
    while True:
        c = v & 0x7f; v >>= 7
        b += bytes([c | (0x80 if v else 0)])
        if not v: return b
def field(n, w): return varint(n << 3 | w)
def ld(n, b): return field(n, 2) + varint(len(b)) + b
def piece(t, score, typ): return ld(1, ld(1, t.encode()) + field(2, 5) + struct.pack('<f', score) + (field(3, 0) + varint(typ) if typ != 1 else b''))
trainer = field(3, 0) + varint(2) + field(40, 0) + varint(0) + field(41, 0) + varint(1) + field(42, 0) + varint(2) + field(43, 0) + varint(-1)
model = piece('<unk>', 0, 2) + piece('<s>', 0, 3) + piece('</s>', 0, 3) + piece('\u2581a', -2.5, 1) + piece('<0x41>', 0, 6)
open(sp + '/bpe.model', 'wb').write(model + ld(2, trainer) + ld(3, field(3, 0) + varint(1)))
open(sp + '/pieces_only.model', 'wb').write(model)
