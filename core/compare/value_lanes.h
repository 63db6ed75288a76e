// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// Four float64 lanes for the statistics kernel (value_kernel.cpp only), in two shapes with one set of operations:
// Wide, one 32-byte vector, which AVX2 runs as single instructions; and Split, two 16-byte halves, which SSE2 (every
// x86-64) and NEON (every arm64) run as they are — GCC would break a 32-byte vector into scalars there. Lane i is the
// same element in both and every operation is the same IEEE operation lane by lane, so both give the same bits.
// Everything here is always inlined: compiled into the AVX2 entry point it becomes AVX2 code, into the portable one
// baseline code.

#include <cstdint>
#include <cstring>

#define TESSERA_LANES inline __attribute__((always_inline))

namespace tessera::lanes {

constexpr std::uint64_t kLanes = 4;

/// One 32-byte vector of four doubles, and of four 64-bit masks (a true lane is all ones: −1).
struct Wide {
    typedef double Lanes __attribute__((vector_size(32)));
    typedef std::int64_t Mask __attribute__((vector_size(32)));
};

TESSERA_LANES Wide::Lanes select(const Wide::Mask& m, const Wide::Lanes& a, const Wide::Lanes& b) { return m ? a : b; }
TESSERA_LANES Wide::Mask select(const Wide::Mask& m, const Wide::Mask& a, const Wide::Mask& b) { return m ? a : b; }

/// Lanes 0–1 in `lo`, 2–3 in `hi`: the same 32 bytes as Wide.
struct Split {
    typedef double Half __attribute__((vector_size(16)));
    typedef std::int64_t HalfMask __attribute__((vector_size(16)));
    struct Lanes {
        Half lo, hi;
    };
    struct Mask {
        HalfMask lo, hi;
    };
};

#define TESSERA_SPLIT_OP(Result, Operand, op)                                                                        \
    TESSERA_LANES Split::Result operator op(const Split::Operand& a, const Split::Operand& b)                        \
    {                                                                                                                \
        return { a.lo op b.lo, a.hi op b.hi };                                                                       \
    }
#define TESSERA_SPLIT_ASSIGN(Operand, op)                                                                            \
    TESSERA_LANES Split::Operand& operator op##=(Split::Operand& a, const Split::Operand& b) { return a = a op b; }

TESSERA_SPLIT_OP(Lanes, Lanes, +)
TESSERA_SPLIT_OP(Lanes, Lanes, -)
TESSERA_SPLIT_OP(Lanes, Lanes, *)
TESSERA_SPLIT_OP(Lanes, Lanes, /)
TESSERA_SPLIT_OP(Mask, Lanes, <)
TESSERA_SPLIT_OP(Mask, Lanes, >)
TESSERA_SPLIT_OP(Mask, Lanes, <=)
TESSERA_SPLIT_OP(Mask, Lanes, ==)
TESSERA_SPLIT_OP(Mask, Lanes, !=)
TESSERA_SPLIT_OP(Mask, Mask, &)
TESSERA_SPLIT_OP(Mask, Mask, ^)
TESSERA_SPLIT_OP(Mask, Mask, +)
TESSERA_SPLIT_OP(Mask, Mask, -)
TESSERA_SPLIT_ASSIGN(Lanes, +)
TESSERA_SPLIT_ASSIGN(Mask, +)
TESSERA_SPLIT_ASSIGN(Mask, -)

#undef TESSERA_SPLIT_OP
#undef TESSERA_SPLIT_ASSIGN

TESSERA_LANES Split::Mask operator~(const Split::Mask& a) { return { ~a.lo, ~a.hi }; }
TESSERA_LANES Split::Mask operator|(const Split::Mask& a, const Split::Mask& b) { return { a.lo | b.lo, a.hi | b.hi }; }
// By bits (a lane of a mask is all ones or all zeros): SSE2 has no blend, and GCC would pick lane by lane.
TESSERA_LANES Split::Mask select(const Split::Mask& m, const Split::Mask& a, const Split::Mask& b)
{
    return (m & a) | (~m & b);
}
TESSERA_LANES Split::Lanes select(const Split::Mask& m, const Split::Lanes& a, const Split::Lanes& b)
{
    Split::Mask bits[2];
    std::memcpy(&bits[0], &a, sizeof a);
    std::memcpy(&bits[1], &b, sizeof b);
    const Split::Mask chosen = select(m, bits[0], bits[1]);
    Split::Lanes out;
    std::memcpy(&out, &chosen, sizeof out);
    return out;
}

static_assert(sizeof(Wide::Lanes) == 32 && sizeof(Wide::Mask) == 32 && sizeof(Split::Lanes) == 32
                  && sizeof(Split::Mask) == 32,
              "four 8-byte lanes, lane i at bytes 8i…8i+7, in both shapes");

/// Four lanes from memory (any alignment).
template <typename T>
TESSERA_LANES T load(const void* p)
{
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

/// The lanes as an array, lane i at [i].
template <typename E, typename T>
TESSERA_LANES void store(const T& v, E (&out)[kLanes])
{
    static_assert(sizeof(out) == sizeof(v), "four 8-byte lanes");
    std::memcpy(out, &v, sizeof v);
}

/// `e` in every lane.
template <typename T, typename E>
TESSERA_LANES T broadcast(E e)
{
    const E all[kLanes] = { e, e, e, e };
    return load<T>(all);
}

/// The same 32 bytes as another type.
template <typename To, typename From>
TESSERA_LANES To bitCast(const From& f)
{
    return load<To>(&f);
}

} // namespace tessera::lanes
