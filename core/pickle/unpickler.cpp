// SPDX-License-Identifier: GPL-3.0-or-later
#include "pickle/unpickler.h"
#include "io/printable.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <optional>
#include <cmath>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

namespace tessera {

namespace {

using K = PyValue::Kind;

/// Bump allocation for the many small values one pickle produces: a state dict of 100,000 tensors makes millions
/// of them, and malloc/free per value (plus glibc growing thread arenas page by page) dominated scan time.
/// Memory is returned when the last value of the pickle is destroyed; each value's control block holds the arena.
class ValueArena {
public:
    void* allocate(std::size_t bytes, std::size_t align)
    {
        std::size_t at = (m_used + align - 1) / align * align;
        if (m_blocks.empty() || at + bytes > m_capacity) {
            // Most pickles are small (one tensor's record in a DCP file): blocks grow from 16 KiB to 1 MiB. They
            // are left uninitialised (values are constructed in them): zeroing a fresh block costs a page fault
            // per 4 KiB, which under AddressSanitizer's quarantine is paid again for every pickle read.
            m_capacity = std::max(m_blocks.empty() ? kFirstBlockSize : std::min(2 * m_capacity, kMaxBlockSize), bytes);
            m_blocks.push_back(std::unique_ptr<std::uint8_t[]>(new std::uint8_t[m_capacity]));
            at = 0;
        }
        m_used = at + bytes;
        return m_blocks.back().get() + at;
    }

private:
    static constexpr std::size_t kFirstBlockSize = 16 << 10;
    static constexpr std::size_t kMaxBlockSize = 1 << 20;
    std::vector<std::unique_ptr<std::uint8_t[]>> m_blocks;
    std::size_t m_capacity = 0;
    std::size_t m_used = 0;
};

template <typename T>
struct ArenaAllocator {
    using value_type = T;
    std::shared_ptr<ValueArena> arena;
    explicit ArenaAllocator(std::shared_ptr<ValueArena> a) : arena(std::move(a)) { }
    template <typename U>
    ArenaAllocator(const ArenaAllocator<U>& other) : arena(other.arena) { }
    T* allocate(std::size_t n) { return static_cast<T*>(arena->allocate(n * sizeof(T), alignof(T))); }
    void deallocate(T*, std::size_t) noexcept { }
    template <typename U>
    bool operator==(const ArenaAllocator<U>& other) const { return arena == other.arena; }
    template <typename U>
    bool operator!=(const ArenaAllocator<U>& other) const { return arena != other.arena; }
};

// The arena of the pickle being read on this thread; values made outside an unpickle() call use the heap.
thread_local std::shared_ptr<ValueArena> t_arena;

/// Every value that can hold others, made while the pickle on this thread is read. A cycle that the pickle makes
/// unreachable afterwards (a list appended to itself, then its memo slot overwritten) is found only among all
/// of them, not among what the stack and memo still reach; and shared ownership would never free it.
thread_local std::vector<PyRef>* t_containers = nullptr;

bool canHoldValues(K kind)
{
    switch (kind) {
    case K::None:
    case K::Bool:
    case K::Int:
    case K::Float:
    case K::Str:
    case K::Bytes:
        return false;
    default:
        return true;
    }
}

PyRef makeValue(K kind)
{
    auto v = t_arena ? std::allocate_shared<PyValue>(ArenaAllocator<PyValue>(t_arena)) : std::make_shared<PyValue>();
    v->kind = kind;
    if (t_containers && canHoldValues(kind))
        t_containers->push_back(v);
    return v;
}

/// Small integers and the empty tuple are immutable, so one shared value serves every occurrence
/// (shapes, strides and offsets are mostly small ints).
PyRef makeInt(std::int64_t i)
{
    static const std::vector<PyRef> cache = [] {
        std::vector<PyRef> values;
        for (std::int64_t k = -1; k < 1024; ++k) {
            auto v = std::make_shared<PyValue>();
            v->kind = K::Int;
            v->integer = k;
            values.push_back(std::move(v));
        }
        return values;
    }();
    if (i >= -1 && i < 1023)
        return cache[static_cast<std::size_t>(i + 1)];
    auto v = makeValue(K::Int);
    v->integer = i;
    return v;
}

PyRef emptyTuple()
{
    static const PyRef empty = [] {
        auto v = std::make_shared<PyValue>();
        v->kind = K::Tuple;
        return v;
    }();
    return empty;
}

PyRef makeStr(std::string s, K kind = K::Str)
{
    auto v = makeValue(kind);
    v->text = std::move(s);
    return v;
}

// Modules whose globals are never accepted, whatever the name: importing them is how malicious pickles run code.
bool isDeniedModule(const std::string& module)
{
    static const std::unordered_set<std::string> denied { "os", "posix", "nt", "sys", "subprocess", "shutil",
        "socket", "importlib", "runpy", "pickle", "_pickle", "marshal", "code", "codeop", "ctypes", "pty",
        "webbrowser", "multiprocessing", "signal", "types", "inspect", "commands", "platform", "popen2",
        "asyncio", "threading", "_thread", "tempfile", "glob", "pathlib._abc", "urllib", "http", "ftplib",
        "smtplib", "telnetlib", "operator", "functools", "sysconfig", "site", "distutils", "setuptools", "pip",
        "timeit", "pdb", "bdb", "trace", "cProfile", "profile", "zipimport", "pkgutil", "gc", "weakref", "io",
        "_io", "builtins", "__builtin__", "copyreg", "copy_reg" };
    const auto root = module.substr(0, module.find('.'));
    return denied.count(module) || denied.count(root);
}

// Names from builtins/copyreg the machine implements itself without calling anything.
bool isSafeBuiltin(const std::string& module, const std::string& name)
{
    if (module == "builtins")
        return name == "set" || name == "frozenset" || name == "bytearray" || name == "bytes" || name == "complex"
            || name == "getattr" || name == "slice" || name == "object" || name == "dict" || name == "list"
            || name == "tuple" || name == "int" || name == "float" || name == "str" || name == "bool"
            || name == "range";
    if (module == "copyreg")
        return name == "_reconstructor" || name == "__newobj__";
    return false;
}

// Modules whose classes may be "constructed" by REDUCE into inert records: configuration and metadata
// objects that checkpoints carry alongside tensors. The record only stores the arguments.
bool isInertConstructible(const std::string& module)
{
    static const char* prefixes[] = { "argparse", "pathlib", "numpy", "megatron", "transformer_engine", "enum",
        "datetime", "decimal", "fractions", "uuid", "torch.distributed", "torch.utils.checkpoint", "torch.optim",
        "torch.cuda.amp", "torch.amp", "torch.nn.modules", "transformers", "peft", "omegaconf", "collections",
        "random", "verl", "accelerate", "apex", "torchtitan", "_codecs" };
    for (const char* prefix : prefixes) {
        const std::size_t n = std::strlen(prefix);
        if (module.compare(0, n, prefix) == 0 && (module.size() == n || module[n] == '.'))
            return true;
    }
    return false;
}

class Machine {
public:
    Machine(const ByteView& bytes, std::string displayName, const UnpickleLimits& limits)
        : m_bytes(bytes), m_name(std::move(displayName)), m_limits(limits)
    {
    }

