// SPDX-License-Identifier: GPL-3.0-or-later
// GGUF export and reading: the container, Q8_0 against hand-computed blocks, the rotary permutation as boxes,
// tokenizer metadata, and whole exports read back under Hugging Face names and compared bit for bit.

#include "testutil.h"
#include "hfmodels.h"

#include "formats/gguf_file.h"
#include "formats/gguf_quant.h"
#include "formats/gguf_reader.h"
#include "formats/gguf_tokenizer.h"
#include "formats/scan.h"
#include "merge/gguf_plan.h"
#include "merge/merge_engine.h"
#include "model/rope_permute.h"

#include <nlohmann/json.hpp>

#include <QObject>
#include <QTest>

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>

using namespace tessera;
namespace fs = std::filesystem;

namespace {

QString q(const std::string& s) { return QString::fromStdString(s); }

/// ggml's block_q8_0, stated here on its own so the table of types is checked against it: an fp16 scale, 32 int8.
constexpr std::size_t kQ8_0Bytes = 34;

/// Every tensor of `info` as float32 values (NaN bits kept by comparing with bit equality or both NaN).
std::map<std::string, std::vector<float>> readAll(const CheckpointInfo& info)
{
    std::map<std::string, std::vector<float>> out;
    SourceFiles files;
    for (std::size_t i = 0; i < info.tensors.size(); ++i) {
        auto planned = planTensorCopy(info.tensors[i], i, DType::Float32);
        if (!planned)
            qFatal("%s", planned.error().message.c_str());
        std::vector<float> values(info.tensors[i].numel());
        auto status = materializeTensor(files, info.tensors[i], *planned, reinterpret_cast<std::uint8_t*>(values.data()));
        if (!status)
            qFatal("%s", status.error().message.c_str());
        out[info.tensors[i].name] = std::move(values);
    }
    return out;
}

bool sameValues(const std::vector<float>& a, const std::vector<float>& b)
{
    if (a.size() != b.size())
        return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (!(std::memcmp(&a[i], &b[i], 4) == 0 || (std::isnan(a[i]) && std::isnan(b[i]))))
            return false;
    return true;
}

Result<GgufHeader> readHeader(const std::string& path)
{
    auto file = MappedFile::open(path);
    TESSERA_TRY(file);
    return parseGgufHeader((*file)->view());
}

std::string exportGguf(const std::string& source, const char* outtype, const std::string& extra = {})
{
    const std::string target = test::makeTempDir() + "/out";
    QStringList args = test::A({ "merge", "--local_dir", source, "--target_dir", target, "--format", "gguf",
                                 "--outtype", outtype, "--quiet" });
    if (!extra.empty())
        args << q(extra);
    QString err;
    const int code = test::runTessera(args, nullptr, &err);
    if (code != 0)
        qFatal("export failed: %s", qPrintable(err));
    for (const auto& e : fs::directory_iterator(target))
        if (e.path().extension() == ".gguf")
            return e.path().string();
    qFatal("no .gguf written in %s", target.c_str());
}

const char* const kQwen2MoeConfig = R"({
  "architectures": ["Qwen2MoeForCausalLM"], "model_type": "qwen2_moe", "hidden_size": 32,
  "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "num_hidden_layers": 2,
  "intermediate_size": 64, "moe_intermediate_size": 16, "shared_expert_intermediate_size": 32, "num_experts": 4,
  "num_experts_per_tok": 2, "vocab_size": 512, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "max_position_embeddings": 128, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0
})";

const char* const kMixtralConfig = R"({
  "architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "hidden_size": 32,
  "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2, "intermediate_size": 32,
  "num_local_experts": 4, "num_experts_per_tok": 2, "vocab_size": 512, "tie_word_embeddings": false,
  "torch_dtype": "bfloat16", "max_position_embeddings": 128, "rms_norm_eps": 1e-5
})";

const char* const kTiedQwen3Config = R"({
  "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 32, "num_attention_heads": 4,
  "num_key_value_heads": 2, "head_dim": 16, "num_hidden_layers": 2, "intermediate_size": 48, "vocab_size": 512,
  "tie_word_embeddings": true, "torch_dtype": "bfloat16", "max_position_embeddings": 128, "rms_norm_eps": 1e-6
})";

/// A Hugging Face model of `config` with the fixture's byte-level BPE tokenizer beside it.
std::string hfModelWithTokenizer(const char* config)
{
    const std::string dir = test::writeHfModel(config);
    for (const char* f : { "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json" })
        fs::copy_file(test::fixture(std::string("gguf_llama_w2_fp32/reference/") + f), dir + "/" + f);
    return dir;
}

/// Exports `dir` and checks that reading the GGUF back gives every tensor of `dir` (minus `dropped`).
void checkRoundTrip(const std::string& dir, const char* outtype, const std::vector<std::string>& dropped = {})
{
    const std::string gguf = exportGguf(dir, outtype);
    auto original = scanCheckpoint(dir);
    QVERIFY_RESULT(original);
    auto read = scanGgufFile(gguf);
    QVERIFY_RESULT(read);
    auto a = readAll(*original);
    auto b = readAll(*read);
    for (const auto& d : dropped) {
        QVERIFY2(a.erase(d) == 1, d.c_str());
        QVERIFY2(!b.count(d), d.c_str());
    }
    QCOMPARE(b.size(), a.size());
    for (const auto& [name, values] : a) {
        QVERIFY2(b.count(name), name.c_str());
        QVERIFY2(sameValues(values, b[name]), name.c_str());
    }
}

} // namespace

