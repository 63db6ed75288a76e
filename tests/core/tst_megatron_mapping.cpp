// SPDX-License-Identifier: GPL-3.0-or-later
// Megatron → Hugging Face mapping: the rule files, the expected parameters, every transform checked value by
// value on synthetic checkpoints whose every element is distinct, and the problems a user must see for a wrong
// config, a wrong TP size, a missing pipeline stage and an unmapped name.

#include "megatronvalues.h"
#include "testutil.h"

#include "mapping/hf_expected.h"
#include "mapping/megatron_mapping.h"
#include "mapping/megatron_mapping_report.h"
#include "mapping/megatron_mapping_rules.h"
#include "merge/merge_engine.h"
#include "merge/merge_plan.h"
#include "formats/scan.h"
#include "model/tensor_reindex.h"

#include <nlohmann/json.hpp>

#include <QTest>

#include <cstring>
#include <filesystem>
#include <map>

using namespace tessera;
namespace fs = std::filesystem;

namespace {

using test::cat;
using test::materialize;
using test::rows;
using test::Values;

/// A synthetic Megatron checkpoint: tensors of distinct 16-bit values, each stored as `parts` row blocks (like
/// TP ranks), in one raw file. `global` keeps every tensor's values row-major for the expectations.
struct Synthetic {
    std::string dir;
    std::string file;
    std::string bytes;
    std::uint16_t next = 1;
    CheckpointInfo info;
    std::map<std::string, Values> global;

    explicit Synthetic(const std::string& config)
    {
        dir = test::makeTempDir();
        file = dir + "/data.bin";
        fs::create_directories(dir + "/hf");
        test::writeFile(dir + "/hf/config.json", config);
        info.layout = "megatron-dist";
        info.root = dir;
        info.hfConfigDir = dir + "/hf";
        info.parallel.tensorParallel = 2;
    }

    /// Adds `name` split into `parts` blocks along `dim` (each block contiguous in the file).
    void add(const std::string& name, const Shape& shape, int parts = 1, std::size_t dim = 0)
    {
        std::int64_t count = 1;
        for (auto d : shape)
            count *= d;
        Values values(static_cast<std::size_t>(count));
        for (auto& v : values)
            v = next++;
        global[name] = values;
        TensorInfo t;
        t.name = name;
        t.dtype = DType::BFloat16;
        t.shape = shape;
        const std::int64_t block = shape[dim] / parts;
        for (int r = 0; r < parts; ++r) {
            Piece p;
            p.file = file;
            p.rank = r;
            p.storedDtype = DType::BFloat16;
            p.offsets.assign(shape.size(), 0);
            p.offsets[dim] = r * block;
            p.shape = shape;
            p.shape[dim] = block;
            p.strides.assign(shape.size(), 1);
            for (std::size_t d = shape.size(); d-- > 1;)
                p.strides[d - 1] = p.strides[d] * p.shape[d];
            p.dataOffset = bytes.size();
            p.storageBegin = p.dataOffset;
            // The block's elements in its own row-major order, taken from the global values.
            Shape index(shape.size(), 0);
            std::int64_t n = 1;
            for (auto s : p.shape)
                n *= s;
            for (std::int64_t i = 0; i < n; ++i) {
                std::int64_t g = 0, stride = 1;
                for (std::size_t d = shape.size(); d-- > 0;) {
                    g += (p.offsets[d] + index[d]) * stride;
                    stride *= shape[d];
                }
                const std::uint16_t v = values[static_cast<std::size_t>(g)];
                bytes.append(reinterpret_cast<const char*>(&v), 2);
                for (std::size_t d = index.size(); d-- > 0;) {
                    if (++index[d] < p.shape[d])
                        break;
                    index[d] = 0;
                }
            }
            p.storageBytes = bytes.size() - p.storageBegin;
            t.pieces.push_back(std::move(p));
        }
        info.tensors.push_back(std::move(t));
    }