    Result<PyRef> run();

private:
    // --- reading -------------------------------------------------------------------------------------------
    bool have(std::uint64_t n) const { return m_bytes.contains(m_pos, n); }
    Error truncated() const
    {
        return makeError(m_name + ": the pickle ends unexpectedly at byte " + std::to_string(m_pos)
                         + " (the file is truncated or damaged)");
    }
    Error malformed(const std::string& what) const
    {
        return makeError(m_name + ": malformed pickle at byte " + std::to_string(m_opPos) + ": " + what);
    }
    template <typename T>
    Result<T> readLe()
    {
        if (!have(sizeof(T)))
            return truncated();
        T v = 0;
        for (std::size_t i = 0; i < sizeof(T); ++i)
            v |= static_cast<T>(static_cast<T>(m_bytes.data()[m_pos + i]) << (8 * i));
        m_pos += sizeof(T);
        return v;
    }
    Result<std::string> readBytes(std::uint64_t n)
    {
        if (!have(n))
            return truncated();
        std::string s(reinterpret_cast<const char*>(m_bytes.data() + m_pos), static_cast<std::size_t>(n));
        m_pos += n;
        return s;
    }
    Result<std::string> readLine()
    {
        const std::uint8_t* start = m_bytes.data() + m_pos;
        const std::uint64_t left = m_bytes.size() - m_pos;
        const void* nl = std::memchr(start, '\n', static_cast<std::size_t>(std::min<std::uint64_t>(left, 1 << 20)));
        if (!nl)
            return truncated();
        const auto len = static_cast<std::uint64_t>(static_cast<const std::uint8_t*>(nl) - start);
        std::string s(reinterpret_cast<const char*>(start), static_cast<std::size_t>(len));
        m_pos += len + 1;
        return s;
    }

    // --- stack ---------------------------------------------------------------------------------------------
    Status push(PyRef v)
    {
        if (m_stack.size() >= m_limits.maxStack)
            return malformed("more than " + std::to_string(m_limits.maxStack) + " values on the stack");
        m_stack.push_back(std::move(v));
        return Status::success();
    }
    Result<PyRef> pop()
    {
        if (m_stack.empty() || (!m_marks.empty() && m_stack.size() <= m_marks.back()))
            return malformed("stack underflow");
        PyRef v = std::move(m_stack.back());
        m_stack.pop_back();
        return v;
    }
    /// Pops the top `n` values; the result lists them deepest first, as they were pushed.
    Result<std::vector<PyRef>> popN(std::size_t n)
    {
        const std::size_t floor = m_marks.empty() ? 0 : m_marks.back();
        if (m_stack.size() < floor + n)
            return malformed("stack underflow");
        std::vector<PyRef> values(std::make_move_iterator(m_stack.end() - static_cast<std::ptrdiff_t>(n)),
                                  std::make_move_iterator(m_stack.end()));
        m_stack.resize(m_stack.size() - n);
        return values;
    }
    Status pushResult(Result<PyRef> value)
    {
        TESSERA_TRY(value);
        return push(std::move(*value));
    }
    /// The operand of BINGET/BINPUT (one byte) or LONG_BINGET/LONG_BINPUT (four bytes).
    Result<std::uint64_t> readMemoIndex(bool wide)
    {
        if (wide) {
            auto i = readLe<std::uint32_t>();
            TESSERA_TRY(i);
            return std::uint64_t(*i);
        }
        auto i = readLe<std::uint8_t>();
        TESSERA_TRY(i);
        return std::uint64_t(*i);
    }
    Result<PyRef> top()
    {
        if (m_stack.empty() || (!m_marks.empty() && m_stack.size() <= m_marks.back()))
            return malformed("stack underflow");
        return m_stack.back();
    }
    Result<std::vector<PyRef>> popMark()
    {
        if (m_marks.empty())
            return malformed("no MARK on the stack");
        const std::size_t mark = m_marks.back();
        m_marks.pop_back();
        if (mark > m_stack.size())
            return malformed("MARK beyond the stack");
        std::vector<PyRef> items(std::make_move_iterator(m_stack.begin() + static_cast<std::ptrdiff_t>(mark)),
                                 std::make_move_iterator(m_stack.end()));
        m_stack.resize(mark);
        return items;
    }
    Status checkDepth(PyRef& parent, const PyRef& child)
    {
        if (child && child->depth + 1 > parent->depth)
            parent->depth = child->depth + 1;
        if (parent->depth > m_limits.maxDepth)
            return malformed("objects nested more than " + std::to_string(m_limits.maxDepth) + " levels deep");
        return Status::success();
    }
    Result<PyRef> makeSequence(K kind, std::vector<PyRef> items)
    {
        auto v = makeValue(kind);
        for (const auto& item : items)
            TESSERA_TRY(checkDepth(v, item));
        v->items = std::move(items);
        return v;
    }