class TestGguf : public QObject {
    Q_OBJECT

private Q_SLOTS:
    /// The one table of types: every GgmlType and GgufOutType value has its row, ggml's geometry and llama.cpp's
    /// file types are the ones ggml.h and llama.h state, every output type parses back from its name and aliases,
    /// and the lists users read come from the table.
    void typeTablesAreComplete()
    {
        for (GgmlType t : { GgmlType::F32, GgmlType::F16, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                            GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K,
                            GgmlType::BF16 }) {
            const GgmlTypeInfo* row = findGgmlType(static_cast<std::uint32_t>(t));
            QVERIFY(row && row->type == t);
            QCOMPARE(row->quantized(), row->plainDtype == DType::Unknown);
            QCOMPARE(bool(row->dequantize), row->quantized());
            QVERIFY(!ggmlType(ggmlTypeForRows(t, 1)).quantized()); // fallbacks end in a type that always fits
        }
        QVERIFY(!findGgmlType(4)); // Q4_2, long gone from ggml
        QCOMPARE(ggmlBlock(static_cast<std::uint32_t>(GgmlType::Q8_0)), (std::pair<std::uint64_t, std::uint64_t> { 32, kQ8_0Bytes }));
        QCOMPARE(ggmlBlock(static_cast<std::uint32_t>(GgmlType::BF16)), (std::pair<std::uint64_t, std::uint64_t> { 1, 2 }));
        QCOMPARE(ggmlBlock(4), (std::pair<std::uint64_t, std::uint64_t> { 0, 0 }));
        QCOMPARE(ggmlTypeForRows(GgmlType::Q8_0, 64), GgmlType::Q8_0);
        QCOMPARE(ggmlTypeForRows(GgmlType::Q8_0, 48), GgmlType::F16);
        QCOMPARE(ggmlTypeList(), std::string("F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K and Q6_K"));
        // general.file_type: llama.cpp's llama_ftype of the same name.
        const std::map<GgufOutType, std::pair<std::string, std::uint32_t>> expected = {
            { GgufOutType::F32, { "f32", 0 } }, { GgufOutType::F16, { "f16", 1 } },
            { GgufOutType::BF16, { "bf16", 32 } }, { GgufOutType::Q8_0, { "q8_0", 7 } },
            { GgufOutType::Q4_0, { "q4_0", 2 } }, { GgufOutType::Q4_1, { "q4_1", 3 } },
            { GgufOutType::Q5_0, { "q5_0", 8 } }, { GgufOutType::Q5_1, { "q5_1", 9 } },
            { GgufOutType::Q2_K, { "q2_k", 10 } }, { GgufOutType::Q3_K_M, { "q3_k_m", 12 } },
            { GgufOutType::Q4_K_S, { "q4_k_s", 14 } }, { GgufOutType::Q4_K_M, { "q4_k_m", 15 } },
            { GgufOutType::Q5_K_S, { "q5_k_s", 16 } }, { GgufOutType::Q5_K_M, { "q5_k_m", 17 } },
            { GgufOutType::Q6_K, { "q6_k", 18 } } };
        QCOMPARE(ggufOutTypes().size(), expected.size());
        for (const auto& [id, nameAndFileType] : expected) {
            const GgufOutTypeInfo& row = ggufOutType(id);
            QCOMPARE(row.id, id);
            QCOMPARE(std::string(row.name), nameAndFileType.first);
            QCOMPARE(row.fileType, nameAndFileType.second);
            QCOMPARE(ggufOutTypeFromName(row.name), std::optional<GgufOutType>(id));
            for (const char* alias : row.aliases)
                QCOMPARE(ggufOutTypeFromName(alias), std::optional<GgufOutType>(id));
        }
        QCOMPARE(ggufOutTypeFromName("Q8_0"), std::optional<GgufOutType>(GgufOutType::Q8_0));
        QCOMPARE(ggufOutTypeFromName("Q4_K_M"), std::optional<GgufOutType>(GgufOutType::Q4_K_M));
        QVERIFY(!ggufOutTypeFromName("q3_k_s"));
        QCOMPARE(ggufOutTypeChoices(), std::string("f32, f16, bf16, q8_0, q6_k, q5_k_m, q5_k_s, q5_1, q5_0, q4_k_m, "
                                                   "q4_k_s, q4_1, q4_0, q3_k_m or q2_k"));
        QCOMPARE(ggufOutTypeChoices("|", "|"),
                 std::string("f32|f16|bf16|q8_0|q6_k|q5_k_m|q5_k_s|q5_1|q5_0|q4_k_m|q4_k_s|q4_1|q4_0|q3_k_m|q2_k"));
        // The command line's help and its refusal name exactly the table's types.
        QString so, se;
        QCOMPARE(test::runTessera({ QStringLiteral("merge"), QStringLiteral("--help") }, &so, &se), 0);
        QVERIFY2(so.contains(QStringLiteral("with --format gguf: f32, f16, bf16, q8_0, q6_k,")), qPrintable(so));
        // …and says what each is for, from the same table, in a list of their own after the options.
        const QString list = so.mid(so.indexOf(QStringLiteral("\nGGUF types:\n")));
        QVERIFY2(list.size() > 1, qPrintable(so));
        for (const auto& type : ggufOutTypes()) {
            const std::string name = type.name;
            QVERIFY2(list.contains(QString::fromStdString("\n  " + name + std::string(24 - name.size(), ' ')
                                                          + type.summary + "\n")),
                     type.name);
        }
        const std::string target = test::makeTempDir() + "/out";
        QCOMPARE(test::runTessera(test::A({ "merge", "--local_dir", test::fixture("gguf_llama_w2_fp32/global_step_10/actor"),
                                            "--target_dir", target, "--format", "gguf", "--outtype", "q4_k" }),
                                  &so, &se),
                 2);
        QVERIFY(!fs::exists(target));
        QVERIFY2(se.contains(QStringLiteral("--outtype must be f32, f16, bf16, q8_0, q6_k,")), qPrintable(se));
        QVERIFY2(se.contains(QStringLiteral(" or q2_k (got 'q4_k')")), qPrintable(se));
    }

    /// The mix of types the dry run and the workbench show, counted in one place: the type holding the most bytes
    /// first, equal bytes in ggml's numbering.
    void typeCountsPutTheLargestShareFirst()
    {
        GgufPlan plan;
        auto add = [&plan](GgmlType type, std::uint64_t bytes) {
            GgufPlannedTensor t;
            t.info.type = static_cast<std::uint32_t>(type);
            t.info.bytes = bytes;
            plan.tensors.push_back(t);
        };
        add(GgmlType::F32, 512);
        add(GgmlType::Q8_0, 2 * kQ8_0Bytes);
        add(GgmlType::F16, 1024);
        add(GgmlType::F32, 512);
        add(GgmlType::Q8_0, 64 * kQ8_0Bytes);
        add(GgmlType::F32, 0);
        const auto counts = ggufTypeCounts(plan);
        QCOMPARE(counts.size(), std::size_t(3));
        QCOMPARE(counts[0].type, static_cast<std::uint32_t>(GgmlType::Q8_0));
        QCOMPARE(counts[0].tensors, std::size_t(2));
        QCOMPARE(counts[0].bytes, std::uint64_t(66 * kQ8_0Bytes));
        QCOMPARE(counts[1].type, static_cast<std::uint32_t>(GgmlType::F32));
        QCOMPARE(counts[1].tensors, std::size_t(3));
        QCOMPARE(ggufTypeCountsText(plan), std::string("Q8_0 ×2, F32 ×3, F16 ×1"));
        QCOMPARE(ggufTypeCountsText(GgufPlan {}), std::string());
    }

