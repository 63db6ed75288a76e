// SPDX-License-Identifier: GPL-3.0-or-later
#include "pickle/pickle_value.h"

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

} // namespace tessera