    // --- globals and calls ---------------------------------------------------------------------------------
    Result<PyRef> global(std::string module, std::string name);
    Result<PyRef> reduce(const PyRef& callable, const PyRef& args);
    // reduce()'s families of callables; the std::optional ones give nullopt for a name they do not know, which
    // reduce() then looks up further.
    /// torch._utils' tensor and parameter rebuilders.
    std::optional<Result<PyRef>> reduceTorchUtils(const PyRef& callable, const PyRef& argsValue);
    /// torch._tensor._rebuild_from_type_v2: the inner rebuild, then the subclass it names.
    Result<PyRef> rebuildFromTypeV2(const std::vector<PyRef>& args);
    /// torch.Size, torch.device and torch.serialization._get_layout as plain values.
    std::optional<Result<PyRef>> reduceTorchValue(const std::string& m, const std::string& n,
                                                  const std::vector<PyRef>& args);
    /// OrderedDict, Counter, defaultdict (empty) and dict from their (key, value) pairs.
    Result<PyRef> makeDict(const std::string& n, const std::vector<PyRef>& args);
    /// builtins' containers, bytes, getattr for nested class names, and inert scalars.
    std::optional<Result<PyRef>> reduceBuiltin(const PyRef& callable, const PyRef& argsValue);
    /// builtins.bytes and bytearray from nothing, a string or a list of byte values.
    Result<PyRef> builtinBytes(const std::string& n, const std::vector<PyRef>& args);
    /// _codecs.encode(text, 'latin1'): protocol 2's bytes, the text's UTF-8 decoded back to latin-1.
    Result<PyRef> codecsEncode(const std::vector<PyRef>& args);
    Result<PyRef> newObject(const PyRef& cls, const PyRef& args);
    Status build(const PyRef& target, const PyRef& state);
    Result<PyRef> persistentLoad(const PyRef& pid);
    Result<PyRef> rebuildTensor(const std::vector<PyRef>& args, bool hasDtypeArg);
    Result<PyRef> inertObject(const PyRef& cls, const PyRef& args);

    Status setItems(const PyRef& dict, std::vector<PyRef>& kv);
    Status appendItems(const PyRef& list, std::vector<PyRef>& items);
    Result<PyRef> memoGet(std::uint64_t index);
    Status memoPut(std::uint64_t index, const PyRef& value);

    Status step(std::uint8_t op, bool& stop);
    Result<PyRef> execute();

