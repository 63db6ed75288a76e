// SPDX-License-Identifier: GPL-3.0-or-later
// Hostile pickles for the corruption matrix: payloads that would run code under Python's pickle, structures
// built to exhaust the stack, memory or time of a naive reader, and real torch.save pickles whose first tensor
// is rewritten with impossible sizes, strides and offsets. Built opcode by opcode so that each case is exactly
// the attack it names.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessera::test::pickle {

/// Appends pickle opcodes (protocol 2, plus the protocol 4 opcodes a case needs).
class Writer {
public:
    Writer() { m_b += "\x80\x02"; }
    Writer& op(char code) { m_b.push_back(code); return *this; }
    Writer& mark() { return op('('); }
    Writer& text(const std::string& s)
    {
        op('X');
        put32(std::uint32_t(s.size()));
        m_b += s;
        return *this;
    }
    Writer& shortText(const std::string& s) // SHORT_BINUNICODE, protocol 4
    {
        op('\x8c');
        m_b.push_back(char(s.size()));
        m_b += s;
        return *this;
    }
    Writer& global(const std::string& module, const std::string& name)
    {
        m_b += "c" + module + "\n" + name + "\n";
        return *this;
    }
    Writer& integer(std::int64_t v)
    {
        m_b += encodeInt(v);
        return *this;
    }
    Writer& put(std::uint32_t index) { op('r'); put32(index); return *this; }  // LONG_BINPUT
    Writer& get(std::uint32_t index) { op('j'); put32(index); return *this; }  // LONG_BINGET
    Writer& raw(const std::string& bytes) { m_b += bytes; return *this; }
    std::string stop() { return m_b + "."; }
    const std::string& bytes() const { return m_b; }

    /// The shortest opcode for `v`: BININT1, BININT2, BININT or LONG1 (little-endian two's complement).
    static std::string encodeInt(std::int64_t v)
    {
        std::string s;
        if (v >= 0 && v < 256) {
            s += 'K';
            s.push_back(char(v));
        } else if (v >= 0 && v < 65536) {
            s += 'M';
            s.push_back(char(v & 0xFF));
            s.push_back(char(v >> 8));
        } else if (v >= INT32_MIN && v <= INT32_MAX) {
            s += 'J';
            for (int i = 0; i < 4; ++i)
                s.push_back(char((std::uint32_t(v) >> (8 * i)) & 0xFF));
        } else {
            s += "\x8a\x08";
            for (int i = 0; i < 8; ++i)
                s.push_back(char((std::uint64_t(v) >> (8 * i)) & 0xFF));
        }
        return s;
    }
    /// LONG1 of an integer wider than 64 bits: `bytes` little-endian bytes of 0x7f (a huge positive number).
    static std::string hugeInt(int bytes)
    {
        std::string s = "\x8a";
        s.push_back(char(bytes));
        s.append(std::size_t(bytes), '\x7f');
        return s;
    }

private:
    void put32(std::uint32_t v)
    {
        for (int i = 0; i < 4; ++i)
            m_b.push_back(char((v >> (8 * i)) & 0xFF));
    }
    std::string m_b;
};

/// os.system("touch MARKER"): the classic __reduce__ payload.
inline std::string osSystem(const std::string& marker)
{
    return Writer().global("os", "system").text("touch " + marker).op('\x85').op('R').stop();
}

/// posix.system through STACK_GLOBAL (protocol 4), which takes module and name from the stack, not the opcode.
inline std::string stackGlobalSystem(const std::string& marker)
{
    return Writer().shortText("posix").shortText("system").op('\x93').text("touch " + marker).op('\x85').op('R').stop();
}

/// INST (protocol 0): instantiates a class by name with arguments, a path that skips GLOBAL and REDUCE.
inline std::string instSystem(const std::string& marker)
{
    return Writer().mark().text("touch " + marker).raw("ios\nsystem\n").stop();
}

/// shutil.rmtree(DIR) wrapped in a state dict value: a module that is not obviously dangerous by name.
inline std::string rmtreeInStateDict(const std::string& victimDir)
{
    return Writer()
        .op('}')
        .text("model.embed_tokens.weight")
        .global("shutil", "rmtree")
        .text(victimDir)
        .op('\x85')
        .op('R')
        .op('s')
        .stop();
}

/// builtins.getattr(builtins, "eval"): reaching a denied function through an allowed-looking one.
inline std::string getattrEval(const std::string& marker)
{
    return Writer()
        .global("builtins", "getattr")
        .global("builtins", "__import__")
        .text("os")
        .op('\x85')
        .op('R')
        .text("system")
        .op('\x86')
        .op('R')
        .text("touch " + marker)
        .op('\x85')
        .op('R')
        .stop();
}