    void write()
    {
        test::writeFile(file, bytes);
        info.files = { file };
    }
};

std::string config(const std::string& architecture, const std::string& extra = {})
{
    return "{\"architectures\": [\"" + architecture + "\"], \"hidden_size\": 4, \"num_attention_heads\": 4, "
           "\"num_key_value_heads\": 2, \"head_dim\": 2, \"intermediate_size\": 6, \"num_hidden_layers\": 2, "
           "\"vocab_size\": 6, \"tie_word_embeddings\": false" + extra + "}";
}

/// A torch_dist-style dense llama: stacked layers, TP=2 row blocks, vocabulary padded 6 → 8.
Synthetic denseDist(const std::string& architecture = "LlamaForCausalLM", const std::string& extra = {})
{
    Synthetic s(config(architecture, extra));
    s.add("embedding.word_embeddings.weight", { 8, 4 }, 2);
    s.add("decoder.layers.self_attention.linear_qkv.layer_norm_weight", { 2, 4 });
    s.add("decoder.layers.self_attention.linear_qkv.weight", { 2, 16, 4 }, 2, 1); // (4 + 2·2)·2 rows
    s.add("decoder.layers.self_attention.linear_proj.weight", { 2, 4, 8 }, 2, 2);
    s.add("decoder.layers.mlp.linear_fc1.layer_norm_weight", { 2, 4 });
    s.add("decoder.layers.mlp.linear_fc1.weight", { 2, 12, 4 }, 2, 1);
    s.add("decoder.layers.mlp.linear_fc2.weight", { 2, 4, 6 }, 2, 2);
    s.add("decoder.final_layernorm.weight", { 4 });
    s.add("output_layer.weight", { 8, 4 }, 2);
    return s;
}

const MappingRow* row(const MappingResult& r, const std::string& target, MappingStatus status)
{
    for (const auto& x : r.rows)
        if (x.target == target && x.status == status)
            return &x;
    return nullptr;
}

bool hasProblem(const MappingResult& r, const std::string& text)
{
    for (const auto& p : r.problems)
        if (p.text().find(text) != std::string::npos)
            return true;
    return false;
}

std::string allProblems(const MappingResult& r)
{
    std::string s;
    for (const auto& p : r.problems)
        s += p.text() + "\n";
    return s;
}

std::string copyActor(const char* fixtureName)
{
    const std::string dest = test::makeTempDir() + "/actor";
    fs::copy(test::fixture(std::string(fixtureName) + "/global_step_10/actor"), dest, fs::copy_options::recursive);
    return dest;
}

void replaceIn(const std::string& path, const std::string& from, const std::string& to)
{
    std::string text = test::readFile(path);
    const auto at = text.find(from);
    if (at == std::string::npos)
        qFatal("'%s' not in %s", from.c_str(), path.c_str());
    text.replace(at, from.size(), to);
    test::writeFile(path, text);
}

Result<MappingResult> mapFixture(const std::string& actor, MappingOptions options = {})
{
    auto info = scanCheckpoint(actor);
    if (!info)
        return info.error();
    return mapMegatronToHf(*info, options);
}

} // namespace