    ByteView m_bytes;
    std::string m_name;
    UnpickleLimits m_limits;
    std::uint64_t m_pos = 0;
    std::uint64_t m_opPos = 0;
    std::vector<PyRef> m_stack;
    std::vector<std::size_t> m_marks;
    std::vector<PyRef> m_memo;
    std::unordered_map<std::uint64_t, PyRef> m_sparseMemo; // for out-of-order memo indices
    PyRef m_none = makeValue(K::None);
};

Result<PyRef> Machine::memoGet(std::uint64_t index)
{
    if (index < m_memo.size() && m_memo[index])
        return m_memo[index];
    auto it = m_sparseMemo.find(index);
    if (it != m_sparseMemo.end())
        return it->second;
    return malformed("memo entry " + std::to_string(index) + " was never stored");
}

Status Machine::memoPut(std::uint64_t index, const PyRef& value)
{
    if (index >= m_limits.maxMemo)
        return malformed("memo index " + std::to_string(index) + " is too large");
    if (index == m_memo.size())
        m_memo.push_back(value);
    else if (index < m_memo.size())
        m_memo[index] = value;
    else
        m_sparseMemo[index] = value;
    return Status::success();
}

Result<PyRef> Machine::global(std::string module, std::string name)
{
    // Python 2 spellings written by protocol 2 with fix_imports.
    if (module == "__builtin__")
        module = "builtins";
    else if (module == "copy_reg")
        module = "copyreg";
    const bool bytesIO = (module == "io" || module == "_io") && name == "BytesIO"; // old TE _extra_state
    if (isDeniedModule(module) && !isSafeBuiltin(module, name) && !bytesIO)
        return makeError(m_name + ": refusing to load global '" + printableText(module + "." + name)
                         + "': it could run code, and Tessera never runs code from a checkpoint (the file is "
                           "malicious or not a checkpoint)");
    static const std::unordered_set<std::string> deniedNames { "eval", "exec", "compile", "open", "__import__",
        "system", "popen", "execve", "spawn", "load", "loads" };
    if (deniedNames.count(name) && module.compare(0, 5, "torch") != 0)
        return makeError(m_name + ": refusing to load global '" + printableText(module + "." + name)
                         + "': it could run code, and Tessera never runs code from a checkpoint");
    auto v = makeValue(K::Global);
    if (module == "torch") {
        if (auto dtype = dtypeFromTorchName(name)) {
            v->kind = K::Dtype;
            v->dtype = *dtype;
        }
    }
    v->module = std::move(module);
    v->name = std::move(name);
    return v;
}

Result<PyRef> Machine::persistentLoad(const PyRef& pid)
{
    // ('storage', storage_type, key, location, numel) — torch.save's zip format.
    if (!pid || pid->kind != K::Tuple || pid->items.size() < 5 || !pid->items[0]->isStr()
        || pid->items[0]->text != "storage")
        return malformed("unsupported persistent id " + (pid ? pid->repr() : std::string("None"))
                         + " (only torch storages are allowed)");
    const auto& type = pid->items[1];
    auto storage = std::make_shared<StorageRef>();
    std::optional<DType> dtype;
    if (type && (type->kind == K::Global || type->kind == K::Dtype) && type->module == "torch")
        dtype = dtypeFromStorageClass(type->name);
    if (!dtype)
        return malformed("unknown storage type " + (type ? type->repr() : std::string("None")));
    storage->dtype = *dtype;
    std::int64_t numel = 0;
    if (!toString(pid->items[2], storage->key) || !toInt(pid->items[4], numel) || numel < 0)
        return malformed("storage id with a bad key or size: " + pid->repr());
    toString(pid->items[3], storage->location);
    storage->numel = static_cast<std::uint64_t>(numel);
    auto v = makeValue(K::Storage);
    v->storage = std::move(storage);
    return v;
}

Result<PyRef> Machine::rebuildTensor(const std::vector<PyRef>& args, bool hasDtypeArg)
{
    // _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
    // _rebuild_tensor_v3(storage, storage_offset, size, stride, requires_grad, backward_hooks, dtype[, metadata])
    // _rebuild_tensor(storage, storage_offset, size, stride)
    if (args.size() < 4)
        return malformed("tensor rebuild with " + std::to_string(args.size()) + " arguments");
    if (!args[0] || args[0]->kind != K::Storage)
        return malformed("tensor rebuild without a storage");
    auto tensor = std::make_shared<TensorRef>();
    tensor->storage = args[0]->storage;
    tensor->dtype = tensor->storage->dtype;
    if (!toInt(args[1], tensor->storageOffset) || !toIntList(args[2], tensor->shape)
        || !toIntList(args[3], tensor->strides) || tensor->shape.size() != tensor->strides.size())
        return malformed("tensor rebuild with bad offset, size or stride");
    if (hasDtypeArg) {
        if (args.size() < 7 || !args[6] || args[6]->kind != K::Dtype)
            return malformed("_rebuild_tensor_v3 without a dtype");
        tensor->dtype = args[6]->dtype;
    }
    for (auto d : tensor->shape)
        if (d < 0)
            return malformed("tensor with a negative dimension");
    for (auto s : tensor->strides)
        if (s < 0)
            return malformed("tensor with a negative stride");
    if (tensor->storageOffset < 0)
        return malformed("tensor with a negative storage offset");
    auto v = makeValue(K::Tensor);
    v->tensor = std::move(tensor);
    return v;
}

Result<PyRef> Machine::inertObject(const PyRef& cls, const PyRef& args)
{
    auto v = makeValue(K::Object);
    v->module = cls->module;
    v->name = cls->name;
    v->args = args ? args : emptyTuple();
    TESSERA_TRY(checkDepth(v, v->args));
    return v;
}

std::optional<Result<PyRef>> Machine::reduceTorchUtils(const PyRef& callable, const PyRef& argsValue)
{
    const auto& args = argsValue->items;
    const std::string& n = callable->name;
    if (n == "_rebuild_tensor_v2" || n == "_rebuild_tensor")
        return rebuildTensor(args, false);
    if (n == "_rebuild_tensor_v3")
        return rebuildTensor(args, true);
    if (n == "_rebuild_parameter" || n == "_rebuild_parameter_with_state") {
        if (args.empty())
            return malformed(n + " without arguments");
        return args[0];
    }
    if (n == "_rebuild_meta_tensor_no_storage") {
        auto tensor = std::make_shared<TensorRef>();
        if (args.size() < 3 || !args[0] || args[0]->kind != K::Dtype || !toIntList(args[1], tensor->shape)
            || !toIntList(args[2], tensor->strides))
            return malformed("bad _rebuild_meta_tensor_no_storage arguments");
        tensor->dtype = args[0]->dtype;
        auto v = makeValue(K::Tensor);
        v->tensor = std::move(tensor);
        return v;
    }
    if (n == "_rebuild_wrapper_subclass") {
        // (cls, dtype, size, stride, storage_offset, layout, device, requires_grad): a DTensor or
        // ShardedTensor shell; _rebuild_from_type_v2 then attaches its state.
        if (args.empty() || !args[0] || args[0]->kind != K::Global)
            return malformed("_rebuild_wrapper_subclass without a class");
        return inertObject(args[0], argsValue);
    }
    if (n == "_rebuild_qtensor" || n == "_rebuild_sparse_tensor" || n == "_rebuild_nested_tensor"
        || n == "_rebuild_device_tensor_from_numpy" || n == "_rebuild_device_tensor_from_cpu_tensor"
        || n == "_rebuild_sparse_csr_tensor")
        return inertObject(callable, argsValue); // recorded; readers report these kinds as unsupported
    return std::nullopt;
}

Result<PyRef> Machine::rebuildFromTypeV2(const std::vector<PyRef>& args)
{
    // (func, new_type, args, state)
    if (args.size() < 4 || !args[0] || args[0]->kind != K::Global || !args[2] || args[2]->kind != K::Tuple)
        return malformed("bad _rebuild_from_type_v2 arguments");
    auto inner = reduce(args[0], args[2]);
    TESSERA_TRY(inner);
    PyRef result = *inner;
    const auto& newType = args[1];
    const bool plainTensor = newType && newType->kind == K::Global
        && ((newType->module == "torch" && newType->name == "Tensor")
            || (newType->module == "torch.nn.parameter" && newType->name == "Parameter"));
    if (plainTensor || !newType || newType->kind != K::Global)
        return result; // Python attributes of a plain tensor do not matter for its data
    if (result->kind == K::Tensor) {
        // A tensor subclass around plain data: keep the data, remember the class.
        auto wrapped = makeValue(K::Object);
        wrapped->module = newType->module;
        wrapped->name = newType->name;
        wrapped->args = makeValue(K::Tuple);
        wrapped->args->items.push_back(result);
        wrapped->state = args[3];
        TESSERA_TRY(checkDepth(wrapped, result));
        TESSERA_TRY(checkDepth(wrapped, args[3]));
        return wrapped;
    }
    if (result->kind == K::Object) {
        result->module = newType->module;
        result->name = newType->name;
        result->state = args[3];
        TESSERA_TRY(checkDepth(result, args[3]));
    }
    return result;
}

std::optional<Result<PyRef>> Machine::reduceTorchValue(const std::string& m, const std::string& n,
                                                       const std::vector<PyRef>& args)
{
    if (m == "torch" && n == "Size") {
        if (args.size() != 1 || !args[0] || !args[0]->isSequence())
            return malformed("torch.Size without a tuple");
        return makeSequence(K::Tuple, args[0]->items);
    }
    if (m == "torch" && n == "device") {
        std::string type;
        if (args.empty() || !toString(args[0], type))
            return malformed("torch.device without a type");
        std::int64_t index = 0;
        if (args.size() > 1 && toInt(args[1], index))
            type += ":" + std::to_string(index);
        return makeStr(type);
    }
    if (m == "torch.serialization" && n == "_get_layout") {
        std::string layout;
        if (args.empty() || !toString(args[0], layout))
            return malformed("_get_layout without a name");
        return makeStr(layout);
    }
    return std::nullopt;
}

Result<PyRef> Machine::makeDict(const std::string& n, const std::vector<PyRef>& args)
{
    auto dict = makeValue(K::Dict);
    if (!args.empty() && args[0] && args[0]->isSequence() && n != "defaultdict")
        for (const auto& pair : args[0]->items)
            if (pair && pair->isSequence() && pair->items.size() == 2) {
                dict->entries.emplace_back(pair->items[0], pair->items[1]);
                TESSERA_TRY(checkDepth(dict, pair));
            }
    return dict;
}

Result<PyRef> Machine::builtinBytes(const std::string& n, const std::vector<PyRef>& args)
{
    if (args.empty())
        return makeStr({}, K::Bytes);
    if (args[0] && (args[0]->kind == K::Bytes || args[0]->kind == K::Str))
        return makeStr(args[0]->text, K::Bytes);
    if (args[0] && args[0]->kind == K::List) {
        std::string bytes;
        for (const auto& item : args[0]->items) {
            std::int64_t b = 0;
            if (!toInt(item, b) || b < 0 || b > 255)
                return malformed("bytearray of non-bytes");
            bytes.push_back(static_cast<char>(b));
        }
        return makeStr(std::move(bytes), K::Bytes);
    }
    return malformed(n + " with unsupported arguments");
}

std::optional<Result<PyRef>> Machine::reduceBuiltin(const PyRef& callable, const PyRef& argsValue)
{
    const auto& args = argsValue->items;
    const std::string& n = callable->name;
    if (n == "set" || n == "frozenset")
        return makeSequence(K::Set, !args.empty() && args[0] && (args[0]->isSequence() || args[0]->kind == K::Set)
                                ? args[0]->items
                                : std::vector<PyRef> {});
    if (n == "list" || n == "tuple")
        return makeSequence(n == "list" ? K::List : K::Tuple,
                            !args.empty() && args[0] && args[0]->isSequence() ? args[0]->items
                                                                               : std::vector<PyRef> {});
    if (n == "bytes" || n == "bytearray")
        return builtinBytes(n, args);
    if (n == "getattr") {
        // Protocol < 4 writes nested classes (e.g. ShardedTensor.ProcessGroupState) as getattr(cls, name).
        std::string attrName;
        if (args.size() != 2 || !args[0] || args[0]->kind != K::Global || !toString(args[1], attrName))
            return makeError(m_name + ": refusing getattr on " + argsValue->repr()
                             + ": only nested class names are allowed");
        auto v = makeValue(K::Global);
        v->module = args[0]->module;
        v->name = args[0]->name + "." + attrName;
        return v;
    }
    if (n == "complex" || n == "slice" || n == "range" || n == "object" || n == "int" || n == "float"
        || n == "str" || n == "bool")
        return inertObject(callable, argsValue);
    return std::nullopt;
}

Result<PyRef> Machine::codecsEncode(const std::vector<PyRef>& args)
{
    // bytes under protocol 2: encode(str decoded as latin-1, 'latin1')
    std::string text;
    if (args.empty() || !toString(args[0], text))
        return malformed("_codecs.encode without a string");
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c < 0x80) {
            out.push_back(static_cast<char>(c));
        } else if ((c == 0xC2 || c == 0xC3) && i + 1 < text.size()) {
            out.push_back(static_cast<char>(((c & 0x03) << 6) | (static_cast<unsigned char>(text[i + 1]) & 0x3F)));
            ++i;
        } else {
            return malformed("_codecs.encode of text outside latin-1");
        }
    }
    return makeStr(std::move(out), K::Bytes);
}

