// SPDX-License-Identifier: GPL-3.0-or-later
#include "mapping/lora_config.h"

#include "io/printable.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <functional>
#include <sstream>

using nlohmann::json;

namespace tessera {

namespace {

/// The JSON types a key may have.
enum class Kind { Integer, Number, Boolean, String, Object, IntegerOrList, StringOrList, Any };

const char* kindText(Kind kind)
{
    switch (kind) {
    case Kind::Integer: return "a JSON integer";
    case Kind::Number: return "a JSON number";
    case Kind::Boolean: return "a JSON boolean (true or false)";
    case Kind::String: return "a JSON string";
    case Kind::Object: return "a JSON object";
    case Kind::IntegerOrList: return "a JSON integer or list of integers";
    case Kind::StringOrList: return "a JSON string or list of strings";
    case Kind::Any: return "any JSON value";
    }
    return "?";
}

const char* typeText(const json& v)
{
    switch (v.type()) {
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "an integer";
    case json::value_t::number_float: return "a number";
    case json::value_t::array: return "a list";
    case json::value_t::object: return "an object";
    default: return "null";
    }
}

bool allOf(const json& v, const std::function<bool(const json&)>& test)
{
    for (const auto& item : v)
        if (!test(item))
            return false;
    return true;
}

bool hasKind(const json& v, Kind kind)
{
    auto integer = [](const json& x) { return x.is_number_integer(); };
    auto string = [](const json& x) { return x.is_string(); };
    switch (kind) {
    case Kind::Integer: return v.is_number_integer();
    case Kind::Number: return v.is_number();
    case Kind::Boolean: return v.is_boolean();
    case Kind::String: return v.is_string();
    case Kind::Object: return v.is_object();
    case Kind::IntegerOrList: return integer(v) || (v.is_array() && allOf(v, integer));
    case Kind::StringOrList: return string(v) || (v.is_array() && allOf(v, string));
    case Kind::Any: return true;
    }
    return false;
}

/// One key: its JSON type, and when set, why a value of it cannot be fused (empty: it can).
struct Key {
    const char* name;
    Kind kind;
    std::function<std::string(const json&)> unsupported;
};

bool isEmpty(const json& v) { return (v.is_array() || v.is_object() || v.is_string()) && v.empty(); }

const std::vector<Key>& keys()
{
    auto when = [](bool (*test)(const json&), std::string why) {
        return [test, why](const json& v) { return test(v) ? why : std::string(); };
    };
    auto isTrue = [](const json& v) { return v.is_boolean() && v.get<bool>(); };
    auto given = [](const json& v) { return !isEmpty(v); };
    static const std::vector<Key> list = {
        { "r", Kind::Integer, nullptr },
        { "lora_alpha", Kind::Number, nullptr },
        { "use_rslora", Kind::Boolean, nullptr },
        { "task_type", Kind::String, nullptr },
        { "peft_type", Kind::String,
          [](const json& v) { return v.get<std::string>() == "LORA" ? std::string() : "a " + v.get<std::string>()
                                  + " adapter, not LoRA; only LoRA adapters are fused"; } },
        { "use_dora", Kind::Boolean, when(isTrue, "DoRA scales each fused weight by a trained magnitude, which the fuse "
                                                   "does not do") },
        { "fan_in_fan_out", Kind::Boolean, when(isTrue, "fan_in_fan_out adapters (GPT-2 style Conv1D) are not "
                                                         "supported") },
        { "lora_bias", Kind::Boolean, when(isTrue, "a LoRA B with a bias of its own is not supported") },
        { "use_qalora", Kind::Boolean, when(isTrue, "QA-LoRA's pooled inputs are not supported") },
        { "bias", Kind::String,
          [](const json& v) { return v.get<std::string>() == "none" ? std::string()
                                  : "trained biases (\"" + v.get<std::string>() + "\") belong to the adapter, which "
                                    "does not keep them; only \"none\" is supported"; } },
        { "layers_to_transform", Kind::IntegerOrList, when(given, "the adapter applies to some layers only, which the "
                                                                 "fuse does not know how to select") },
        { "layers_pattern", Kind::StringOrList, when(given, "the adapter applies to some layers only, which the fuse "
                                                           "does not know how to select") },
        { "rank_pattern", Kind::Object, when(given, "some modules have a rank of their own, which is not supported") },
        { "alpha_pattern", Kind::Object, when(given, "some modules have an alpha of their own, which is not supported") },
        { "layer_replication", Kind::Any, when(given, "repeats layers of the base model, which is not supported") },
        { "target_parameters", Kind::StringOrList, when(given, "LoRA on parameters (not modules) is not supported") },
        { "trainable_token_indices", Kind::Any, when(given, "trains some embedding rows outside the adapter, which is "
                                                            "not supported") },
    };
    return list;
}

std::string shown(const json& v) { return printableText(v.dump(-1, ' ', false, json::error_handler_t::replace)); }

} // namespace

std::string loraAlphaProblem(double alpha)
{
    if (!std::isfinite(alpha) || !(alpha > 0))
        return "must be a positive number";
    if (alpha > kMaxLoraAlpha) {
        std::ostringstream s;
        s << "must be at most " << kMaxLoraAlpha << " (alpha / r scales every update; a larger one makes the fused "
          << "weights infinite)";
        return s.str();
    }
    return {};
}

Result<LoraConfigFile> readLoraConfigObject(const json& object, const std::string& file)
{
    LoraConfigFile out;
    auto refuse = [&](const std::string& key, const std::string& why) {
        return makeError(file + ": \"" + key + "\" " + why);
    };
    for (const Key& key : keys()) {
        const auto it = object.find(key.name);
        if (it == object.end() || it->is_null())
            continue;
        const std::string name = key.name;
        if (!hasKind(*it, key.kind))
            return refuse(name, "must be " + std::string(kindText(key.kind)) + ", got " + shown(*it) + " ("
                                    + typeText(*it) + ")");
        if (key.unsupported)
            if (const std::string why = key.unsupported(*it); !why.empty())
                return refuse(name, "is " + shown(*it) + ": " + why);
    }
    if (auto it = object.find("r"); it != object.end() && !it->is_null()) {
        if (it->get<std::int64_t>() <= 0)
            return refuse("r", "must be a positive integer, got " + shown(*it));
        out.r = it->get<std::int64_t>();
    }
    if (auto it = object.find("lora_alpha"); it != object.end() && !it->is_null()) {
        const double alpha = it->get<double>();
        if (const std::string why = loraAlphaProblem(alpha); !why.empty())
            return refuse("lora_alpha", why + ", got " + shown(*it));
        out.alpha = alpha;
    }
    if (auto it = object.find("use_rslora"); it != object.end() && !it->is_null())
        out.useRslora = it->get<bool>();
    if (auto it = object.find("task_type"); it != object.end() && !it->is_null())
        out.taskType = it->get<std::string>();
    return out;
}

} // namespace tessera