/// `depth` lists nested inside each other (APPEND), far deeper than any state dict.
inline std::string deepLists(int depth)
{
    Writer w;
    std::string lists(std::size_t(depth), ']');
    std::string appends(std::size_t(depth - 1), 'a');
    return w.raw(lists).raw(appends).stop();
}

/// `depth` tuples nested through MARK … TUPLE.
inline std::string deepTuples(int depth)
{
    Writer w;
    return w.raw(std::string(std::size_t(depth), '(')).raw(std::string(std::size_t(depth), 't')).stop();
}

/// Billion laughs: each level is a list of ten references to the level below, so the value is a few hundred
/// bytes but `levels` levels stand for 10^levels leaves to a reader that walks it as a tree.
inline std::string billionLaughs(int levels, const std::string& key)
{
    Writer w;
    w.op(']').text("lol").op('a').put(0);
    for (int level = 1; level <= levels; ++level) {
        w.mark();
        for (int i = 0; i < 10; ++i)
            w.get(std::uint32_t(level - 1));
        w.op('l').put(std::uint32_t(level));
    }
    Writer top;
    // { key: laughs } so that a reader walking the state dict meets it.
    return top.op('}').text(key).raw(w.bytes().substr(2)).op('s').stop();
}

/// A memo store at index 2^32-1, which a reader that sizes its memo table by the index would allocate.
inline std::string hugeMemoPut()
{
    return Writer().op('}').put(0xFFFFFFFFu).stop();
}

/// A memo fetch of an index that was never stored.
inline std::string memoGetNeverStored()
{
    return Writer().op('}').get(0xFFFFFFF0u).stop();
}

/// The first `keep` bytes of a pickle: it ends without STOP.
inline std::string cut(const std::string& pickle, std::size_t keep) { return pickle.substr(0, keep); }

// ---- editing real torch.save and DCP pickles ------------------------------------------------------------------

/// An integer operand's place in a pickle.
struct IntSlot {
    std::size_t pos = 0;  ///< offset of the opcode
    std::size_t len = 0;  ///< opcode plus operand
};

/// The integers of the first `_rebuild_tensor_v2` call: the storage's declared element count, the storage
/// offset, the sizes and the strides.
struct FirstTensor {
    IntSlot numel;
    IntSlot storageOffset;
    std::vector<IntSlot> sizes;
    std::vector<IntSlot> strides;
};

/// Length of the opcode at `pos` with its operand, for the opcodes torch.save's pickles use; 0 if unknown.
inline std::size_t opLength(const std::string& p, std::size_t pos)
{
    // Operand bytes past the end read as 0; the caller then finds the length runs past the end.
    auto byte = [&](std::size_t at) { return at < p.size() ? std::size_t(std::uint8_t(p[at])) : std::size_t(0); };
    auto u32 = [&](std::size_t at) { return byte(at) | byte(at + 1) << 8 | byte(at + 2) << 16 | byte(at + 3) << 24; };
    const auto code = std::uint8_t(p[pos]);
    switch (code) {
    case '}': case ']': case ')': case '(': case 't': case 0x85: case 0x86: case 0x87: case 0x88: case 0x89:
    case 'R': case 'b': case 'u': case 's': case 'e': case 'a': case 'Q': case 'N': case 0x81: case '.': case '0':
    case '2': case 'l': case 'd': case 0x94: case 0x93: case '1': case 'o': case 0x8f: case 0x90: case 0x91:
    case 0x92: case 0x97: case 0x98:
        return 1;
    case 0x95: // FRAME
        return 9;
    case 'q': case 'h': case 'K': case 0x80:
        return 2;
    case 'M':
        return 3;
    case 'r': case 'j': case 'J':
        return 5;
    case 'G':
        return 9;
    case 'X': case 'T': case 'B':
        return 5 + u32(pos + 1);
    case 'U': case 'C': case 0x8c: case 0x8a:
        return 2 + byte(pos + 1);
    case 0x8b: // LONG4
        return 5 + u32(pos + 1);
    case 0x8d: case 0x8e: case 0x96: { // BINUNICODE8, BINBYTES8, BYTEARRAY8
        std::size_t n = 0;
        for (int i = 7; i >= 0; --i)
            n = (n << 8) | byte(pos + 1 + std::size_t(i));
        return 9 + n;
    }
    case 'c': {
        const auto first = p.find('\n', pos);
        const auto second = first == std::string::npos ? first : p.find('\n', first + 1);
        return second == std::string::npos ? 0 : second + 1 - pos;
    }
    default:
        return 0;
    }
}