Result<PyRef> Machine::reduce(const PyRef& callable, const PyRef& argsValue)
{
    if (!callable || callable->kind != K::Global)
        return malformed("REDUCE of a value that is not a global: " + (callable ? callable->repr() : "None"));
    if (!argsValue || argsValue->kind != K::Tuple)
        return malformed("REDUCE arguments are not a tuple");
    const auto& args = argsValue->items;
    const std::string& m = callable->module;
    const std::string& n = callable->name;

    if (m == "torch._utils")
        if (auto reduced = reduceTorchUtils(callable, argsValue))
            return std::move(*reduced);
    if (m == "torch._tensor" && n == "_rebuild_from_type_v2")
        return rebuildFromTypeV2(args);
    if (auto reduced = reduceTorchValue(m, n, args))
        return std::move(*reduced);
    if ((m == "collections" && (n == "OrderedDict" || n == "Counter" || n == "defaultdict"))
        || (m == "builtins" && n == "dict"))
        return makeDict(n, args);
    if (m == "builtins")
        if (auto reduced = reduceBuiltin(callable, argsValue))
            return std::move(*reduced);
    if (m == "_codecs" && n == "encode")
        return codecsEncode(args);
    if (m == "copyreg" && n == "_reconstructor") {
        if (args.empty() || !args[0] || args[0]->kind != K::Global)
            return malformed("copyreg._reconstructor without a class");
        return inertObject(args[0], emptyTuple());
    }
    if (isInertConstructible(m))
        return inertObject(callable, argsValue);
    return makeError(m_name + ": refusing to call '" + callable->qualifiedName()
                     + "': it is not on Tessera's allow-list of checkpoint types, so it could run code");
}

Result<PyRef> Machine::newObject(const PyRef& cls, const PyRef& args)
{
    if (!cls || cls->kind != K::Global)
        return malformed("NEWOBJ of a value that is not a class");
    if (!args || args->kind != K::Tuple)
        return malformed("NEWOBJ arguments are not a tuple");
    if (cls->module == "torch.nn.parameter" && cls->name == "Parameter")
        return args->items.empty() ? makeValue(K::None) : args->items[0];
    if ((cls->module == "collections" && cls->name == "OrderedDict") || (cls->module == "builtins" && cls->name == "dict"))
        return makeValue(K::Dict);
    if (cls->module == "builtins" && (cls->name == "set" || cls->name == "frozenset"))
        return makeValue(K::Set);
    if (cls->module == "builtins" && cls->name == "list")
        return makeValue(K::List);
    // Any other class becomes an inert record: NEWOBJ only allocates, and we never run __setstate__.
    return inertObject(cls, args);
}