    void q8_0MatchesHandComputedBlocks()
    {
        std::vector<float> x(96, 0.0f);
        // Block 0: amax 31.75 gives d = 0.25 exactly (fp16 0x3400), 1/d = 4; x·4 lands on halves, which round
        // away from zero.
        x[0] = 31.75f;
        for (int j = 1; j < 32; ++j)
            x[j] = static_cast<float>(j - 16) * 0.25f + 0.125f; // x·4 = j - 16 + 0.5
        // Block 1: all zeros: d = 0 and every q 0.
        // Block 2: amax from a negative value: d = 12.7f / 127 ≈ 0.1 (fp16 0x2E66), q = -127 and 50 → 50.
        x[64] = -12.7f;
        x[65] = 5.0f;
        // Block 3: subnormals only: d is subnormal, 1/d overflows to infinity, and every q is 0 as in ggml (the
        // fp16 scale is 0 too).
        x.resize(128, 0.0f);
        x[96] = 1e-40f;
        x[97] = -5e-41f;
        std::vector<std::uint8_t> blocks(4 * kQ8_0Bytes);
        QVERIFY_RESULT(quantizeGgml(GgmlType::Q8_0, x.data(), x.size(), blocks.data(), 2));
        auto d = [&](int b) {
            std::uint16_t h;
            std::memcpy(&h, blocks.data() + b * kQ8_0Bytes, 2);
            return h;
        };
        auto qv = [&](int b, int j) { return static_cast<int>(static_cast<std::int8_t>(blocks[b * kQ8_0Bytes + 2 + j])); };
        QCOMPARE(d(0), std::uint16_t(0x3400));
        QCOMPARE(qv(0, 0), 127);
        QCOMPARE(qv(0, 1), -15);  // -14.5
        QCOMPARE(qv(0, 15), -1);  // -0.5
        QCOMPARE(qv(0, 16), 1);   // 0.5
        QCOMPARE(qv(0, 17), 2);   // 1.5
        QCOMPARE(qv(0, 31), 16);  // 15.5
        QCOMPARE(d(1), std::uint16_t(0));
        for (int j = 0; j < 32; ++j)
            QCOMPARE(qv(1, j), 0);
        QCOMPARE(d(2), std::uint16_t(0x2E66));
        QCOMPARE(qv(2, 0), -127);
        QCOMPARE(qv(2, 1), 50);
        QCOMPARE(qv(2, 2), 0);
        QCOMPARE(d(3), std::uint16_t(0));
        for (int j = 0; j < 32; ++j)
            QCOMPARE(qv(3, j), 0);
        std::vector<float> back(96);
        QVERIFY_RESULT(dequantizeGgml(GgmlType::Q8_0, blocks.data(), 96, back.data()));
        QCOMPARE(back[0], 31.75f);
        QCOMPARE(back[1], -3.75f);
        QCOMPARE(back[64], -127 * 0.0999755859375f);
        // Many blocks on several threads give the same bytes as one thread.
        std::vector<float> big(32 * 10000);
        for (std::size_t i = 0; i < big.size(); ++i)
            big[i] = std::sin(static_cast<float>(i) * 0.37f) * static_cast<float>(i % 97);
        std::vector<std::uint8_t> one(10000 * kQ8_0Bytes), many(one.size());
        QVERIFY_RESULT(quantizeGgml(GgmlType::Q8_0, big.data(), big.size(), one.data(), 1));
        QVERIFY_RESULT(quantizeGgml(GgmlType::Q8_0, big.data(), big.size(), many.data(), 4));
        QVERIFY(one == many);
        QVERIFY(!quantizeGgml(GgmlType::Q8_0, big.data(), 33, one.data(), 1));
        // Against ggml's reference loop written out with roundf, on values that land on and near halves.
        std::vector<float> tricky(32 * 64);
        for (std::size_t i = 0; i < tricky.size(); ++i)
            tricky[i] = (i % 32 == 0) ? 127.0f * 0.03125f : (static_cast<float>(i % 509) - 254.0f) * 0.015625f
                    + ((i % 3) ? std::nextafter(0.0078125f, 1.0f) : -0.0078125f);
        std::vector<std::uint8_t> got(64 * kQ8_0Bytes);
        QVERIFY_RESULT(quantizeGgml(GgmlType::Q8_0, tricky.data(), tricky.size(), got.data(), 2));
        for (std::size_t b = 0; b < 64; ++b) {
            const float* xb = tricky.data() + b * 32;
            float amax = 0;
            for (int j = 0; j < 32; ++j)
                amax = std::max(amax, std::fabs(xb[j]));
            const float dd = amax / 127.0f;
            const float id = dd != 0.0f ? 1.0f / dd : 0.0f;
            for (int j = 0; j < 32; ++j)
                QCOMPARE(static_cast<int>(static_cast<std::int8_t>(got[b * kQ8_0Bytes + 2 + static_cast<std::size_t>(j)])),
                         static_cast<int>(std::roundf(xb[j] * id)));
        }
    }

    void headerRoundTrips()
    {
        std::vector<GgufKeyValue> md = {
            { "general.architecture", GgufValue::string("llama") },
            { "llama.block_count", GgufValue::u32(2) },
            { "llama.rope.freq_base", GgufValue::f32(10000.0f) },
            { "tokenizer.ggml.add_bos_token", GgufValue::boolean(true) },
            { "tokenizer.ggml.tokens", GgufValue::strings({ "a", "b", "<s>" }) },
            { "tokenizer.ggml.token_type", GgufValue::i32s({ 1, 1, 3 }) },
            { "tokenizer.ggml.scores", GgufValue::f32s({ 0.0, -1.5, -1000.0 }) },
        };
        std::vector<GgufTensorInfo> tensors(3);
        tensors[0] = { "token_embd.weight", { 64, 3 }, static_cast<std::uint32_t>(GgmlType::F16), 0, 0 };
        tensors[1] = { "output_norm.weight", { 5 }, static_cast<std::uint32_t>(GgmlType::F32), 0, 0 };
        tensors[2] = { "output.weight", { 64, 3 }, static_cast<std::uint32_t>(GgmlType::Q8_0), 0, 0 };
        auto layout = layoutGgufFile(md, tensors);
        QVERIFY_RESULT(layout);
        QCOMPARE(layout->dataStart % 32, std::uint64_t(0));
        QCOMPARE(tensors[0].bytes, std::uint64_t(64 * 3 * 2));
        QCOMPARE(tensors[1].offset, std::uint64_t(384));
        QCOMPARE(tensors[2].offset, std::uint64_t(384 + 32)); // 20 bytes padded to 32
        QCOMPARE(tensors[2].bytes, std::uint64_t(2 * 3 * 34));
        std::string file = layout->header;
        file.resize(layout->fileSize, '\0');
        const std::string path = test::makeTempDir() + "/t.gguf";
        test::writeFile(path, file);
        auto header = readHeader(path);
        QVERIFY_RESULT(header);
        QCOMPARE(header->version, 3u);
        QCOMPARE(header->dataStart, layout->dataStart);
        QCOMPARE(header->metadata.size(), md.size());
        QCOMPARE(*header->find("general.architecture")->asString(), std::string("llama"));
        QCOMPARE(*header->find("llama.block_count")->asInt(), std::int64_t(2));
        QCOMPARE(*header->find("llama.rope.freq_base")->asFloat(), 10000.0);
        QCOMPARE(std::get<std::vector<std::string>>(header->find("tokenizer.ggml.tokens")->data).size(), std::size_t(3));
        QCOMPARE(std::get<std::vector<std::int64_t>>(header->find("tokenizer.ggml.token_type")->data)[2], std::int64_t(3));
        QCOMPARE(std::get<std::vector<double>>(header->find("tokenizer.ggml.scores")->data)[1], -1.5);
        QCOMPARE(header->tensors.size(), std::size_t(3));
        QCOMPARE(header->tensors[2].offset, tensors[2].offset);
        QCOMPARE(header->tensors[0].dims, (std::vector<std::uint64_t> { 64, 3 }));
        // Cut short: the last tensor's data no longer fits (the padding after it may go), and the header cut
        // anywhere is an error, never a crash.
        test::writeFile(path, file.substr(0, layout->dataStart + tensors[2].offset + tensors[2].bytes));
        QVERIFY_RESULT(readHeader(path));
        test::writeFile(path, file.substr(0, layout->dataStart + tensors[2].offset + tensors[2].bytes - 1));
        QVERIFY(!readHeader(path));
        for (std::size_t cut : { std::size_t(3), std::size_t(10), std::size_t(30), layout->header.size() / 2 }) {
            test::writeFile(path, file.substr(0, cut));
            QVERIFY(!readHeader(path));
        }
        // Rows that are not whole Q8_0 blocks are refused when laying out.
        std::vector<GgufTensorInfo> odd = { { "x.weight", { 48, 2 }, static_cast<std::uint32_t>(GgmlType::Q8_0), 0, 0 } };
        QVERIFY(!layoutGgufFile({}, odd));
    }

