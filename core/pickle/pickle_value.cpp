// SPDX-License-Identifier: GPL-3.0-or-later
#include "pickle/pickle_value.h"

#include <cstring>
#include <sstream>

namespace tessera {

namespace {

/// Moves the children of `v` onto `pending`, leaving `v` without links.
void detachChildren(PyValue& v, std::vector<PyRef>& pending)
{
    for (auto& item : v.items)
        pending.push_back(std::move(item));
    for (auto& [key, value] : v.entries) {
        pending.push_back(std::move(key));
        pending.push_back(std::move(value));
    }
    if (v.args)
        pending.push_back(std::move(v.args));
    if (v.state)
        pending.push_back(std::move(v.state));
    v.items.clear();
    v.entries.clear();
}

} // namespace

PyValue::~PyValue()
{
    if (items.empty() && entries.empty() && !args && !state)
        return;
    std::vector<PyRef> pending;
    detachChildren(*this, pending);
    while (!pending.empty()) {
        PyRef v = std::move(pending.back());
        pending.pop_back();
        // A child someone else still holds is theirs to free; one held only here is emptied first, so that its
        // own destructor (at the end of this iteration) finds nothing to recurse into.
        if (v && v.use_count() == 1)
            detachChildren(*v, pending);
    }
}

std::string PyValue::shortName() const
{
    const auto dot = name.rfind('.');
    return dot == std::string::npos ? name : name.substr(dot + 1);
}

PyRef PyValue::get(const std::string& key) const
{
    if (kind != Kind::Dict)
        return nullptr;
    for (const auto& [k, v] : entries)
        if (k && k->kind == Kind::Str && k->text == key)
            return v;
    return nullptr;
}

PyRef PyValue::attr(const std::string& key) const
{
    if (!state)
        return nullptr;
    if (state->kind == Kind::Dict)
        return state->get(key);
    // (dict_or_None, slots_dict), as Python's default __reduce_ex__ writes objects with __slots__.
    if (state->kind == Kind::Tuple && state->items.size() == 2) {
        for (const auto& part : state->items)
            if (part && part->kind == Kind::Dict)
                if (auto found = part->get(key))
                    return found;
    }
    return nullptr;
}

namespace {
void render(const PyValue& v, std::ostringstream& out, int depth)
{
    using K = PyValue::Kind;
    if (depth < 0) {
        out << "…";
        return;
    }
    auto renderList = [&](const std::vector<PyRef>& items, const char* open, const char* close) {
        out << open;
        for (std::size_t i = 0; i < items.size(); ++i) {
            if (i == 8) {
                out << ", … (" << items.size() << " items)";
                break;
            }
            if (i)
                out << ", ";
            if (items[i])
                render(*items[i], out, depth - 1);
        }
        out << close;
    };
    switch (v.kind) {
    case K::None: out << "None"; break;
    case K::Bool: out << (v.boolean ? "True" : "False"); break;
    case K::Int:
        if (v.bigInt)
            out << "<int of " << v.text.size() << " bytes>";
        else
            out << v.integer;
        break;
    case K::Float: out << v.real; break;
    case K::Str: out << '\'' << (v.text.size() > 80 ? v.text.substr(0, 80) + "…" : v.text) << '\''; break;
    case K::Bytes: out << "b<" << v.text.size() << " bytes>"; break;
    case K::Tuple: renderList(v.items, "(", ")"); break;
    case K::List: renderList(v.items, "[", "]"); break;
    case K::Set: renderList(v.items, "{", "}"); break;
    case K::Dict: {
        out << '{';
        std::size_t i = 0;
        for (const auto& [k, val] : v.entries) {
            if (i == 8) {
                out << ", … (" << v.entries.size() << " items)";
                break;
            }
            if (i++)
                out << ", ";
            if (k)
                render(*k, out, depth - 1);
            out << ": ";
            if (val)
                render(*val, out, depth - 1);
        }
        out << '}';
        break;
    }
    case K::Global: out << v.qualifiedName(); break;
    case K::Object:
        out << v.qualifiedName();
        if (v.args)
            render(*v.args, out, depth - 1);
        else
            out << "()";
        if (v.state) {
            out << ".state=";
            render(*v.state, out, depth - 1);
        }
        break;
    case K::Dtype: out << "torch." << torchName(v.dtype); break;
    case K::Storage: out << "Storage(" << (v.storage ? v.storage->key : "") << ")"; break;
    case K::Tensor:
        out << "Tensor(" << (v.tensor ? torchName(v.tensor->dtype) : "?") << ", [";
        if (v.tensor)
            for (std::size_t i = 0; i < v.tensor->shape.size(); ++i)
                out << (i ? ", " : "") << v.tensor->shape[i];
        out << "])";
        break;
    }
}
} // namespace

std::string PyValue::repr(int maxDepth) const
{
    std::ostringstream out;
    render(*this, out, maxDepth);
    return out.str();
}

bool toInt(const PyRef& value, std::int64_t& out)
{
    if (!value)
        return false;
    if (value->kind == PyValue::Kind::Int && !value->bigInt) {
        out = value->integer;
        return true;
    }
    if (value->kind == PyValue::Kind::Bool) {
        out = value->boolean ? 1 : 0;
        return true;
    }
    return false;
}

bool toIntList(const PyRef& value, std::vector<std::int64_t>& out)
{
    if (!value || !value->isSequence())
        return false;
    out.clear();
    out.reserve(value->items.size());
    for (const auto& item : value->items) {
        std::int64_t v = 0;
        if (!toInt(item, v))
            return false;
        out.push_back(v);
    }
    return true;
}

bool toString(const PyRef& value, std::string& out)
{
    if (!value || value->kind != PyValue::Kind::Str)
        return false;
    out = value->text;
    return true;
}

namespace {

bool sameTensorShape(const PyValue& a, const PyValue& b)
{
    if (!a.tensor || !b.tensor)
        return !a.tensor && !b.tensor;
    const TensorRef& x = *a.tensor;
    const TensorRef& y = *b.tensor;
    return x.dtype == y.dtype && x.shape == y.shape && x.strides == y.strides && x.storageOffset == y.storageOffset
        && (x.storage ? (y.storage && x.storage->numel == y.storage->numel) : !y.storage);
}

/// The scalar parts of two values of one kind; containers are compared by the caller, item by item.
bool sameScalars(const PyValue& a, const PyValue& b)
{
    switch (a.kind) {
    case PyValue::Kind::Bool:
        return a.boolean == b.boolean;
    case PyValue::Kind::Int:
        return a.bigInt == b.bigInt && (a.bigInt ? a.text == b.text : a.integer == b.integer);
    case PyValue::Kind::Float:
        // Bit for bit: a NaN learning rate equals itself, and -0.0 is not 0.0.
        return std::memcmp(&a.real, &b.real, sizeof a.real) == 0;
    case PyValue::Kind::Str:
    case PyValue::Kind::Bytes:
        return a.text == b.text;
    case PyValue::Kind::Global:
    case PyValue::Kind::Object:
        return a.module == b.module && a.name == b.name;
    case PyValue::Kind::Dtype:
        return a.dtype == b.dtype;
    case PyValue::Kind::Storage:
        return a.storage && b.storage ? a.storage->dtype == b.storage->dtype && a.storage->numel == b.storage->numel
                                      : !a.storage && !b.storage;
    case PyValue::Kind::Tensor:
        return sameTensorShape(a, b);
    default:
        return true;
    }
}

} // namespace

bool sameValue(const PyRef& a, const PyRef& b)
{
    std::vector<std::pair<const PyValue*, const PyValue*>> stack { { a.get(), b.get() } };
    while (!stack.empty()) {
        const auto [x, y] = stack.back();
        stack.pop_back();
        if (!x || !y) {
            if (x != y)
                return false;
            continue;
        }
        if (x->kind != y->kind || !sameScalars(*x, *y) || x->items.size() != y->items.size()
            || x->entries.size() != y->entries.size() || !x->args != !y->args || !x->state != !y->state)
            return false;
        for (std::size_t i = 0; i < x->items.size(); ++i)
            stack.emplace_back(x->items[i].get(), y->items[i].get());
        for (std::size_t i = 0; i < x->entries.size(); ++i) {
            stack.emplace_back(x->entries[i].first.get(), y->entries[i].first.get());
            stack.emplace_back(x->entries[i].second.get(), y->entries[i].second.get());
        }
        stack.emplace_back(x->args.get(), y->args.get());
        stack.emplace_back(x->state.get(), y->state.get());
    }
    return true;
}

} // namespace tessera