Status Machine::build(const PyRef& target, const PyRef& state)
{
    if (!target)
        return malformed("BUILD without a target");
    PyRef t = target;
    switch (target->kind) {
    case K::Object:
        if (t->state && t->state->kind == K::Dict && state && state->kind == K::Dict) {
            for (const auto& entry : state->entries)
                t->state->entries.push_back(entry);
        } else {
            t->state = state;
        }
        return checkDepth(t, state);
    case K::Dict:
        t->state = state; // e.g. a module state dict's `_metadata`
        return checkDepth(t, state);
    case K::Tensor:
    case K::List:
    case K::Set:
        return Status::success(); // Python attributes of tensors and containers: irrelevant here
    default:
        return malformed("BUILD on " + target->repr(1));
    }
}

Status Machine::setItems(const PyRef& dictValue, std::vector<PyRef>& kv)
{
    if (!dictValue || dictValue->kind != K::Dict)
        return malformed("SETITEM on a value that is not a dict");
    if (kv.size() % 2 != 0)
        return malformed("SETITEMS with an odd number of values");
    PyRef dict = dictValue;
    for (std::size_t i = 0; i < kv.size(); i += 2) {
        TESSERA_TRY(checkDepth(dict, kv[i + 1]));
        // Dict keys in checkpoints are strings or ints; a repeated key replaces the value, as in Python.
        bool replaced = false;
        if (kv[i] && kv[i]->kind == K::Str && dict->entries.size() < 64) {
            for (auto& entry : dict->entries)
                if (entry.first && entry.first->kind == K::Str && entry.first->text == kv[i]->text) {
                    entry.second = kv[i + 1];
                    replaced = true;
                    break;
                }
        }
        if (!replaced)
            dict->entries.emplace_back(kv[i], kv[i + 1]);
    }
    return Status::success();
}

Status Machine::appendItems(const PyRef& listValue, std::vector<PyRef>& items)
{
    if (!listValue || (listValue->kind != K::List && listValue->kind != K::Set))
        return malformed("APPEND on a value that is not a list");
    PyRef list = listValue;
    for (auto& item : items) {
        TESSERA_TRY(checkDepth(list, item));
        list->items.push_back(std::move(item));
    }
    return Status::success();
}