    void rotaryPermutationIsABoxReindexing()
    {
        // A [heads·d, cols] tensor of float32 row·1000 + col stored as two uneven row shards (the second starts
        // inside a head), as FSDP leaves it.
        const std::int64_t heads = 3, hd = 8, rows = heads * hd, cols = 5;
        std::vector<float> values(rows * cols);
        for (std::int64_t r = 0; r < rows; ++r)
            for (std::int64_t c = 0; c < cols; ++c)
                values[r * cols + c] = static_cast<float>(r * 1000 + c);
        const std::string path = test::makeTempDir() + "/w.bin";
        test::writeFile(path, std::string(reinterpret_cast<const char*>(values.data()), values.size() * 4));
        TensorInfo t;
        t.name = "q";
        t.dtype = DType::Float32;
        t.shape = { rows, cols };
        for (auto [first, count] : { std::pair<std::int64_t, std::int64_t> { 0, 11 }, { 11, rows - 11 } }) {
            Piece p;
            p.file = path;
            p.offsets = { first, 0 };
            p.shape = { count, cols };
            p.strides = { cols, 1 };
            p.storedDtype = DType::Float32;
            p.dataOffset = static_cast<std::uint64_t>(first * cols * 4);
            p.storageBegin = 0;
            p.storageBytes = values.size() * 4;
            t.pieces.push_back(p);
        }
        auto view = permuteRotaryRows(t, heads, "blk.0.attn_q.weight");
        QVERIFY_RESULT(view);
        QCOMPARE(view->shape, (Shape { heads, hd / 2, 2, cols }));
        auto planned = planTensorCopy(*view, 0, DType::Float32);
        QVERIFY_RESULT(planned);
        std::vector<float> out(values.size());
        SourceFiles files;
        QVERIFY_RESULT(materializeTensor(files, *view, *planned, reinterpret_cast<std::uint8_t*>(out.data())));
        // llama.cpp row h·d + 2i + j holds Hugging Face row h·d + j·d/2 + i.
        for (std::int64_t h = 0; h < heads; ++h)
            for (std::int64_t i = 0; i < hd / 2; ++i)
                for (std::int64_t j = 0; j < 2; ++j)
                    for (std::int64_t c = 0; c < cols; ++c)
                        QCOMPARE(out[(h * hd + 2 * i + j) * cols + c], values[(h * hd + j * hd / 2 + i) * cols + c]);
        QVERIFY(!permuteRotaryRows(t, 5, "x")); // 24 rows are not 5 heads
    }