inline bool isIntOp(std::uint8_t code) { return code == 'K' || code == 'M' || code == 'J' || code == 0x8a; }
inline bool isTupleOp(std::uint8_t code) { return code == 't' || code == 0x85 || code == 0x86 || code == 0x87; }

/// Finds the integers of the first tensor rebuilt in `p`; nullopt if the pickle is not shaped as torch writes it.
inline std::optional<FirstTensor> findFirstTensor(const std::string& p)
{
    const std::string global = "ctorch._utils\n_rebuild_tensor_v2\n";
    std::size_t pos = p.find(global);
    if (pos == std::string::npos)
        return std::nullopt;
    pos += global.size();
    FirstTensor t;
    enum class Want { Numel, Offset, Sizes, Strides, Done } want = Want::Numel;
    std::optional<IntSlot> lastInt;
    while (pos < p.size() && want != Want::Done) {
        const std::size_t len = opLength(p, pos);
        if (len == 0 || pos + len > p.size())
            return std::nullopt;
        const auto code = std::uint8_t(p[pos]);
        if (isIntOp(code)) {
            const IntSlot slot { pos, len };
            if (want == Want::Numel)
                lastInt = slot;
            else if (want == Want::Offset) {
                t.storageOffset = slot;
                want = Want::Sizes;
            } else if (want == Want::Sizes)
                t.sizes.push_back(slot);
            else
                t.strides.push_back(slot);
        } else if (code == 'Q') { // BINPERSID: the storage tuple just closed; its last integer was the numel
            if (!lastInt)
                return std::nullopt;
            t.numel = *lastInt;
            want = Want::Offset;
        } else if (isTupleOp(code) || code == ')') {
            if (want == Want::Sizes)
                want = Want::Strides;
            else if (want == Want::Strides)
                want = Want::Done;
        }
        pos += len;
    }
    if (want != Want::Done || t.sizes.empty())
        return std::nullopt;
    return t;
}

/// The opcode positions of a pickle, in order up to STOP (empty if an opcode is not one the test knows).
inline std::vector<std::size_t> opcodePositions(const std::string& p)
{
    std::vector<std::size_t> positions;
    std::size_t pos = 0;
    while (pos < p.size()) {
        const std::size_t len = opLength(p, pos);
        if (len == 0 || pos + len > p.size())
            return {};
        positions.push_back(pos);
        if (p[pos] == '.')
            break;
        pos += len;
    }
    return positions;
}

/// The first integer pushed after the string `key` (a dict key or attribute name, BINUNICODE or
/// SHORT_BINUNICODE): the value stored under that key when it is a plain integer.
inline std::optional<IntSlot> intAfterKey(const std::string& p, const std::string& key)
{
    const auto ops = opcodePositions(p);
    for (std::size_t i = 0; i < ops.size(); ++i) {
        const std::size_t pos = ops[i];
        const auto code = std::uint8_t(p[pos]);
        const std::size_t header = code == 'X' ? 5 : code == 0x8c ? 2 : 0;
        if (!header || opLength(p, pos) != header + key.size() || p.compare(pos + header, key.size(), key) != 0)
            continue;
        for (std::size_t j = i + 1; j < ops.size() && j < i + 64; ++j)
            if (isIntOp(std::uint8_t(p[ops[j]])))
                return IntSlot { ops[j], opLength(p, ops[j]) };
        return std::nullopt;
    }
    return std::nullopt;
}

/// `p` with the first BINUNICODE string that contains `needle` rewritten with `needle` replaced by `with`.
inline std::string replaceInFirstText(const std::string& p, const std::string& needle, const std::string& with)
{
    for (std::size_t pos : opcodePositions(p)) {
        if (p[pos] != 'X')
            continue;
        const std::size_t len = opLength(p, pos) - 5;
        std::string text = p.substr(pos + 5, len);
        const auto at = text.find(needle);
        if (at == std::string::npos)
            continue;
        text.replace(at, needle.size(), with);
        return p.substr(0, pos) + Writer().text(text).bytes().substr(2) + p.substr(pos + 5 + len);
    }
    return {};
}

/// `p` with the integer at `slot` replaced by the encoding `encoded` (lengths may differ; the memo is untouched).
inline std::string replaceInt(const std::string& p, const IntSlot& slot, const std::string& encoded)
{
    return p.substr(0, slot.pos) + encoded + p.substr(slot.pos + slot.len);
}

} // namespace tessera::test::pickle