Status Machine::step(std::uint8_t op, bool& stop)
{
    switch (op) {
    case 0x80: { // PROTO
        auto version = readLe<std::uint8_t>();
        TESSERA_TRY(version);
        if (*version > 5)
            return malformed("pickle protocol " + std::to_string(*version) + " is newer than Tessera knows");
        return Status::success();
    }
    case 0x95: { // FRAME
        auto len = readLe<std::uint64_t>();
        return len ? Status::success() : Status(len.error());
    }
    case '.': stop = true; return Status::success();
    case '(':
        if (m_marks.size() >= m_limits.maxMarks)
            return malformed("too many nested MARKs");
        m_marks.push_back(m_stack.size());
        return Status::success();
    case '0': { auto v = pop(); return v ? Status::success() : Status(v.error()); } // POP
    case '1': { auto v = popMark(); return v ? Status::success() : Status(v.error()); } // POP_MARK
    case '2': { auto v = top(); TESSERA_TRY(v); return push(*v); } // DUP
    case 'N': return push(m_none);
    case 0x88: case 0x89: { // NEWTRUE, NEWFALSE
        auto v = makeValue(K::Bool);
        v->boolean = op == 0x88;
        return push(v);
    }
    case 'J': { auto v = readLe<std::uint32_t>(); TESSERA_TRY(v); return push(makeInt(static_cast<std::int32_t>(*v))); }
    case 'K': { auto v = readLe<std::uint8_t>(); TESSERA_TRY(v); return push(makeInt(*v)); }
    case 'M': { auto v = readLe<std::uint16_t>(); TESSERA_TRY(v); return push(makeInt(*v)); }
    case 0x8a: case 0x8b: { // LONG1, LONG4
        std::uint64_t n = 0;
        if (op == 0x8a) {
            auto len = readLe<std::uint8_t>();
            TESSERA_TRY(len);
            n = *len;
        } else {
            auto len = readLe<std::uint32_t>();
            TESSERA_TRY(len);
            if (static_cast<std::int32_t>(*len) < 0)
                return malformed("LONG4 with a negative length");
            n = *len;
        }
        auto bytes = readBytes(n);
        TESSERA_TRY(bytes);
        auto v = makeValue(K::Int);
        if (n <= 8) {
            std::uint64_t u = 0;
            for (std::size_t i = 0; i < n; ++i)
                u |= static_cast<std::uint64_t>(static_cast<std::uint8_t>((*bytes)[i])) << (8 * i);
            if (n > 0 && n < 8 && (static_cast<std::uint8_t>((*bytes)[n - 1]) & 0x80))
                u |= ~std::uint64_t(0) << (8 * n); // sign-extend
            v->integer = static_cast<std::int64_t>(u);
        } else {
            v->bigInt = true;
            v->text = std::move(*bytes);
        }
        return push(v);
    }
    case 'I': case 'L': { // INT, LONG (text; protocol 0)
        auto line = readLine();
        TESSERA_TRY(line);
        std::string s = *line;
        if (!s.empty() && s.back() == 'L')
            s.pop_back();
        if (op == 'I' && (s == "00" || s == "01")) {
            auto v = makeValue(K::Bool);
            v->boolean = s == "01";
            return push(v);
        }
        errno = 0;
        char* end = nullptr;
        const long long parsed = std::strtoll(s.c_str(), &end, 10);
        if (s.empty() || *end != '\0' || errno == ERANGE)
            return malformed("bad integer literal");
        return push(makeInt(parsed));
    }
    case 'G': { // BINFLOAT, big-endian
        if (!have(8))
            return truncated();
        std::uint64_t u = 0;
        for (int i = 0; i < 8; ++i)
            u = (u << 8) | m_bytes.data()[m_pos + i];
        m_pos += 8;
        auto v = makeValue(K::Float);
        std::memcpy(&v->real, &u, 8);
        return push(v);
    }
    case 'F': {
        auto line = readLine();
        TESSERA_TRY(line);
        auto v = makeValue(K::Float);
        v->real = std::strtod(line->c_str(), nullptr);
        return push(v);
    }
    case 'X': case 0x8c: case 0x8d: case 'T': case 'U': // BINUNICODE, SHORT_BINUNICODE, BINUNICODE8, BINSTRING, SHORT_BINSTRING
    case 'B': case 'C': case 0x8e: case 0x96: { // BINBYTES, SHORT_BINBYTES, BINBYTES8, BYTEARRAY8
        std::uint64_t n = 0;
        if (op == 0x8c || op == 'U' || op == 'C') {
            auto len = readLe<std::uint8_t>();
            TESSERA_TRY(len);
            n = *len;
        } else if (op == 0x8d || op == 0x8e || op == 0x96) {
            auto len = readLe<std::uint64_t>();
            TESSERA_TRY(len);
            n = *len;
        } else {
            auto len = readLe<std::uint32_t>();
            TESSERA_TRY(len);
            n = *len;
        }
        auto bytes = readBytes(n);
        TESSERA_TRY(bytes);
        const bool isText = op == 'X' || op == 0x8c || op == 0x8d || op == 'T' || op == 'U';
        return push(makeStr(std::move(*bytes), isText ? K::Str : K::Bytes));
    }
    case 'V': { // UNICODE (protocol 0, raw-unicode-escape; ASCII is all torch ever needs)
        auto line = readLine();
        TESSERA_TRY(line);
        return push(makeStr(std::move(*line)));
    }
    case 'S': { // STRING (protocol 0, quoted)
        auto line = readLine();
        TESSERA_TRY(line);
        std::string s = *line;
        if (s.size() >= 2 && (s.front() == '\'' || s.front() == '"') && s.back() == s.front())
            s = s.substr(1, s.size() - 2);
        return push(makeStr(std::move(s)));
    }
    case '}': return push(makeValue(K::Dict));
    case ']': return push(makeValue(K::List));
    case ')': return push(emptyTuple());
    case 0x8f: return push(makeValue(K::Set));
    case 'd': case 'l': case 't': case 0x91: { // DICT, LIST, TUPLE, FROZENSET from the mark
        auto items = popMark();
        TESSERA_TRY(items);
        if (op == 'd') {
            auto dict = makeValue(K::Dict);
            TESSERA_TRY(setItems(dict, *items));
            return push(dict);
        }
        auto seq = makeSequence(op == 'l' ? K::List : op == 't' ? K::Tuple : K::Set, std::move(*items));
        TESSERA_TRY(seq);
        return push(*seq);
    }
    case 0x85: case 0x86: case 0x87: { // TUPLE1..3
        auto items = popN(op - 0x84u);
        TESSERA_TRY(items);
        return pushResult(makeSequence(K::Tuple, std::move(*items)));
    }
    case 's': { // SETITEM
        auto kv = popN(2);
        TESSERA_TRY(kv);
        auto dict = top();
        TESSERA_TRY(dict);
        return setItems(*dict, *kv);
    }
    case 'u': { // SETITEMS
        auto kv = popMark();
        TESSERA_TRY(kv);
        auto dict = top();
        TESSERA_TRY(dict);
        return setItems(*dict, *kv);
    }
    case 'a': { // APPEND
        auto items = popN(1);
        TESSERA_TRY(items);
        auto list = top();
        TESSERA_TRY(list);
        return appendItems(*list, *items);
    }
    case 'e': case 0x90: { // APPENDS, ADDITEMS
        auto items = popMark();
        TESSERA_TRY(items);
        auto list = top();
        TESSERA_TRY(list);
        return appendItems(*list, *items);
    }
    case 'c': { // GLOBAL
        auto module = readLine();
        TESSERA_TRY(module);
        auto name = readLine();
        TESSERA_TRY(name);
        auto g = global(std::move(*module), std::move(*name));
        TESSERA_TRY(g);
        return push(*g);
    }
    case 0x93: { // STACK_GLOBAL: module, name
        auto v = popN(2);
        TESSERA_TRY(v);
        if (!(*v)[0]->isStr() || !(*v)[1]->isStr())
            return malformed("STACK_GLOBAL needs two strings");
        return pushResult(global((*v)[0]->text, (*v)[1]->text));
    }
    case 'R': { // REDUCE: callable, args
        auto v = popN(2);
        TESSERA_TRY(v);
        return pushResult(reduce((*v)[0], (*v)[1]));
    }
    case 0x81: { // NEWOBJ: cls, args
        auto v = popN(2);
        TESSERA_TRY(v);
        return pushResult(newObject((*v)[0], (*v)[1]));
    }
    case 0x92: { // NEWOBJ_EX: cls, args, kwargs (keyword arguments do not matter for inert records)
        auto v = popN(3);
        TESSERA_TRY(v);
        return pushResult(newObject((*v)[0], (*v)[1]));
    }
    case 'b': { // BUILD
        auto state = pop();
        TESSERA_TRY(state);
        auto target = top();
        TESSERA_TRY(target);
        return build(*target, *state);
    }
    case 'Q': { // BINPERSID
        auto pid = pop();
        TESSERA_TRY(pid);
        auto storage = persistentLoad(*pid);
        TESSERA_TRY(storage);
        return push(*storage);
    }
    case 'h': case 'j': { // BINGET, LONG_BINGET
        auto index = readMemoIndex(op == 'j');
        TESSERA_TRY(index);
        return pushResult(memoGet(*index));
    }
    case 'q': case 'r': { // BINPUT, LONG_BINPUT
        auto index = readMemoIndex(op == 'r');
        TESSERA_TRY(index);
        auto v = top();
        TESSERA_TRY(v);
        return memoPut(*index, *v);
    }
    case 'g': case 'p': { // GET, PUT (protocol 0, decimal)
        auto line = readLine();
        TESSERA_TRY(line);
        char* end = nullptr;
        const unsigned long long index = std::strtoull(line->c_str(), &end, 10);
        if (line->empty() || *end != '\0')
            return malformed("bad memo index");
        if (op == 'g') {
            auto v = memoGet(index);
            TESSERA_TRY(v);
            return push(*v);
        }
        auto v = top();
        TESSERA_TRY(v);
        return memoPut(index, *v);
    }
    case 0x94: { // MEMOIZE
        auto v = top();
        TESSERA_TRY(v);
        return memoPut(m_memo.size() + m_sparseMemo.size(), *v);
    }
    default: {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", op);
        return malformed(std::string("unsupported pickle opcode ") + hex
                         + " (PERSID, EXT and out-of-band buffers never occur in checkpoints)");
    }
    }
}