    void preTokenizerNames()
    {
        QCOMPARE(ggufPreTokenizerForRegex(R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)"),
                 std::string("gpt-2"));
        QCOMPARE(ggufPreTokenizerForRegex(
                     R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"),
                 std::string("qwen2"));
        QCOMPARE(ggufPreTokenizerForRegex("x+"), std::string());
    }

    void sentencePieceModelIsParsed()
    {
        // A hand-made ModelProto: three pieces (<unk> unknown, <s> control, ▁a with score -2.5), a trainer_spec
        // with model_type BPE, unk 0, bos 1, eos 2, pad -1, and normalizer_spec add_dummy_prefix false.
        auto varint = [](std::uint64_t v) {
            std::string s;
            do {
                std::uint8_t b = v & 0x7f;
                v >>= 7;
                s += static_cast<char>(b | (v ? 0x80 : 0));
            } while (v);
            return s;
        };
        auto field = [&](int n, int wire) { return varint(static_cast<std::uint64_t>(n) << 3 | static_cast<unsigned>(wire)); };
        auto bytesField = [&](int n, const std::string& b) { return field(n, 2) + varint(b.size()) + b; };
        auto piece = [&](const std::string& text, float score, int type) {
            std::string s = bytesField(1, text) + field(2, 5);
            s.append(reinterpret_cast<const char*>(&score), 4);
            if (type != 1)
                s += field(3, 0) + varint(static_cast<std::uint64_t>(type));
            return bytesField(1, s);
        };
        std::string model = piece("<unk>", 0, 2) + piece("<s>", 0, 3) + piece("\xE2\x96\x81" "a", -2.5f, 1);
        const std::string trainer = field(3, 0) + varint(2) + field(40, 0) + varint(0) + field(41, 0) + varint(1)
            + field(42, 0) + varint(2) + field(43, 0) + varint(static_cast<std::uint64_t>(-1));
        model += bytesField(2, trainer) + bytesField(3, field(3, 0) + varint(0));
        auto sp = parseSentencePieceModel(model, 3);
        QVERIFY_RESULT(sp);
        QCOMPARE(sp->pieces.size(), std::size_t(3));
        QCOMPARE(sp->pieces[0].type, 2);
        QCOMPARE(sp->pieces[1].type, 3);
        QCOMPARE(sp->pieces[2].text, std::string("\xE2\x96\x81" "a"));
        QCOMPARE(sp->pieces[2].score, -2.5f);
        QCOMPARE(sp->pieces[2].type, 1);
        QCOMPARE(sp->modelType, 2);
        QCOMPARE(sp->padId, -1);
        QCOMPARE(sp->addDummyPrefix, false);
        QVERIFY(!parseSentencePieceModel(model.substr(0, model.size() - 3), 3));
        QVERIFY(!parseSentencePieceModel(model, 2)); // more pieces than the embedding's rows

        // As a tokenizer folder: llama model, scores, types, padded to the embedding's rows, special ids.
        const std::string dir = test::makeTempDir();
        test::writeFile(dir + "/tokenizer.model", model);
        test::writeFile(dir + "/tokenizer_config.json", R"({"bos_token": "<s>", "add_bos_token": true})");
        auto tok = readGgufTokenizer(*listConfigFolder(dir), 5, "");
        QVERIFY_RESULT(tok);
        QCOMPARE(tok->model, std::string("llama"));
        QCOMPARE(tok->tokens, std::size_t(5));
        std::map<std::string, const GgufValue*> md;
        for (const auto& kv : tok->metadata)
            md[kv.key] = &kv.value;
        QCOMPARE(std::get<std::vector<std::string>>(md.at("tokenizer.ggml.tokens")->data)[4], std::string("[PAD4]"));
        QCOMPARE(std::get<std::vector<std::int64_t>>(md.at("tokenizer.ggml.token_type")->data),
                 (std::vector<std::int64_t> { 2, 3, 1, 5, 5 }));
        QCOMPARE(*md.at("tokenizer.ggml.bos_token_id")->asInt(), std::int64_t(1));
        QCOMPARE(*md.at("tokenizer.ggml.unknown_token_id")->asInt(), std::int64_t(0));
        QVERIFY(!md.count("tokenizer.ggml.padding_token_id"));
        QCOMPARE(std::get<bool>(md.at("tokenizer.ggml.add_space_prefix")->data), false);
        QCOMPARE(std::get<bool>(md.at("tokenizer.ggml.add_bos_token")->data), true);
        QVERIFY(!readGgufTokenizer(*listConfigFolder(dir), 2, "")); // more tokens than embedding rows
    }

    void sentencePieceFolderBecomesLlamaVocabulary()
    {
        const std::string dir = std::string(TESSERA_TEST_DATA_DIR) + "/gguf_families/sentencepiece_tokenizer";
        auto tok = readGgufTokenizer(*listConfigFolder(dir), 512, "");
        QVERIFY_RESULT(tok);
        QCOMPARE(tok->model, std::string("llama"));
        std::map<std::string, const GgufValue*> md;
        for (const auto& kv : tok->metadata)
            md[kv.key] = &kv.value;
        const auto& tokens = std::get<std::vector<std::string>>(md.at("tokenizer.ggml.tokens")->data);
        QCOMPARE(tokens.size(), std::size_t(512));
        QCOMPARE(tokens[3], std::string("<0x00>"));
        QCOMPARE(std::get<std::vector<std::int64_t>>(md.at("tokenizer.ggml.token_type")->data)[3], std::int64_t(6));
        QCOMPARE(std::get<std::vector<double>>(md.at("tokenizer.ggml.scores")->data)[260], -0.1f * 1.0);
        QCOMPARE(*md.at("tokenizer.ggml.bos_token_id")->asInt(), std::int64_t(1));
        QCOMPARE(*md.at("tokenizer.ggml.eos_token_id")->asInt(), std::int64_t(2));
        QCOMPARE(std::get<bool>(md.at("tokenizer.ggml.add_bos_token")->data), true);
        QVERIFY(md.at("tokenizer.chat_template")->asString()->find("m.role") != std::string::npos);
    }

    void fixtureF32ExportReadsBackIdentical()
    {
        const std::string gguf = exportGguf(test::fixture("gguf_llama_w2_fp32/global_step_10/actor"), "f32");
        QCOMPARE(fs::path(gguf).filename().string(), std::string("gguf_llama_w2_fp32-f32.gguf"));
        auto header = readHeader(gguf);
        QVERIFY_RESULT(header);
        QCOMPARE(*header->find("general.architecture")->asString(), std::string("llama"));
        QCOMPARE(*header->find("general.file_type")->asInt(), std::int64_t(0));
        QCOMPARE(*header->find("llama.block_count")->asInt(), std::int64_t(2));
        QCOMPARE(*header->find("llama.attention.head_count_kv")->asInt(), std::int64_t(2));
        QCOMPARE(*header->find("llama.rope.dimension_count")->asInt(), std::int64_t(32));
        QCOMPARE(*header->find("tokenizer.ggml.model")->asString(), std::string("gpt2"));
        QCOMPARE(*header->find("tokenizer.ggml.pre")->asString(), std::string("gpt-2"));
        QCOMPARE(std::get<std::vector<std::string>>(header->find("tokenizer.ggml.tokens")->data).size(), std::size_t(512));
        QCOMPARE(std::get<std::vector<std::string>>(header->find("tokenizer.ggml.merges")->data).size(), std::size_t(253));
        QCOMPARE(std::get<std::vector<std::int64_t>>(header->find("tokenizer.ggml.token_type")->data)[509], std::int64_t(3));
        QCOMPARE(*header->find("tokenizer.ggml.bos_token_id")->asInt(), std::int64_t(509));
        QCOMPARE(*header->find("tokenizer.ggml.eos_token_id")->asInt(), std::int64_t(510));
        QCOMPARE(*header->find("tokenizer.ggml.padding_token_id")->asInt(), std::int64_t(511));
        QCOMPARE(std::get<bool>(header->find("tokenizer.ggml.add_bos_token")->data), false);
        for (const auto& t : header->tensors) {
            QCOMPARE(t.type, static_cast<std::uint32_t>(GgmlType::F32));
            QCOMPARE((header->dataStart + t.offset) % 32, std::uint64_t(0));
        }
        // tessera diff of the GGUF against the reference: every tensor identical under its Hugging Face name.
        QString out;
        const int code = test::runTessera(test::A({ "diff", gguf, test::fixture("gguf_llama_w2_fp32/reference"), "--json" }), &out);
        QVERIFY2(code == 0, qPrintable(out));
        checkRoundTripAgainst(gguf, test::fixture("gguf_llama_w2_fp32/reference"));
    }

    void fixtureF16AndQ8_0Types()
    {
        const std::string actor = test::fixture("gguf_llama_w2_fp32/global_step_10/actor");
        const std::string f16 = exportGguf(actor, "f16");
        auto h16 = readHeader(f16);
        QVERIFY_RESULT(h16);
        QCOMPARE(*h16->find("general.file_type")->asInt(), std::int64_t(1));
        std::map<std::string, std::uint32_t> types;
        for (const auto& t : h16->tensors)
            types[t.name] = t.type;
        QCOMPARE(types["token_embd.weight"], static_cast<std::uint32_t>(GgmlType::F16));
        QCOMPARE(types["blk.0.attn_q.weight"], static_cast<std::uint32_t>(GgmlType::F16));
        QCOMPARE(types["blk.0.attn_norm.weight"], static_cast<std::uint32_t>(GgmlType::F32));
        QCOMPARE(types["output_norm.weight"], static_cast<std::uint32_t>(GgmlType::F32));

        // Q8_0: each quantized tensor's blocks are exactly quantizeQ8_0 of the (permuted) f32 tensor.
        const std::string q8 = exportGguf(actor, "q8_0");
        const std::string f32 = exportGguf(actor, "f32");
        auto h8 = readHeader(q8);
        QVERIFY_RESULT(h8);
        auto h32 = readHeader(f32);
        QVERIFY_RESULT(h32);
        QCOMPARE(*h8->find("general.file_type")->asInt(), std::int64_t(7));
        const std::string b8 = test::readFile(q8), b32 = test::readFile(f32);
        std::size_t quantized = 0;
        for (std::size_t i = 0; i < h8->tensors.size(); ++i) {
            const auto& t8 = h8->tensors[i];
            const auto& t32 = h32->tensors[i];
            QCOMPARE(t8.name, t32.name);
            if (t8.type != static_cast<std::uint32_t>(GgmlType::Q8_0))
                continue;
            ++quantized;
            const std::uint64_t n = t32.bytes / 4;
            std::vector<std::uint8_t> expected(n / 32 * 34);
            QVERIFY_RESULT(quantizeGgml(GgmlType::Q8_0, reinterpret_cast<const float*>(b32.data() + h32->dataStart + t32.offset), n,
                                        expected.data(), 1));
            QVERIFY2(std::memcmp(b8.data() + h8->dataStart + t8.offset, expected.data(), expected.size()) == 0,
                     t8.name.c_str());
        }
        QCOMPARE(quantized, std::size_t(2 + 2 * 7)); // token_embd, output and the 7 matrices of each layer
    }

    void q8_0ExportReadsBackDequantized()
    {
        // Every tensor reads back: Q8_0 ones as exactly the dequantized blocks of the original (rows are whole
        // blocks, so the rotary row order does not change them), the rest bit for bit.
        const std::string q8 = exportGguf(test::fixture("gguf_llama_w2_fp32/global_step_10/actor"), "q8_0");
        checkRoundTripAgainst(q8, test::fixture("gguf_llama_w2_fp32/reference"), 2 + 2 * 7);
        // Stacked experts: each expert a whole-block slice of the stacked Q8_0 tensor.
        const std::string dir = hfModelWithTokenizer(kMixtralConfig);
        checkRoundTripAgainst(exportGguf(dir, "q8_0"), dir, 2 + 2 * (4 + 3 * 4));

        auto read = scanGgufFile(q8);
        QVERIFY_RESULT(read);
        QVERIFY(read->notes.at("gguf.quantized_tensors").find("16 Q8_0 tensors") == 0);
        QVERIFY(!read->notes.count("gguf.unread_tensors"));
        const TensorInfo* q = read->find("model.layers.0.self_attn.q_proj.weight");
        QVERIFY(q);
        QCOMPARE(q->dtype, DType::Float32);
        QVERIFY(q->placement.find("Q8_0 dequantized") != std::string::npos);
        QCOMPARE(storedTypeName(q->pieces.front()), std::string("Q8_0"));

        // tessera diff against the reference: every tensor present on both sides, the quantized ones within
        // Q8_0's error (half a step of the block's scale) and the norms identical.
        QString out, err;
        const int code = test::runTessera(test::A({ "diff", q8, test::fixture("gguf_llama_w2_fp32/reference"), "--json" }),
                                          &out, &err);
        QVERIFY2(code == 0 || code == 1, qPrintable(err));
        const auto report = nlohmann::json::parse(out.toStdString());
        std::size_t compared = 0, different = 0;
        for (const auto& t : report.at("tensors")) {
            const std::string status = t.at("status").get<std::string>();
            QVERIFY2(status == "identical" || status == "different", t.dump().c_str());
            QVERIFY2(t.at("compared").get<bool>() && t.at("missing_a") == 0 && t.at("missing_b") == 0, t.dump().c_str());
            ++compared;
            different += status == "different";
        }
        QCOMPARE(compared, std::size_t(3 + 2 * 9));
        QVERIFY(different > 0 && different <= 16);
    }

    void everyQuantizedTypeReadsBackDequantized_data()
    {
        QTest::addColumn<QString>("outtype");
        for (const auto& type : ggufOutTypes())
            if (type.tensorTypeInfo().quantized())
                QTest::newRow(type.name) << QString::fromLatin1(type.name);
    }

    /// Every quantized type and its mixture (Q4_K with Q6_K, Q2_K with Q3_K and Q4_K, …) reads back as the
    /// dequantized blocks of the original: the reader takes each tensor's type and dequantizer from the table.
    void everyQuantizedTypeReadsBackDequantized()
    {
        QFETCH(QString, outtype);
        const std::string type = outtype.toStdString();
        const std::string file = exportGguf(test::fixture("gguf_llama256_w2_bf16/global_step_10/actor"), type.c_str());
        // The embedding, the head and 7 matrices in each of the 2 layers; the norms stay F32.
        checkRoundTripAgainst(file, test::fixture("gguf_llama256_w2_bf16/reference"), 2 + 2 * 7);
        QString out, err;
        const int code = test::runTessera(test::A({ "inspect", file }), &out, &err);
        QVERIFY2(code == 0, qPrintable(err));
    }

    void longQ8_0VectorReadsInWholeBlocks()
    {
        // A 1-D Q8_0 tensor longer than one slab of the engine: every slab must still start on a block.
        const std::uint64_t n = 1u << 20;
        std::vector<GgufTensorInfo> tensors = { { "extra.vector", { n }, static_cast<std::uint32_t>(GgmlType::Q8_0), 0, 0 } };
        auto layout = layoutGgufFile({ { "general.architecture", GgufValue::string("llama") } }, tensors);
        QVERIFY_RESULT(layout);
        std::vector<float> values(n);
        for (std::uint64_t i = 0; i < n; ++i)
            values[i] = std::sin(static_cast<float>(i) * 0.001f) * static_cast<float>(1 + i % 7);
        std::string file = layout->header;
        file.resize(layout->fileSize, '\0');
        QVERIFY_RESULT(quantizeGgml(GgmlType::Q8_0, values.data(), n, reinterpret_cast<std::uint8_t*>(file.data()) + layout->dataStart, 2));
        std::vector<float> expected(n);
        QVERIFY_RESULT(dequantizeGgml(GgmlType::Q8_0, reinterpret_cast<const std::uint8_t*>(file.data()) + layout->dataStart, n, expected.data()));
        const std::string path = test::makeTempDir() + "/vector.gguf";
        test::writeFile(path, file);
        auto read = scanGgufFile(path);
        QVERIFY_RESULT(read);
        QCOMPARE(read->tensors.size(), std::size_t(1));
        QVERIFY(sameValues(readAll(*read).at("extra.vector"), expected));
    }

    void moeAndTiedFamiliesReadBackIdentical()
    {
        checkRoundTrip(hfModelWithTokenizer(kQwen2MoeConfig), "bf16");
        checkRoundTrip(hfModelWithTokenizer(kMixtralConfig), "bf16");
        checkRoundTrip(hfModelWithTokenizer(kTiedQwen3Config), "bf16");
        const std::string gguf = exportGguf(hfModelWithTokenizer(kQwen2MoeConfig), "bf16");
        auto header = readHeader(gguf);
        QVERIFY_RESULT(header);
        QCOMPARE(*header->find("general.architecture")->asString(), std::string("qwen2moe"));
        QCOMPARE(*header->find("qwen2moe.expert_count")->asInt(), std::int64_t(4));
        QCOMPARE(*header->find("qwen2moe.expert_feed_forward_length")->asInt(), std::int64_t(16));
        bool stacked = false;
        for (const auto& t : header->tensors)
            if (t.name == "blk.1.ffn_down_exps.weight") {
                stacked = true;
                QCOMPARE(t.dims, (std::vector<std::uint64_t> { 16, 32, 4 }));
            }
        QVERIFY(stacked);
        auto tied = readHeader(exportGguf(hfModelWithTokenizer(kTiedQwen3Config), "f16"));
        QVERIFY_RESULT(tied);
        for (const auto& t : tied->tensors)
            QVERIFY(t.name != "output.weight");
    }

    /// A GGUF file that says one thing twice, lays two tensors over the same bytes, or puts one outside its data
    /// section or off its alignment is refused naming the file and what is wrong: llama.cpp refuses such files,
    /// and reading one would mean guessing which of two values or tensors it means.
    void ambiguousGgufIsRefused()
    {
        const std::vector<GgufKeyValue> metadata = { { "general.architecture", GgufValue::string("llama") },
                                                     { "general.name", GgufValue::string("tiny") } };
        std::vector<GgufTensorInfo> tensors(2);
        tensors[0] = { "first.weight", { 32, 2 }, static_cast<std::uint32_t>(GgmlType::F32), 0, 0 };
        tensors[1] = { "other.weight", { 32, 2 }, static_cast<std::uint32_t>(GgmlType::F32), 0, 0 };
        auto layout = layoutGgufFile(metadata, tensors);
        QVERIFY_RESULT(layout);
        std::string good = layout->header;
        good.resize(layout->fileSize, '\0');
        // The second tensor's offset field: after its name, dimension count, two dimensions and type.
        const std::size_t offsetField = good.find("other.weight") + std::strlen("other.weight") + 4 + 16 + 4;
        auto withOffset = [&](std::uint64_t offset) {
            std::string bytes = good;
            std::memcpy(bytes.data() + offsetField, &offset, 8);
            return bytes;
        };
        auto renamed = [&](const std::string& from, const std::string& to) {
            std::string bytes = good;
            bytes.replace(bytes.find(from), from.size(), to);
            return bytes;
        };
        QCOMPARE(tensors[1].offset, std::uint64_t(256));
        const std::vector<std::pair<std::string, std::string>> cases = {
            { renamed("other.weight", "first.weight"), "tensor 'first.weight' appears twice" },
            { withOffset(224), "tensor 'first.weight' and tensor 'other.weight' overlap: their data are bytes 0–256 and "
                               "224–480 of the data section" },
            { withOffset(0), "tensor 'first.weight' and tensor 'other.weight' overlap" },
            { withOffset(1u << 20), "tensor 'other.weight': its data (bytes 1048576–1048832 of the data section) "
                                    "reaches past the end of the file" },
            { withOffset(8), "tensor 'other.weight': data offset 8 is not aligned to 32" },
        };
        const std::string path = test::makeTempDir() + "/ambiguous.gguf";
        for (const auto& [bytes, expected] : cases) {
            test::writeFile(path, bytes);
            auto read = scanGgufFile(path);
            QVERIFY2(!read, expected.c_str());
            QVERIFY2(read.error().message.rfind(path + ": ", 0) == 0, read.error().message.c_str());
            QVERIFY2(read.error().message.find(expected) != std::string::npos, read.error().message.c_str());
        }
        // A key given twice (Tessera never writes one: its second copy is renamed in the bytes), from the command line.
        auto twice = metadata;
        twice.push_back({ "general.nbme", GgufValue::string("other") });
        auto doubled = layoutGgufFile(twice, tensors);
        QVERIFY_RESULT(doubled);
        std::string bytes = doubled->header;
        bytes.resize(doubled->fileSize, '\0');
        bytes.replace(bytes.find("general.nbme"), 12, "general.name");
        test::writeFile(path, bytes);
        QString out, err;
        QCOMPARE(test::runTessera(test::A({ "inspect", path }), &out, &err), 1);
        QVERIFY2(err.contains(q(path + ": metadata key 'general.name' appears twice")), qPrintable(err));
        test::writeFile(path, good);
        QVERIFY_RESULT(scanGgufFile(path));
    }

    /// A dimension of 0 holds no data, but the other dimensions are bounded all the same: their product is taken
    /// for strides and boxes (a fuzz finding: [0, 2⁴⁰, 2⁴⁰] overflowed the merge plan's element count).
    void zeroBesideHugeDimensionsIsRefused()
    {
        const std::vector<GgufKeyValue> metadata = { { "general.architecture", GgufValue::string("llama") } };
        const auto f32 = static_cast<std::uint32_t>(GgmlType::F32);
        for (const auto& dims : { std::vector<std::uint64_t> { 0, 1ull << 40, 1ull << 40 },
                                  std::vector<std::uint64_t> { 1ull << 40, 1ull << 40, 0 } }) {
            std::vector<GgufTensorInfo> tensors = { { "blk.0.ffn_up.weight", dims, f32, 0, 0 } };
            auto layout = layoutGgufFile(metadata, tensors);
            QVERIFY_RESULT(layout);
            const std::string path = test::makeTempDir() + "/zero.gguf";
            test::writeFile(path, layout->header);
            auto read = scanGgufFile(path);
            QVERIFY(!read);
            QVERIFY2(read.error().message.find("tensor 'blk.0.ffn_up.weight': dimension 1099511627776 is too large")
                         != std::string::npos,
                     read.error().message.c_str());
        }
        // A 0 beside ordinary dimensions is an empty tensor, read as one.
        std::vector<GgufTensorInfo> empty = { { "blk.0.ffn_up.weight", { 0, 4096, 4096 }, f32, 0, 0 } };
        auto layout = layoutGgufFile(metadata, empty);
        QVERIFY_RESULT(layout);
        const std::string path = test::makeTempDir() + "/empty.gguf";
        test::writeFile(path, layout->header);
        auto read = scanGgufFile(path);
        QVERIFY_RESULT(read);
        QCOMPARE(read->tensors.size(), std::size_t(1));
        QCOMPARE(read->tensors[0].numel(), std::uint64_t(0));
    }

    /// A GGUF file exported again is named after its model (general.name, else the file's own name without
    /// ".gguf"), never "X.gguf-q8_0.gguf".
    void ggufReexportIsNamedAfterTheModel()
    {
        const std::string f32 = exportGguf(test::fixture("gguf_llama_w2_fp32/global_step_10/actor"), "f32");
        const std::string dir = test::makeTempDir();
        for (const auto& f : fs::directory_iterator(test::fixture("gguf_llama_w2_fp32/global_step_10/actor/huggingface")))
            fs::copy_file(f.path(), dir + "/" + f.path().filename().string());
        const std::string named = dir + "/downloaded.gguf";
        fs::copy_file(f32, named);
        QCOMPARE(fs::path(exportGguf(named, "q8_0")).filename().string(), std::string("gguf_llama_w2_fp32-q8_0.gguf"));
        // Without general.name (the key renamed to one of the same length), the file's own name.
        std::string bytes = test::readFile(named);
        bytes.replace(bytes.find("general.name"), 12, "general.nbme");
        test::writeFile(named, bytes);
        QCOMPARE(fs::path(exportGguf(named, "q8_0")).filename().string(), std::string("downloaded-q8_0.gguf"));
    }

    void unsupportedArchitectureIsRefusedBeforeWriting()
    {
        const std::string dir = hfModelWithTokenizer(kQwen2MoeConfig);
        std::string config = test::readFile(dir + "/config.json");
        config.replace(config.find("Qwen2MoeForCausalLM"), 19, "GPTBigCodeForCausalLM");
        test::writeFile(dir + "/config.json", config);
        const std::string target = test::makeTempDir() + "/never";
        QString err;
        const int code = test::runTessera(test::A({ "merge", "--local_dir", dir, "--target_dir", target, "--format", "gguf" }),
                                          nullptr, &err);
        QCOMPARE(code, 1);
        QVERIFY2(err.contains(QStringLiteral("GPTBigCodeForCausalLM")), qPrintable(err));
        QVERIFY(!fs::exists(target));
        QCOMPARE(test::runTessera(test::A({ "merge", "--local_dir", dir, "--target_dir", target, "--format", "onnx" })), 2);
        QCOMPARE(test::runTessera(test::A({ "merge", "--local_dir", dir, "--target_dir", target, "--format", "gguf",
                                            "--outtype", "q4_k" })),
                 2);
    }

    void cancelLeavesNothingAndDamageIsAnError()
    {
        // Canceled after the first progress report: a canceled error, and the target exactly as it was.
        auto info = scanCheckpoint(test::fixture("gguf_llama_w2_fp32/global_step_10/actor"));
        QVERIFY_RESULT(info);
        GgufOptions options;
        options.outType = GgufOutType::Q8_0;
        auto plan = planGgufMerge(*info, options);
        QVERIFY_RESULT(plan);
        const std::string target = test::makeTempDir() + "/target";
        fs::create_directories(target);
        test::writeFile(target + "/keep.txt", "mine");
        test::CancelAfterFirstReport progress;
        MergeRunOptions run;
        run.threads = 1;
        run.progress = &progress;
        auto outcome = writeGgufFile(*plan, target, run);
        QVERIFY(!outcome);
        QVERIFY(outcome.error().isCanceled());
        std::vector<std::string> left;
        for (const auto& e : fs::directory_iterator(target))
            left.push_back(e.path().filename().string());
        QCOMPARE(left, std::vector<std::string> { "keep.txt" });
        // Run to the end it publishes the file and keeps the rest.
        MergeRunOptions plain;
        QVERIFY_RESULT(writeGgufFile(*plan, target, plain));
        QVERIFY(fs::exists(target + "/" + plan->fileName));
        QCOMPARE(test::readFile(target + "/keep.txt"), std::string("mine"));

        // A GGUF cut short or with a damaged header: inspect and diff say so and name the file.
        const std::string whole = test::readFile(target + "/" + plan->fileName);
        const std::string cut = test::makeTempDir() + "/cut.gguf";
        for (std::size_t size : { whole.size() - 100, std::size_t(2000), std::size_t(20) }) {
            test::writeFile(cut, whole.substr(0, size));
            QString err;
            QCOMPARE(test::runTessera(test::A({ "inspect", cut }), nullptr, &err), 1);
            QVERIFY2(err.contains(QStringLiteral("cut.gguf")), qPrintable(err));
        }
        std::string damaged = whole;
        damaged[20] = '\xff'; // the metadata count's high bytes
        test::writeFile(cut, damaged);
        QString err;
        QCOMPARE(test::runTessera(test::A({ "diff", cut, test::fixture("gguf_llama_w2_fp32/reference") }), nullptr, &err), 1);
        QVERIFY2(err.contains(QStringLiteral("cut.gguf")), qPrintable(err));
    }

private:
    /// Reads `gguf` back against `reference`: every tensor there, `quantizedCount` of them quantized and equal to the
    /// dequantized blocks of the reference's values in their type, every other one identical.
    void checkRoundTripAgainst(const std::string& gguf, const std::string& reference, std::size_t quantizedCount = 0)
    {
        auto original = scanCheckpoint(reference);
        QVERIFY_RESULT(original);
        auto read = scanGgufFile(gguf);
        QVERIFY_RESULT(read);
        auto a = readAll(*original);
        auto b = readAll(*read);
        QCOMPARE(b.size(), a.size());
        std::size_t quantized = 0;
        for (const TensorInfo& t : read->tensors) {
            QVERIFY2(a.count(t.name), t.name.c_str());
            std::vector<float> expected = a[t.name];
            if (t.pieces.front().encoding == PieceEncoding::GgmlBlocks) {
                ++quantized;
                const GgmlTypeInfo* type = nullptr;
                for (const auto& row : ggmlTypes())
                    if (storedTypeName(t.pieces.front()) == row.name)
                        type = &row;
                QVERIFY2(type && type->quantized(), t.name.c_str());
                std::vector<std::uint8_t> blocks(type->bytesOf(expected.size()));
                QVERIFY_RESULT(quantizeGgml(type->type, expected.data(), expected.size(), blocks.data(), 1));
                QVERIFY_RESULT(dequantizeGgml(type->type, blocks.data(), expected.size(), expected.data()));
            }
            QVERIFY2(sameValues(expected, b[t.name]), t.name.c_str());
        }
        QCOMPARE(quantized, quantizedCount);
    }
};

QTEST_GUILESS_MAIN(TestGguf)
#include "tst_gguf.moc"
