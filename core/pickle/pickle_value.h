// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "model/dtype.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tessera {

struct PyValue;
using PyRef = std::shared_ptr<PyValue>;

/// A reference to a storage record of a torch.save archive (the persistent id of a tensor's storage).
struct StorageRef {
    std::string key;           ///< record name below `data/`
    DType dtype = DType::UInt8;///< element type of the storage class (uint8 for UntypedStorage)
    std::uint64_t numel = 0;   ///< elements of `dtype` (bytes for UntypedStorage)
    std::string location;      ///< "cpu", "cuda:0", …
};

/// A plain tensor as torch.save describes it: a view into a storage. No data is read.
struct TensorRef {
    std::shared_ptr<StorageRef> storage; ///< null for meta tensors
    DType dtype = DType::Unknown;
    std::int64_t storageOffset = 0;      ///< in elements
    std::vector<std::int64_t> shape;
    std::vector<std::int64_t> strides;   ///< in elements
};

/// A value produced by the restricted unpickler. Python objects the allow-list knows become typed values;
/// other classes become inert `Object` records (class name, constructor args, state); no code ever runs.
struct PyValue {
    enum class Kind {
        None,
        Bool,
        Int,     ///< fits in int64; `bigInt` holds the little-endian bytes when it does not
        Float,
        Str,
        Bytes,
        Tuple,
        List,
        Dict,    ///< dict and OrderedDict, insertion order kept
        Set,
        Global,  ///< a class or function reference: module + name
        Object,  ///< an inert instance: cls (Global), args, state
        Dtype,
        Storage,
        Tensor,
    };

    PyValue() = default;
    /// Frees the values only this one owns link by link: a hostile pickle can nest 200,000 lists, and the
    /// implicit destructor would recurse once per level and overflow the stack.
    ~PyValue();
    PyValue(const PyValue&) = default;
    PyValue(PyValue&&) = default;
    PyValue& operator=(const PyValue&) = default;
    PyValue& operator=(PyValue&&) = default;

    Kind kind = Kind::None;
    bool boolean = false;
    std::int64_t integer = 0;
    double real = 0.0;
    std::string text;                              ///< Str, Bytes, and bigInt bytes for Int
    bool bigInt = false;
    std::vector<PyRef> items;                      ///< Tuple, List, Set
    std::vector<std::pair<PyRef, PyRef>> entries;  ///< Dict
    std::string module, name;                      ///< Global; for Object the class
    PyRef args;                                    ///< Object: constructor arguments (a Tuple)
    PyRef state;                                   ///< Object: BUILD state; Dict: attributes set by BUILD
    DType dtype = DType::Unknown;                  ///< Dtype
    std::shared_ptr<StorageRef> storage;           ///< Storage
    std::shared_ptr<TensorRef> tensor;             ///< Tensor
    int depth = 0;                                 ///< nesting depth, bounded by the unpickler
    std::uint8_t visitState = 0;                   ///< scratch for the unpickler's cycle check

    bool isNone() const { return kind == Kind::None; }
    bool isStr() const { return kind == Kind::Str; }
    bool isInt() const { return kind == Kind::Int && !bigInt; }
    bool isSequence() const { return kind == Kind::Tuple || kind == Kind::List; }
    /// "module.name" for Global and Object values, "" otherwise.
    std::string qualifiedName() const { return module.empty() ? name : module + "." + name; }
    /// The class name's last component ("DTensor" for torch.distributed.tensor.DTensor).
    std::string shortName() const;
    /// Dict lookup by string key; nullptr when absent or not a dict.
    PyRef get(const std::string& key) const;
    /// For an Object: the attribute `key` from its BUILD state, looking through (dict, slots) tuples.
    PyRef attr(const std::string& key) const;
    /// A short Python-like rendering for messages and debugging (truncated).
    std::string repr(int maxDepth = 3) const;
};

/// Whether `a` and `b` are the same Python value: same kinds and scalars, containers equal item by item (dicts in
/// order), objects of the same class with equal arguments and state. Tensors compare by dtype, shape, strides and
/// storage size only (their data is not read). Walks without recursion, so any nesting is safe.
bool sameValue(const PyRef& a, const PyRef& b);

/// Helpers to read typed values out of PyRefs safely.
bool toInt(const PyRef& value, std::int64_t& out);
bool toIntList(const PyRef& value, std::vector<std::int64_t>& out); ///< tuple/list of ints (torch.Size too)
bool toString(const PyRef& value, std::string& out);

} // namespace tessera