class TestMegatronMapping : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void everyBuiltinFamilyLoads()
    {
        const auto families = builtinMappingFamilies();
        for (const char* f : { "llama", "mistral", "qwen2", "qwen3", "qwen2_moe", "qwen3_moe", "mixtral" })
            QVERIFY2(std::find(families.begin(), families.end(), f) != families.end(), f);
        for (const auto& f : families) {
            auto set = builtinMappingRules(f);
            QVERIFY_RESULT(set);
            QVERIFY(!set->rules.empty());
            QVERIFY(!set->expected.empty());
            QVERIFY(!set->architectures.empty());
        }
        auto qwen3 = selectMappingRules({ "Qwen3ForCausalLM" }, "qwen3");
        QVERIFY_RESULT(qwen3);
        QCOMPARE(QString::fromStdString(qwen3->family), QStringLiteral("qwen3"));
        auto byType = selectMappingRules({ "SomethingElse" }, "mixtral");
        QVERIFY_RESULT(byType);
        QCOMPARE(QString::fromStdString(byType->family), QStringLiteral("mixtral"));
        auto unknown = selectMappingRules({ "GPTNeoXForCausalLM" }, "gpt_neox");
        QVERIFY(!unknown);
        QVERIFY(unknown.error().message.find("--param_mapping") != std::string::npos);
    }

    void expressions()
    {
        const ConfigVars vars { { "a", 6 }, { "b", 2 }, { "t", 1 } };
        QCOMPARE(*evaluateExpression("a / b * (b + 1)", vars), std::int64_t(9));
        QCOMPARE(*evaluateExpression("!t && a > b", vars), std::int64_t(0));
        QCOMPARE(*evaluateExpression("!t || a != b", vars), std::int64_t(1));
        QCOMPARE(*evaluateExpression("a % 4 == 2", vars), std::int64_t(1));
        auto missing = evaluateExpression("moe_intermediate_size * 2", vars);
        QVERIFY(!missing);
        QVERIFY(missing.error().message.find("config.json has no 'moe_intermediate_size'") != std::string::npos);
        QVERIFY(!evaluateExpression("a /", vars));
        QVERIFY(!evaluateExpression("a / (b - 2)", vars));
    }

    void expectedParametersFromConfig()
    {
        HfModelConfig c;
        c.values = { { "hidden_size", 32 }, { "num_attention_heads", 4 }, { "num_key_value_heads", 2 },
                     { "head_dim", 16 }, { "intermediate_size", 48 }, { "num_hidden_layers", 2 }, { "vocab_size", 100 } };
        auto rules = builtinMappingRules("qwen3");
        QVERIFY_RESULT(rules);
        auto vars = resolveConfigVars(c, *rules, { { "value_model", 0 } });
        QVERIFY_RESULT(vars);
        auto expected = expectedHfParameters(*rules, *vars);
        QVERIFY_RESULT(expected);
        std::map<std::string, Shape> byName;
        std::vector<std::string> order;
        for (const auto& p : *expected) {
            byName[p.name] = p.shape;
            order.push_back(p.name);
        }
        QCOMPARE(expected->size(), std::size_t(1 + 2 * 11 + 2)); // embed, 11 per layer, norm, lm_head
        QCOMPARE(byName["model.layers.1.self_attn.q_proj.weight"], (Shape { 64, 32 })); // explicit head_dim
        QCOMPARE(byName["model.layers.1.self_attn.k_proj.weight"], (Shape { 32, 32 }));
        QCOMPARE(byName["model.layers.0.self_attn.q_norm.weight"], (Shape { 16 }));
        QVERIFY(!byName.count("model.layers.0.self_attn.q_proj.bias")); // attention_bias defaults to false
        QCOMPARE(byName["lm_head.weight"], (Shape { 100, 32 }));
        QCOMPARE(QString::fromStdString(order.front()), QStringLiteral("model.embed_tokens.weight"));
        QCOMPARE(QString::fromStdString(order.back()), QStringLiteral("lm_head.weight"));
        QCOMPARE(QString::fromStdString(order[5]), QStringLiteral("model.layers.0.self_attn.q_norm.weight"));

        // Tied embeddings: no lm_head; qwen2: biases without any attention_bias key.
        c.values["tie_word_embeddings"] = 1;
        auto qwen2 = builtinMappingRules("qwen2");
        QVERIFY_RESULT(qwen2);
        auto vars2 = resolveConfigVars(c, *qwen2, { { "value_model", 0 } });
        QVERIFY_RESULT(vars2);
        auto expected2 = expectedHfParameters(*qwen2, *vars2);
        QVERIFY_RESULT(expected2);
        bool lmHead = false, bias = false;
        for (const auto& p : *expected2) {
            lmHead |= p.name == "lm_head.weight";
            bias |= p.name == "model.layers.0.self_attn.k_proj.bias";
        }
        QVERIFY(!lmHead);
        QVERIFY(bias);
    }

    void reindexPrimitives()
    {
        Synthetic s(config("LlamaForCausalLM"));
        s.add("t", { 3, 4, 2 }, 1);
        s.write();
        const TensorInfo& t = s.info.tensors[0];
        TensorInfo one = selectLeading(t, 1, "one");
        QCOMPARE(one.shape, (Shape { 4, 2 }));
        QCOMPARE(one.pieces.size(), std::size_t(1));
        QCOMPARE(one.pieces[0].offsets, (Shape { 0, 0 }));
        QCOMPARE(materialize(one), rows(s.global["t"], 8, 1, 1));
        auto sliced = slicePieces(one, 0, 1, 2, 0);
        QCOMPARE(sliced.size(), std::size_t(1));
        QCOMPARE(sliced[0].shape, (Shape { 2, 2 }));
        QCOMPARE(sliced[0].dataOffset, one.pieces[0].dataOffset + 2 * 2);
        QVERIFY(slicePieces(one, 0, 4, 2, 0).empty());
    }

    void everyTransformValueByValue()
    {
        Synthetic s = denseDist("Qwen2ForCausalLM");
        s.add("decoder.layers.self_attention.linear_qkv.bias", { 2, 16 }, 2, 1);
        s.write();
        auto r = mapMegatronToHf(s.info, {});
        QVERIFY_RESULT(r);
        QVERIFY2(r->problems.empty(), allProblems(*r).c_str());
        const CheckpointInfo& m = r->mapped;
        QCOMPARE(m.tensors.size(), std::size_t(1 + 2 * 12 + 2));
        QCOMPARE(QString::fromStdString(m.tensors.front().name), QStringLiteral("model.embed_tokens.weight"));

        // trim_vocab: the first vocab_size rows of the padded embedding and output layer.
        QCOMPARE(materialize(*m.find("model.embed_tokens.weight")), rows(s.global["embedding.word_embeddings.weight"], 4, 0, 6));
        QCOMPARE(materialize(*m.find("lm_head.weight")), rows(s.global["output_layer.weight"], 4, 0, 6));
        QCOMPARE(m.find("lm_head.weight")->shape, (Shape { 6, 4 }));

        for (int layer = 0; layer < 2; ++layer) {
            const std::string hf = "model.layers." + std::to_string(layer) + ".";
            // unstack_layers + split_qkv: groups of (2 q heads + k + v) × head_dim 2 rows, the verl way.
            const Values qkv = rows(s.global["decoder.layers.self_attention.linear_qkv.weight"], 16 * 4, layer, 1);
            Values q, k, v;
            for (int g = 0; g < 2; ++g) {
                const Values group = rows(qkv, 4, g * 8, 8);
                q = cat({ q, rows(group, 4, 0, 4) });
                k = cat({ k, rows(group, 4, 4, 2) });
                v = cat({ v, rows(group, 4, 6, 2) });
            }
            QCOMPARE(materialize(*m.find(hf + "self_attn.q_proj.weight")), q);
            QCOMPARE(materialize(*m.find(hf + "self_attn.k_proj.weight")), k);
            QCOMPARE(materialize(*m.find(hf + "self_attn.v_proj.weight")), v);
            const Values bias = rows(s.global["decoder.layers.self_attention.linear_qkv.bias"], 16, layer, 1);
            QCOMPARE(materialize(*m.find(hf + "self_attn.q_proj.bias")),
                     cat({ rows(bias, 1, 0, 4), rows(bias, 1, 8, 4) }));
            QCOMPARE(materialize(*m.find(hf + "self_attn.k_proj.bias")), cat({ rows(bias, 1, 4, 2), rows(bias, 1, 12, 2) }));
            QCOMPARE(materialize(*m.find(hf + "self_attn.v_proj.bias")), cat({ rows(bias, 1, 6, 2), rows(bias, 1, 14, 2) }));
            // split_gate_up: first half gate, second half up.
            const Values fc1 = rows(s.global["decoder.layers.mlp.linear_fc1.weight"], 12 * 4, layer, 1);
            QCOMPARE(materialize(*m.find(hf + "mlp.gate_proj.weight")), rows(fc1, 4, 0, 6));
            QCOMPARE(materialize(*m.find(hf + "mlp.up_proj.weight")), rows(fc1, 4, 6, 6));
            // copy after unstacking (column-split pieces).
            QCOMPARE(materialize(*m.find(hf + "self_attn.o_proj.weight")),
                     rows(s.global["decoder.layers.self_attention.linear_proj.weight"], 4 * 8, layer, 1));
            QCOMPARE(materialize(*m.find(hf + "mlp.down_proj.weight")),
                     rows(s.global["decoder.layers.mlp.linear_fc2.weight"], 4 * 6, layer, 1));
            QCOMPARE(materialize(*m.find(hf + "input_layernorm.weight")),
                     rows(s.global["decoder.layers.self_attention.linear_qkv.layer_norm_weight"], 4, layer, 1));
        }
        QVERIFY(row(*r, "model.layers.1.self_attn.q_proj.weight", MappingStatus::Ok));
        QCOMPARE(QString::fromStdString(row(*r, "model.layers.1.self_attn.q_proj.weight", MappingStatus::Ok)->source),
                 QStringLiteral("decoder.layers.self_attention.linear_qkv.weight[1]"));
        QCOMPARE(QString::fromStdString(row(*r, "model.layers.1.self_attn.q_proj.weight", MappingStatus::Ok)->transform),
                 QStringLiteral("unstack_layers + split_qkv"));
    }

    void expertAxesUnstacked()
    {
        // torch_dist experts: [layers, experts, 2·ffn, hidden] → one gate/up/down per (layer, expert).
        const std::string extra = ", \"num_experts\": 3, \"moe_intermediate_size\": 2";
        Synthetic s(config("Qwen3MoeForCausalLM", extra));
        s.add("decoder.layers.mlp.experts.experts.linear_fc1.weight", { 2, 3, 4, 4 }, 2, 2);
        s.add("decoder.layers.mlp.experts.experts.linear_fc2.weight", { 2, 3, 4, 2 });
        s.add("decoder.layers.mlp.router.weight", { 2, 3, 4 });
        s.write();
        MappingOptions options;
        options.strict = false; // attention and embeddings are not part of this checkpoint
        auto r = mapMegatronToHf(s.info, options);
        QVERIFY_RESULT(r);
        QVERIFY2(r->problems.empty(), allProblems(*r).c_str());
        const Values& fc1 = s.global["decoder.layers.mlp.experts.experts.linear_fc1.weight"];
        const Values& fc2 = s.global["decoder.layers.mlp.experts.experts.linear_fc2.weight"];
        for (int layer = 0; layer < 2; ++layer)
            for (int e = 0; e < 3; ++e) {
                const std::string hf = "model.layers." + std::to_string(layer) + ".mlp.experts." + std::to_string(e) + ".";
                const Values one = rows(fc1, 16, layer * 3 + e, 1);
                QCOMPARE(materialize(*r->mapped.find(hf + "gate_proj.weight")), rows(one, 4, 0, 2));
                QCOMPARE(materialize(*r->mapped.find(hf + "up_proj.weight")), rows(one, 4, 2, 2));
                QCOMPARE(materialize(*r->mapped.find(hf + "down_proj.weight")), rows(fc2, 8, layer * 3 + e, 1));
            }
        const MappingRow* down = row(*r, "model.layers.1.mlp.experts.2.down_proj.weight", MappingStatus::Ok);
        QVERIFY(down);
        QCOMPARE(QString::fromStdString(down->source),
                 QStringLiteral("decoder.layers.mlp.experts.experts.linear_fc2.weight[1, 2]"));
        QVERIFY(row(*r, "model.layers.0.self_attn.q_proj.weight", MappingStatus::Missing));
        QVERIFY(!r->warnings.empty());
    }

    void valueHeadAndTies()
    {
        // A [1, hidden] output layer is a value head: score.weight, never trimmed or dropped.
        Synthetic s(config("LlamaForCausalLM"));
        s.add("embedding.word_embeddings.weight", { 6, 4 }, 2);
        s.add("output_layer.weight", { 1, 4 });
        s.write();
        MappingOptions lenient;
        lenient.ignoreMissing = R"(^model\.(layers|norm))";
        auto r = mapMegatronToHf(s.info, lenient);
        QVERIFY_RESULT(r);
        QVERIFY2(r->problems.empty(), allProblems(*r).c_str());
        QVERIFY(r->valueModel);
        QVERIFY(r->mapped.find("score.weight"));
        QVERIFY(!r->mapped.find("lm_head.weight"));
        QVERIFY(row(*r, "model.norm.weight", MappingStatus::Ignored));

        // Untied and no output layer: an error, never a silent drop.
        Synthetic untied(config("LlamaForCausalLM"));
        untied.add("embedding.word_embeddings.weight", { 6, 4 });
        untied.write();
        r = mapMegatronToHf(untied.info, lenient);
        QVERIFY_RESULT(r);
        QVERIFY(row(*r, "lm_head.weight", MappingStatus::Missing));
        QVERIFY2(hasProblem(*r, "tie_word_embeddings is false"), allProblems(*r).c_str());

        // Tied: lm_head is not expected, and an output layer present anyway is kept for the merge's tie check.
        std::string tiedConfig = config("LlamaForCausalLM");
        const std::string untiedKey = "\"tie_word_embeddings\": false";
        tiedConfig.replace(tiedConfig.find(untiedKey), untiedKey.size(), "\"tie_word_embeddings\": true");
        Synthetic tied(tiedConfig);
        tied.add("embedding.word_embeddings.weight", { 6, 4 });
        tied.add("output_layer.weight", { 6, 4 });
        tied.write();
        r = mapMegatronToHf(tied.info, lenient);
        QVERIFY_RESULT(r);
        QVERIFY2(r->problems.empty(), allProblems(*r).c_str());
        QVERIFY(r->tiedEmbeddings);
        QVERIFY(row(*r, "lm_head.weight", MappingStatus::Tied));
    }

    void unmappedNameAndUserRules()
    {
        Synthetic s = denseDist();
        s.add("mtp.layers.0.enorm.weight", { 4 });
        s.write();
        auto r = mapMegatronToHf(s.info, {});
        QVERIFY_RESULT(r);
        QCOMPARE(r->count(MappingStatus::Unmapped), std::size_t(1));
        QVERIFY2(hasProblem(*r, "unmapped: no llama rule maps mtp.layers.0.enorm.weight"), allProblems(*r).c_str());

        // --ignore_missing_params covers it; --no-strict turns it into a warning.
        MappingOptions ignore;
        ignore.ignoreMissing = "^mtp\\.";
        r = mapMegatronToHf(s.info, ignore);
        QVERIFY_RESULT(r);
        QVERIFY2(r->problems.empty(), allProblems(*r).c_str());
        MappingOptions lenient;
        lenient.strict = false;
        r = mapMegatronToHf(s.info, lenient);
        QVERIFY_RESULT(r);
        QVERIFY(r->problems.empty());
        QVERIFY(!r->warnings.empty());

        // A user rules file adds a rule and its expected parameter, and overrides a built-in rule by id.
        const std::string rules = s.dir + "/rules.json";
        test::writeFile(rules, R"({
          "rules": [
            { "id": "mtp_enorm", "megatron": "mtp.layers.{layer}.enorm.weight", "hf": "model.mtp.{layer}.enorm.weight" },
            { "id": "final_norm", "megatron": "decoder.final_layernorm.weight", "hf": "model.final_norm.weight" }
          ],
          "expected": [
            { "id": "mtp_enorm", "hf": "model.mtp.0.enorm.weight", "shape": ["hidden_size"] },
            { "id": "norm", "hf": "model.final_norm.weight", "shape": ["hidden_size"] }
          ]
        })");
        MappingOptions user;
        user.userRulesFile = rules;
        r = mapMegatronToHf(s.info, user);
        QVERIFY_RESULT(r);
        QVERIFY2(r->problems.empty(), allProblems(*r).c_str());
        QVERIFY(r->mapped.find("model.mtp.0.enorm.weight"));
        QVERIFY(r->mapped.find("model.final_norm.weight"));
        QVERIFY(!r->mapped.find("model.norm.weight"));
        QCOMPARE(r->ruleSources.back(), rules);

        test::writeFile(rules, R"({"rules": [{"id": "x", "megatron": "a", "hf": ["b", "c"], "transform": "split_qkv"}]})");
        auto broken = mapMegatronToHf(s.info, user);
        QVERIFY(!broken);
        QVERIFY(broken.error().message.find("writes 3 tensor(s) but 2 target name(s)") != std::string::npos);
    }

    void pathologicalPatternsAreMatchedInLinearTime()
    {
        // std::regex backtracked through every way of splitting a name among these groups: hours for a name of 60
        // characters. RE2 matches them in one pass, with today's meaning: --ignore_missing_params is searched for
        // in a name, a rule's pattern must match all of it.
        Synthetic s = denseDist();
        const std::string unmapped = "decoder.an_unknown_module_of_a_long_name.extra_parameter_weight";
        s.add(unmapped, { 4 });
        s.write();
        std::string optional;
        for (int i = 0; i < 600; ++i)
            optional += "(?:.?)";
        const std::pair<std::string, bool> patterns[] = {
            { "^(.|.)*Q$", false }, { optional + "Q", false }, { "^(.|.)*weight$", true }, { optional + "_weight", true },
        };
        for (const auto& [pattern, covers] : patterns) {
            MappingOptions options;
            options.ignoreMissing = pattern;
            auto r = mapMegatronToHf(s.info, options);
            QVERIFY_RESULT(r);
            QCOMPARE(r->count(MappingStatus::Unmapped), std::size_t(covers ? 0 : 1));
            QCOMPARE(r->count(MappingStatus::Ignored), std::size_t(covers ? 1 : 0));
        }

        // A rule whose pattern repeats {param} eight times (eight ([A-Za-z_].*) groups) matches no name here.
        const std::string rules = s.dir + "/rules.json";
        test::writeFile(rules, R"({"rules": [{"id": "greedy", "megatron": "{param}{param}{param}{param}{param}{param}{param}{param}Q",
                                              "hf": "model.{param}"}]})");
        MappingOptions user;
        user.userRulesFile = rules;
        auto r = mapMegatronToHf(s.info, user);
        QVERIFY_RESULT(r);
        QCOMPARE(r->count(MappingStatus::Unmapped), std::size_t(1));
        QVERIFY2(hasProblem(*r, "no llama rule maps " + unmapped), allProblems(*r).c_str());
        // The same placeholder twice still has to capture the same text.
        test::writeFile(rules, R"({"rules": [{"id": "twice", "megatron": "decoder.{param}.extra_{param}", "hf": "model.{param}"}]})");
        r = mapMegatronToHf(s.info, user);
        QVERIFY_RESULT(r);
        QCOMPARE(r->count(MappingStatus::Unmapped), std::size_t(1));
        test::writeFile(rules, R"({"rules": [{"id": "once", "megatron": "decoder.{param}.extra_parameter_weight",
                                              "hf": "model.extra.{param}"}]})");
        r = mapMegatronToHf(s.info, user);
        QVERIFY_RESULT(r);
        QCOMPARE(r->count(MappingStatus::Unmapped), std::size_t(0));
        QVERIFY(row(*r, "model.extra.an_unknown_module_of_a_long_name", MappingStatus::Unexpected));
    }

    void patternsRe2LacksAreRefusedByName()
    {
        Synthetic s = denseDist();
        s.write();
        const std::pair<const char*, const char*> refused[] = {
            { "^(?!model\\.norm)", "a negative lookahead (?!…)" },
            { "norm(?=\\.weight)", "a lookahead (?=…)" },
            { "(?<=layers\\.)0", "a lookbehind (?<=…)" },
            { "(?<!q)_proj", "a negative lookbehind (?<!…)" },
            { "(proj)\\.\\1", "a backreference (\\1)" },
            { "(?<p>proj)\\k<p>", "a named group (?<name>…), which RE2 (Tessera's linear-time regex engine) does not "
                                    "have: write it (?P<name>…)" },
        };
        for (const auto& [pattern, named] : refused) {
            MappingOptions options;
            options.ignoreMissing = pattern;
            auto r = mapMegatronToHf(s.info, options);
            QVERIFY2(!r, pattern);
            QVERIFY2(r.error().message.find(std::string("--ignore_missing_params '") + pattern + "' uses " + named)
                         != std::string::npos,
                     r.error().message.c_str());
        }
        MappingOptions tooLong;
        tooLong.ignoreMissing = std::string(5000, 'a');
        auto r = mapMegatronToHf(s.info, tooLong);
        QVERIFY(!r);
        QVERIFY2(r.error().message.find("is 5000 characters long; at most 4096 are accepted") != std::string::npos,
                 r.error().message.c_str());
    }

    void duplicateTargets()
    {
        Synthetic s = denseDist();
        s.add("decoder.layers.0.input_layernorm.weight", { 4 }); // the local spec's name for the same norm
        s.write();
        auto r = mapMegatronToHf(s.info, {});
        QVERIFY_RESULT(r);
        QVERIFY(row(*r, "model.layers.0.input_layernorm.weight", MappingStatus::Duplicate));
        QVERIFY2(hasProblem(*r, "duplicate"), allProblems(*r).c_str());
        QVERIFY(!planMerge(r->mapped, {}));
    }

    void wrongHeadCountInConfig()
    {
        const std::string actor = copyActor("megatron_legacy_qwen2_tp2_pp2");
        replaceIn(actor + "/hf_config_and_tokenizer/config.json", "\"num_attention_heads\": 8", "\"num_attention_heads\": 16");
        auto r = mapFixture(actor);
        QVERIFY_RESULT(r);
        QVERIFY(row(*r, "model.layers.0.self_attn.q_proj.weight", MappingStatus::ShapeMismatch));
        QVERIFY2(hasProblem(*r, "has 96 rows but config.json gives (num_attention_heads 16 + 2 × num_key_value_heads 2) "
                                "× head_dim 8 = 160"),
                 allProblems(*r).c_str());
        QVERIFY(!planMerge(r->mapped, {}));
    }

    void wrongTensorParallelSize()
    {
        // transformer_config.json says TP 1: the reader leaves the TP rank 1 folders out, and the mapping names the
        // halved tensors and the likely cause.
        const std::string actor = copyActor("megatron_legacy_qwen2_tp2_pp2");
        replaceIn(actor + "/transformer_config.json", "\"tensor_model_parallel_size\": 2", "\"tensor_model_parallel_size\": 1");
        auto r = mapFixture(actor);
        QVERIFY_RESULT(r);
        QVERIFY2(hasProblem(*r, "has 48 rows but config.json gives"), allProblems(*r).c_str());
        QVERIFY2(hasProblem(*r, "48 is 1/2 of 96, as a wrong tensor-parallel size would give (the checkpoint says TP 1"),
                 allProblems(*r).c_str());
        QVERIFY2(hasProblem(*r, "model.layers.0.self_attn.o_proj.weight: shape mismatch"), allProblems(*r).c_str());
    }

    void missingPipelineStage()
    {
        const std::string actor = copyActor("megatron_legacy_qwen2_tp2_pp2");
        fs::remove_all(actor + "/model/mp_rank_00_001");
        fs::remove_all(actor + "/model/mp_rank_01_001");
        auto r = mapFixture(actor);
        QVERIFY_RESULT(r);
        QVERIFY(row(*r, "model.layers.3.mlp.down_proj.weight", MappingStatus::Missing));
        QVERIFY2(hasProblem(*r, "model.layers.2.self_attn.q_proj.weight: missing: no source tensor fills it; rule "
                                "qkv_weight reads it from decoder.layers.2.self_attention.linear_qkv.weight"),
                 allProblems(*r).c_str());
        QVERIFY2(hasProblem(*r, "lm_head.weight: missing: config.json says tie_word_embeddings is false"),
                 allProblems(*r).c_str());
        QVERIFY(row(*r, "model.layers.1.self_attn.q_proj.weight", MappingStatus::Ok));
        QVERIFY(!planMerge(r->mapped, {}));
    }

    void inspectShowsTheMapping()
    {
        QString out;
        const std::string actor = test::fixture("megatron_dist_llama_tp2_pp2/global_step_10/actor");
        QCOMPARE(test::runTessera({ QStringLiteral("inspect"), QString::fromStdString(actor), QStringLiteral("--json") }, &out), 0);
        const auto j = nlohmann::json::parse(out.toStdString());
        QVERIFY(j.contains("mapping"));
        QCOMPARE(QString::fromStdString(j["mapping"]["family"].get<std::string>()), QStringLiteral("llama"));
        QCOMPARE(j["mapping"]["counts"]["ok"].get<int>(), 39);
        bool found = false;
        for (const auto& rowJson : j["mapping"]["rows"])
            if (rowJson["target"] == "model.layers.3.self_attn.v_proj.weight") {
                found = true;
                QCOMPARE(QString::fromStdString(rowJson["source"].get<std::string>()),
                         QStringLiteral("decoder.layers.self_attention.linear_qkv.weight[3]"));
                QVERIFY(rowJson["source_shape"] == nlohmann::json::array({ 4, 96, 64 }));
                QVERIFY(rowJson["target_shape"] == nlohmann::json::array({ 16, 64 }));
                QCOMPARE(QString::fromStdString(rowJson["status"].get<std::string>()), QStringLiteral("ok"));
            }
        QVERIFY(found);

        const std::string broken = copyActor("megatron_legacy_qwen2_tp2_pp2");
        replaceIn(broken + "/hf_config_and_tokenizer/config.json", "\"num_attention_heads\": 8", "\"num_attention_heads\": 16");
        QCOMPARE(test::runTessera({ QStringLiteral("inspect"), QString::fromStdString(broken) }, &out), 1);
        QVERIFY2(out.contains(QStringLiteral("[shape mismatch]")), qPrintable(out));
        QVERIFY(out.contains(QStringLiteral("= 160")));
    }
};

QTEST_GUILESS_MAIN(TestMegatronMapping)
#include "tst_megatron_mapping.moc"