/// Children of a container or object value, in no particular order.
template <typename Fn>
void forEachChild(const PyValue& v, Fn&& fn)
{
    for (const auto& item : v.items)
        fn(item);
    for (const auto& [key, value] : v.entries) {
        fn(key);
        fn(value);
    }
    fn(v.args);
    fn(v.state);
}

bool hasChildren(const PyValue& v)
{
    return !v.items.empty() || !v.entries.empty() || v.args || v.state;
}

/// What a walk over everything a pickle built found wrong with its shape.
enum class StructureFault { None, Cycle, TooDeep };

/// Checks the values reachable from `roots` for cycles (a list appended to itself, say: checkpoints never have
/// one, and shared ownership would never free it) and measures their true nesting depth. The depth recorded
/// while unpickling sees a child's depth only when the child is attached, so a pickle that appends empty lists
/// first and fills them later builds a chain of any depth; only the finished structure can be measured, and
/// without recursion, because it may already be 200,000 levels deep. Iterative and linear in the values.
StructureFault checkStructure(const std::vector<PyRef>& roots, int maxDepth)
{
    enum : std::uint8_t { Unseen = 0, Open = 1, Done = 2 };
    std::vector<PyValue*> touched;
    std::vector<std::pair<PyValue*, std::vector<PyValue*>>> stack;
    StructureFault fault = StructureFault::None;
    auto childrenOf = [](PyValue* v) {
        std::vector<PyValue*> children;
        forEachChild(*v, [&](const PyRef& c) {
            if (c && hasChildren(*c))
                children.push_back(c.get());
        });
        return children;
    };
    for (const auto& root : roots) {
        if (!root || !hasChildren(*root) || root->visitState != Unseen || fault != StructureFault::None)
            continue;
        root->visitState = Open;
        root->depth = 1;
        touched.push_back(root.get());
        stack.emplace_back(root.get(), childrenOf(root.get()));
        while (!stack.empty() && fault == StructureFault::None) {
            if (stack.size() > static_cast<std::size_t>(maxDepth)) {
                fault = StructureFault::TooDeep;
                break;
            }
            auto& [node, pending] = stack.back();
            if (pending.empty()) {
                node->visitState = Done;
                const int depth = node->depth;
                stack.pop_back();
                if (!stack.empty())
                    stack.back().first->depth = std::max(stack.back().first->depth, depth + 1);
                continue;
            }
            PyValue* child = pending.back();
            pending.pop_back();
            if (child->visitState == Open) {
                fault = StructureFault::Cycle;
            } else if (child->visitState == Unseen) {
                child->visitState = Open;
                child->depth = 1;
                touched.push_back(child);
                stack.emplace_back(child, childrenOf(child));
            } else {
                node->depth = std::max(node->depth, child->depth + 1);
                if (node->depth > maxDepth)
                    fault = StructureFault::TooDeep;
            }
        }
        stack.clear();
    }
    for (PyValue* v : touched)
        v->visitState = Unseen;
    return fault;
}

/// Drops every link between the values reachable from `roots`, so that cycles among them are freed.
void breakLinks(const std::vector<PyRef>& roots)
{
    std::vector<PyRef> pending(roots.begin(), roots.end());
    while (!pending.empty()) {
        PyRef v = std::move(pending.back());
        pending.pop_back();
        if (!v || !hasChildren(*v))
            continue;
        forEachChild(*v, [&](const PyRef& c) { pending.push_back(c); });
        v->items.clear();
        v->entries.clear();
        v->args.reset();
        v->state.reset();
    }
}

Result<PyRef> Machine::run()
{
    std::vector<PyRef> containers;
    struct Registry {
        std::vector<PyRef>* previous = t_containers;
        explicit Registry(std::vector<PyRef>* mine) { t_containers = mine; }
        ~Registry() { t_containers = previous; }
    } registry(&containers);
    auto result = execute();
    // Every container made, reachable or not, so that no cycle escapes (see t_containers).
    std::vector<PyRef> roots = std::move(containers);
    roots.insert(roots.end(), m_stack.begin(), m_stack.end());
    switch (checkStructure(roots, m_limits.maxDepth)) {
    case StructureFault::None:
        return result;
    case StructureFault::Cycle:
        breakLinks(roots);
        return malformed("the pickle builds a self-referencing structure, which checkpoints never contain");
    case StructureFault::TooDeep:
        // Freed link by link: the default destructors would recurse once per level and overflow the stack.
        breakLinks(roots);
        return malformed("objects nested more than " + std::to_string(m_limits.maxDepth) + " levels deep");
    }
    return result;
}

Result<PyRef> Machine::execute()
{
    if (m_bytes.empty())
        return makeError(m_name + ": the pickle is empty");
    bool stop = false;
    while (!stop) {
        if (!have(1))
            return truncated();
        m_opPos = m_pos;
        const std::uint8_t op = m_bytes.data()[m_pos++];
        auto status = step(op, stop);
        if (!status)
            return status.error();
    }
    if (m_stack.size() != 1 || !m_marks.empty())
        return malformed("the pickle does not end with exactly one value");
    return m_stack.back();
}

} // namespace

Result<PyRef> unpickle(const ByteView& bytes, const std::string& displayName, const UnpickleLimits& limits)
{
    // Values of this pickle come from one arena, released with the last of them.
    struct ArenaScope {
        std::shared_ptr<ValueArena> previous = std::move(t_arena);
        ArenaScope() { t_arena = std::make_shared<ValueArena>(); }
        ~ArenaScope() { t_arena = std::move(previous); }
    } scope;
    Machine machine(bytes, displayName, limits);
    return machine.run();
}

} // namespace tessera
