// SPDX-License-Identifier: GPL-3.0-or-later
// The corruption matrix: every layout Tessera reads (verl FSDP, DCP, Megatron legacy / Megatron-LM / torch_dist,
// Hugging Face safetensors single-file and sharded), copied from the smallest real fixture of that layout and
// broken in every way a disk, a copy, a crashed job or an attacker breaks it. Each case runs the real `tessera
// merge` (and `tessera inspect`) under a time and memory limit and checks that it ends with exit 1 and a message
// naming the damaged file and what is wrong, writes nothing to the target, leaves no temporary folder behind and
// runs nothing from the checkpoint.

#include "bounded_run.h"
#include "corruption_layouts.h"
#include "corruption_pickles.h"
#include "corruption_zip.h"
#include "testutil.h"

#include <nlohmann/json.hpp>

#include <QDir>
#include <QObject>
#include <QRegularExpression>
#include <QTest>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>

namespace fs = std::filesystem;
using namespace tessera::test;

namespace {

// ---- limits -------------------------------------------------------------------------------------------------
/// Wall-clock limit of one tessera run. A correct run on these fixtures takes well under a second even on a
/// loaded 2-core machine; a hang (a FIFO opened for reading, an endless walk) is killed here.
constexpr int kRunTimeoutMs = 20000;

// ---- what a message must say --------------------------------------------------------------------------------
// Loose on wording, strict on substance: the message must say the file is cut short, damaged, refused, …
const std::string kTruncated = "truncat|ends unexpectedly|too short|past the end|shorter|only \\d+ bytes|"
                               "damaged|no ZIP end";
const std::string kEmpty = "empty|0 bytes|too short|truncat";
const std::string kMissing = "missing|does not exist|no such file|not found|absent";
const std::string kNotRegular = "not a regular file|special file|device|FIFO|pipe|folder|directory|"
                                "neither a file";
const std::string kCorrupt = "corrupt|damaged|CRC|malformed|not a torch.save|not valid|cannot parse|"
                             "unknown|unexpected|invalid";
const std::string kRefused = "refus|not on .*allow-list|could run code|not allowed|never runs code";
const std::string kTooDeep = "nested|deep|depth|recursion";
const std::string kMemo = "memo";
const std::string kBadTensor = "negative|too large|overflow|larger than|beyond|past the end|outside|"
                               "exceeds|does not fit|out of range|storage|bad offset, size or stride";
const std::string kDisagree = "disagree|differ|mismatch|inconsistent|does not match|expected|gap|overlap|"
                              "world size|rank|missing|not in";
const std::string kAnything = ".";

// ---- file helpers -------------------------------------------------------------------------------------------

std::string readAll(const std::string& path) { return readFile(path); }

std::string fileName(const std::string& path) { return fs::path(path).filename().string(); }

/// The last two components of a path ("mp_rank_00_000/model.pt"): Megatron's file names alone are ambiguous.
std::string lastTwo(const std::string& path)
{
    const fs::path p(path);
    return (p.parent_path().filename() / p.filename()).string();
}

void copyTree(const fs::path& from, const fs::path& to, const std::vector<std::string>& skipTop)
{
    fs::create_directories(to);
    for (const auto& entry : fs::directory_iterator(from)) {
        const std::string name = entry.path().filename().string();
        if (std::find(skipTop.begin(), skipTop.end(), name) != skipTop.end())
            continue;
        fs::copy(entry.path(), to / name, fs::copy_options::recursive);
    }
}

/// Replaces `path` by `bytes`; returns a setup error or "".
std::string overwrite(const std::string& path, const std::string& bytes)
{
    std::error_code ec;
    fs::remove(path, ec);
    writeFile(path, bytes);
    return fs::file_size(path, ec) == bytes.size() ? std::string() : "could not write " + path;
}

std::string truncateTo(const std::string& path, std::size_t size)
{
    const std::string bytes = readAll(path);
    if (bytes.size() <= size)
        return path + " is too small to truncate to " + std::to_string(size) + " bytes";
    return overwrite(path, bytes.substr(0, size));
}

std::string flipByte(const std::string& path, std::size_t offset)
{
    std::string bytes = readAll(path);
    if (offset >= bytes.size())
        return path + " has no byte " + std::to_string(offset);
    bytes[offset] = char(bytes[offset] ^ 0x5A);
    return overwrite(path, bytes);
}

std::string replaceBy(const std::string& path, const std::function<bool(const std::string&)>& make)
{
    std::error_code ec;
    fs::remove_all(path, ec);
    return make(path) ? std::string() : "could not replace " + path + ": " + std::strerror(errno);
}

std::string symlinkTo(const std::string& path, const std::string& target)
{
    return replaceBy(path, [&](const std::string& p) { return ::symlink(target.c_str(), p.c_str()) == 0; });
}

std::string makeFifo(const std::string& path)
{
    return replaceBy(path, [](const std::string& p) { return ::mkfifo(p.c_str(), 0644) == 0; });
}

std::string makeFolder(const std::string& path)
{
    return replaceBy(path, [](const std::string& p) { return fs::create_directory(p); });
}

/// Passes the pickle of a torch.save file (its data.pkl record) or of a raw pickle file (DCP's .metadata) through
/// `edit`, keeping every ZIP CRC correct so that the pickle itself is what gets tested.
std::string editPickle(const std::string& path, bool zipped, const std::function<std::string(const std::string&)>& edit)
{
    const std::string bytes = readAll(path);
    if (!zipped) {
        std::string edited = edit(bytes);
        if (edited.empty())
            return "the edit does not apply to " + path;
        // Protocol 4 pickles (DCP's .metadata) open with a FRAME giving the length of what follows; an edit that
        // changes the length must change it too, or the case tests the frame check instead of the edit.
        if (bytes.size() > 11 && std::uint8_t(bytes[2]) == 0x95 && zip::le32(bytes, 3) == bytes.size() - 11
            && edited.size() > 11 && std::uint8_t(edited[2]) == 0x95)
            zip::set32(edited, 3, std::uint32_t(edited.size() - 11));
        return overwrite(path, edited);
    }
    bool applied = true;
    const std::string rewritten = zip::rewriteRecord(bytes, "/data.pkl", [&](const std::string& pickle) {
        std::string edited = edit(pickle);
        applied = !edited.empty();
        return edited;
    });
    if (rewritten.empty() || !applied)
        return "the edit does not apply to " + path;
    return overwrite(path, rewritten);
}

/// Rewrites integers of the first tensor in a torch.save file's pickle.
std::string editFirstTensor(const std::string& path,
                            const std::function<std::string(const std::string&, const pickle::FirstTensor&)>& edit)
{
    return editPickle(path, true, [&](const std::string& p) {
        const auto first = pickle::findFirstTensor(p);
        return first ? edit(p, *first) : std::string();
    });
}

/// Passes a safetensors file's header through `edit` and writes it back before the same data.
std::string editSafetensorsHeader(const std::string& path, const std::function<void(nlohmann::json&)>& edit)
{
    const std::string bytes = readAll(path);
    if (bytes.size() < 8)
        return path + " is not a safetensors file";
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i)
        n = (n << 8) | std::uint8_t(bytes[std::size_t(i)]);
    auto header = nlohmann::json::parse(bytes.substr(8, n), nullptr, false);
    if (header.is_discarded())
        return path + " has no JSON header";
    const std::string original = header.dump();
    edit(header);
    const std::string text = header.dump();
    if (text == original)
        return "the header edit changed nothing in " + path;
    std::string out;
    for (int i = 0; i < 8; ++i)
        out.push_back(char((std::uint64_t(text.size()) >> (8 * i)) & 0xFF));
    return overwrite(path, out + text + bytes.substr(8 + n));
}

/// The tensor entries of a safetensors header in data order.
std::vector<std::string> tensorsByOffset(const nlohmann::json& header)
{
    std::vector<std::pair<std::uint64_t, std::string>> order;
    for (const auto& [name, value] : header.items())
        if (name != "__metadata__")
            order.emplace_back(value["data_offsets"][0].get<std::uint64_t>(), name);
    std::sort(order.begin(), order.end());
    std::vector<std::string> names;
    for (auto& o : order)
        names.push_back(o.second);
    return names;
}

// ---- cases --------------------------------------------------------------------------------------------------

/// Where a case works: the damaged copy, and the paths a hostile payload would touch if it ever ran.
struct CaseDirs {
    std::string root;    ///< the copy of the fixture
    std::string marker;  ///< a payload that ran would create this file
    std::string victim;  ///< a payload that ran would delete this folder
};

/// What `tessera inspect` must do with the damaged copy.
enum class Inspect {
    Fails,   ///< exit 1 naming the file: inspect reads the damaged part (headers, pickles, the index)
    Bounded, ///< only end in time without crashing: the damage is in bytes inspect never reads (tensor data,
             ///< the config a non-Megatron inspect ignores)
};

struct Case {
    const Layout* layout = nullptr;
    std::string name;
    std::function<std::string(const CaseDirs&)> damage; ///< breaks the copy; returns a setup error or ""
    std::string fileHint;  ///< the message must contain this (the damaged file's name; "a|b": either)
    std::string what;      ///< and match this (case-insensitive): what is wrong with it
    int mergeExit = 1;     ///< 0 only where the input is legitimately still mergeable (explained at the case)
    Inspect inspect = Inspect::Fails;
};

std::string at(const CaseDirs& d, const std::string& rel) { return (fs::path(d.root) / rel).string(); }

/// Layouts, built once. The sharded Hugging Face folder is made by the test itself (see initTestCase).
std::vector<Layout>& layouts()
{
    static std::vector<Layout> all = [] {
        const std::string local = TESSERA_TEST_DATA_DIR;
        std::vector<Layout> l;
        Layout fsdp;
        fsdp.name = "verl-fsdp";
        fsdp.kind = FileKind::TorchSave;
        fsdp.fixture = local + "/fsdp2_qwen2tied_w2";
        fsdp.localDir = ".";
        fsdp.rank0 = "global_step_10/actor/model_world_size_2_rank_0.pt";
        fsdp.rank1 = "global_step_10/actor/model_world_size_2_rank_1.pt";
        fsdp.config = "global_step_10/actor/huggingface/config.json";
        fsdp.tracker = "latest_checkpointed_iteration.txt";
        // Rank 1 of another run, of world size 4, under this run's rank 1 name.
        fsdp.foreignRank = fixture("fsdp2_llama_w4/global_step_10/actor/model_world_size_4_rank_1.pt");
        l.push_back(fsdp);

        Layout dcp;
        dcp.name = "dcp";
        dcp.kind = FileKind::Dcp;
        dcp.fixture = local + "/fsdp2_qwen2tied_w2";
        dcp.localDir = "dcp";
        dcp.rank0 = "dcp/__0_0.distcp";
        dcp.rank1 = "dcp/__1_0.distcp";
        dcp.metadata = "dcp/.metadata";
        // Rank 1 of another run of another model (fp32, q/k/v biases). A foreign file whose items happen to sit at
        // the same offsets with the same shapes (the critic of the same model, say) cannot be told apart: DCP's
        // .metadata records no identity of the files it indexes.
        dcp.foreignRank = fixture("fsdp2_qwen2_w2_fp32/dcp/__1_0.distcp");
        l.push_back(dcp);

        Layout legacy;
        legacy.name = "megatron-legacy";
        legacy.kind = FileKind::TorchSave;
        legacy.fixture = fixture("megatron_legacy_qwen2_tp2_pp2");
        legacy.localDir = ".";
        legacy.rank0 = "global_step_10/actor/model/mp_rank_00_000/model.pt";
        legacy.rank1 = "global_step_10/actor/model/mp_rank_01_001/model.pt";
        legacy.config = "global_step_10/actor/hf_config_and_tokenizer/config.json";
        legacy.tracker = "latest_checkpointed_iteration.txt";
        // Pipeline stage 1 of another run (llama, TP 1, PP 4) in place of TP rank 1 of stage 1.
        legacy.foreignRank = local + "/megatron_legacy_llama_tp1_pp4/global_step_10/actor/model/mp_rank_00_001/model.pt";
        l.push_back(legacy);

        Layout lm;
        lm.name = "megatron-lm";
        lm.kind = FileKind::TorchSave;
        lm.fixture = local + "/megatron_lm_llama_tp2_pp2_vpp2";
        lm.localDir = ".";
        lm.rank0 = "iter_0000010/mp_rank_00_000/model_optim_rng.pt";
        lm.rank1 = "iter_0000010/mp_rank_01_001/model_optim_rng.pt";
        lm.config = "hf_config/config.json";
        lm.tracker = "latest_checkpointed_iteration.txt";
        // The same position of a verl legacy run of another model (qwen2: biases, other vocab padding).
        lm.foreignRank = fixture("megatron_legacy_qwen2_tp2_pp2/global_step_10/actor/model/mp_rank_01_001/model.pt");
        l.push_back(lm);

        Layout dist;
        dist.name = "megatron-dist";
        dist.kind = FileKind::Dcp;
        dist.fixture = fixture("megatron_dist_llama_tp2_pp2");
        dist.localDir = ".";
        dist.rank0 = "global_step_10/actor/dist_ckpt/__0_0.distcp";
        dist.rank1 = "global_step_10/actor/dist_ckpt/__1_0.distcp";
        dist.metadata = "global_step_10/actor/dist_ckpt/.metadata";
        dist.config = "global_step_10/actor/huggingface/config.json";
        dist.tracker = "latest_checkpointed_iteration.txt";
        dist.foreignRank = local + "/megatron_dist_qwen2_tp2_pp1/global_step_10/actor/dist_ckpt/__1_0.distcp";
        l.push_back(dist);

        Layout single;
        single.name = "hf-single";
        single.kind = FileKind::Safetensors;
        single.fixture = local + "/fsdp2_qwen2tied_w2/reference";
        single.localDir = ".";
        single.rank0 = "model.safetensors";
        single.config = "config.json";
        l.push_back(single);

        Layout sharded;
        sharded.name = "hf-sharded";
        sharded.kind = FileKind::Safetensors;
        sharded.localDir = ".";               // fixture: set by initTestCase
        sharded.rank0 = "model-00001-of-00005.safetensors";
        sharded.rank1 = "model-00002-of-00005.safetensors";
        sharded.config = "config.json";
        sharded.index = "model.safetensors.index.json";
        l.push_back(sharded);
        return l;
    }();
    return all;
}

Layout& layoutNamed(const std::string& name)
{
    for (auto& l : layouts())
        if (l.name == name)
            return l;
    return layouts().front();
}

/// The first pickle a layout's reader parses: a rank file's data.pkl, or DCP's .metadata.
std::string pickleFile(const Layout& l) { return l.kind == FileKind::Dcp ? l.metadata : l.rank0; }
bool pickleZipped(const Layout& l) { return l.kind != FileKind::Dcp; }

void addFileCases(std::vector<Case>& cases, const Layout& l)
{
    const std::string r0 = l.rank0;
    const std::string hint0 = l.kind == FileKind::TorchSave && fileName(r0).rfind("model_world", 0) != 0 ? lastTwo(r0)
                                                                                                        : fileName(r0);
    auto add = [&](std::string name, std::function<std::string(const CaseDirs&)> damage, std::string hint, std::string what,
                   Inspect inspect = Inspect::Fails, int mergeExit = 1) {
        cases.push_back({ &l, std::move(name), std::move(damage), std::move(hint), std::move(what), mergeExit, inspect });
    };

    // Truncation: inside the first record's header, half-way, and one byte short (the ZIP end record, or the
    // last tensor's last byte).
    add("truncated-at-40-bytes", [=](const CaseDirs& d) { return truncateTo(at(d, r0), 40); }, hint0, kTruncated);
    add("truncated-at-half", [=](const CaseDirs& d) { return truncateTo(at(d, r0), fs::file_size(at(d, r0)) / 2); },
        hint0, kTruncated);
    add("truncated-by-one-byte",
        [=](const CaseDirs& d) { return truncateTo(at(d, r0), fs::file_size(at(d, r0)) - 1); }, hint0, kTruncated);
    add("empty-file", [=](const CaseDirs& d) { return overwrite(at(d, r0), ""); }, hint0, kEmpty);
    add("symlink-to-dev-zero", [=](const CaseDirs& d) { return symlinkTo(at(d, r0), "/dev/zero"); }, hint0,
        kNotRegular);
    add("fifo", [=](const CaseDirs& d) { return makeFifo(at(d, r0)); }, hint0, kNotRegular);
    add("directory", [=](const CaseDirs& d) { return makeFolder(at(d, r0)); }, hint0, kNotRegular);

    if (!l.rank1.empty()) {
        const std::string r1 = l.rank1;
        const std::string hint1 = l.kind == FileKind::TorchSave && fileName(r1).rfind("model_world", 0) != 0
            ? lastTwo(r1)
            : fileName(r1);
        add("missing-rank", [=](const CaseDirs& d) {
            std::error_code ec;
            return fs::remove(at(d, r1), ec) ? std::string() : "could not remove " + r1;
        }, l.kind == FileKind::TorchSave && hint1.find('/') != std::string::npos ? hint1.substr(0, hint1.find('/'))
                                                                                 : hint1,
            kMissing);
    }
    if (!l.foreignRank.empty()) {
        const std::string r1 = l.rank1;
        const std::string foreign = l.foreignRank;
        add("foreign-rank-from-another-run",
            [=](const CaseDirs& d) { return overwrite(at(d, r1), readAll(foreign)); },
            l.kind == FileKind::TorchSave && fileName(r1).rfind("model_world", 0) != 0 ? lastTwo(r1) : fileName(r1),
            kDisagree);
    }
    if (!l.config.empty()) {
        // The config is copied into the output byte for byte (and read by the Megatron mapping): a /dev/zero in
        // its place must not be read forever. inspect reads it only for Megatron layouts.
        const std::string c = l.config;
        add("config-symlink-to-dev-zero", [=](const CaseDirs& d) { return symlinkTo(at(d, c), "/dev/zero"); },
            "config.json", kNotRegular, Inspect::Bounded);
        add("config-fifo", [=](const CaseDirs& d) { return makeFifo(at(d, c)); }, "config.json", kNotRegular,
            Inspect::Bounded);
    }
    if (!l.tracker.empty()) {
        const std::string t = l.tracker;
        add("tracker-symlink-to-dev-zero", [=](const CaseDirs& d) { return symlinkTo(at(d, t), "/dev/zero"); },
            "latest_checkpointed_iteration.txt", kAnything);
        add("tracker-fifo", [=](const CaseDirs& d) { return makeFifo(at(d, t)); },
            "latest_checkpointed_iteration.txt", kAnything);
    }
}

void addTorchSaveCases(std::vector<Case>& cases, const Layout& l)
{
    const std::string r0 = l.rank0;
    const std::string hint0 = fileName(r0).rfind("model_world", 0) == 0 ? fileName(r0) : lastTwo(r0);
    auto add = [&](std::string name, std::function<std::string(const CaseDirs&)> damage, std::string what,
                   Inspect inspect = Inspect::Fails) {
        cases.push_back({ &l, std::move(name), std::move(damage), hint0, std::move(what), 1, inspect });
    };
    add("flipped-zip-signature", [=](const CaseDirs& d) { return flipByte(at(d, r0), 1); }, kCorrupt);
    add("flipped-central-directory", [=](const CaseDirs& d) {
        const std::string bytes = readAll(at(d, r0));
        const auto records = zip::readRecords(bytes);
        if (!records || records->empty())
            return std::string("not a ZIP");
        return flipByte(at(d, r0), records->front().centralPos + 2); // the central header's signature
    }, kCorrupt);
    // Bytes flipped in the pickle without fixing the CRC: the CRC check must catch it.
    add("flipped-pickle-byte", [=](const CaseDirs& d) {
        const auto rec = zip::findRecord(readAll(at(d, r0)), "/data.pkl");
        return rec ? flipByte(at(d, r0), rec->dataPos + rec->payload.size() / 2) : std::string("no data.pkl");
    }, kCorrupt);
    // Bytes flipped in tensor data: only the CRC-32 can tell, and inspect never reads data.
    add("flipped-tensor-data", [=](const CaseDirs& d) {
        const auto rec = zip::findRecord(readAll(at(d, r0)), "/data/0");
        return rec ? flipByte(at(d, r0), rec->dataPos + rec->payload.size() / 2) : std::string("no data/0");
    }, kCorrupt, Inspect::Bounded);

    // Tensors whose sizes, strides and offsets cannot be right, with every CRC correct.
    using pickle::FirstTensor;
    using pickle::Writer;
    auto tensorCase = [&](std::string name, std::function<std::string(const std::string&, const FirstTensor&)> edit) {
        add(std::move(name), [=](const CaseDirs& d) { return editFirstTensor(at(d, r0), edit); }, kBadTensor);
    };
    tensorCase("huge-declared-storage", [](const std::string& p, const FirstTensor& t) {
        return pickle::replaceInt(p, t.numel, Writer::encodeInt(std::int64_t(1) << 62));
    });
    tensorCase("storage-offset-past-the-end", [](const std::string& p, const FirstTensor& t) {
        return pickle::replaceInt(p, t.storageOffset, Writer::encodeInt(1'000'000'000));
    });
    tensorCase("storage-offset-overflowing", [](const std::string& p, const FirstTensor& t) {
        return pickle::replaceInt(p, t.storageOffset, Writer::encodeInt(INT64_MAX));
    });
    tensorCase("negative-size", [](const std::string& p, const FirstTensor& t) {
        return pickle::replaceInt(p, t.sizes[0], Writer::encodeInt(-1));
    });
    tensorCase("sizes-overflowing-their-product", [](const std::string& p, const FirstTensor& t) {
        if (t.sizes.size() < 2)
            return std::string();
        // Replace the later integer first so that the earlier one's position stays right.
        const std::string q = pickle::replaceInt(p, t.sizes[1], Writer::encodeInt(std::int64_t(1) << 40));
        return pickle::replaceInt(q, t.sizes[0], Writer::encodeInt(std::int64_t(1) << 40));
    });
    tensorCase("size-wider-than-64-bits", [](const std::string& p, const FirstTensor& t) {
        return pickle::replaceInt(p, t.sizes[0], Writer::hugeInt(16));
    });
    tensorCase("negative-stride", [](const std::string& p, const FirstTensor& t) {
        return pickle::replaceInt(p, t.strides[0], Writer::encodeInt(-1));
    });
    tensorCase("huge-stride", [](const std::string& p, const FirstTensor& t) {
        return pickle::replaceInt(p, t.strides[0], Writer::encodeInt(std::int64_t(1) << 62));
    });

    if (!l.rank1.empty()) {
        // One row fewer in rank 1's copy of the first tensor: its storage still holds it, but the ranks now
        // disagree on the shape.
        const std::string r1 = l.rank1;
        const std::string hint1 = fileName(r1).rfind("model_world", 0) == 0 ? fileName(r1) : lastTwo(r1);
        cases.push_back({ &l, "shape-disagrees-across-ranks", [=](const CaseDirs& d) {
            return editFirstTensor(at(d, r1), [](const std::string& p, const FirstTensor& t) {
                const std::string slot = p.substr(t.sizes[0].pos, t.sizes[0].len);
                std::int64_t rows = 0;
                if (slot[0] == 'K')
                    rows = std::uint8_t(slot[1]);
                else if (slot[0] == 'M')
                    rows = std::uint8_t(slot[1]) | std::uint8_t(slot[2]) << 8;
                else
                    return std::string();
                return pickle::replaceInt(p, t.sizes[0], Writer::encodeInt(rows - 1));
            });
        }, hint1, kDisagree, 1, Inspect::Fails });
    }
}

void addDcpCases(std::vector<Case>& cases, const Layout& l)
{
    const std::string r0 = l.rank0;
    const std::string m = l.metadata;
    auto add = [&](std::string name, std::function<std::string(const CaseDirs&)> damage, std::string hint, std::string what,
                   Inspect inspect = Inspect::Fails) {
        cases.push_back({ &l, std::move(name), std::move(damage), std::move(hint), std::move(what), 1, inspect });
    };
    add("metadata-truncated-at-half",
        [=](const CaseDirs& d) { return truncateTo(at(d, m), fs::file_size(at(d, m)) / 2); }, ".metadata",
        kTruncated);
    add("metadata-empty", [=](const CaseDirs& d) { return overwrite(at(d, m), ""); }, ".metadata", kEmpty);
    add("metadata-missing", [=](const CaseDirs& d) {
        std::error_code ec;
        return fs::remove(at(d, m), ec) ? std::string() : "could not remove .metadata";
    }, "", kAnything);
    add("metadata-symlink-to-dev-zero", [=](const CaseDirs& d) { return symlinkTo(at(d, m), "/dev/zero"); },
        ".metadata", kNotRegular);
    add("metadata-fifo", [=](const CaseDirs& d) { return makeFifo(at(d, m)); }, ".metadata", kNotRegular);
    // The first item of a .distcp is a torch.save ZIP: its signature flipped, then bytes in the middle of the
    // file (tensor data of some item, which only the CRC-32 can tell; inspect never reads it).
    add("flipped-item-signature", [=](const CaseDirs& d) { return flipByte(at(d, r0), 1); }, fileName(r0), kCorrupt,
        Inspect::Bounded);
    add("flipped-item-data", [=](const CaseDirs& d) {
        const std::string bytes = readAll(at(d, r0));
        // The last bytes of the first item's data/0 record lie just before its second record's local header.
        const std::size_t second = bytes.find(std::string("PK\x03\x04", 4), 4);
        return second == std::string::npos || second < 200 ? std::string("no second record")
                                                            : flipByte(at(d, r0), second - 100);
    }, fileName(r0), kCorrupt, Inspect::Bounded);
}

void addDistCases(std::vector<Case>& cases, const Layout& l)
{
    const fs::path dir = fs::path(l.metadata).parent_path();
    const std::string common = (dir / "common.pt").string();
    const std::string json = (dir / "metadata.json").string();
    auto add = [&](std::string name, std::function<std::string(const CaseDirs&)> damage, std::string hint, std::string what) {
        cases.push_back({ &l, std::move(name), std::move(damage), std::move(hint), std::move(what), 1, Inspect::Fails });
    };
    add("metadata-json-not-json", [=](const CaseDirs& d) { return overwrite(at(d, json), "{\"sharded_backend\": "); },
        "metadata.json", kCorrupt);
    add("metadata-json-symlink-to-dev-zero", [=](const CaseDirs& d) { return symlinkTo(at(d, json), "/dev/zero"); },
        "metadata.json", kAnything);
    add("common-pt-truncated", [=](const CaseDirs& d) { return truncateTo(at(d, common), 100); }, "common.pt",
        kTruncated);
    add("common-pt-hostile-global", [=](const CaseDirs& d) {
        return editPickle(at(d, common), true, [&](const std::string&) { return pickle::osSystem(d.marker); });
    }, "common.pt", kRefused);
}

void addPickleCases(std::vector<Case>& cases, const Layout& l)
{
    const std::string file = pickleFile(l);
    const bool zipped = pickleZipped(l);
    const std::string hint = fileName(file).rfind("model_world", 0) == 0 || !zipped ? fileName(file) : lastTwo(file);
    auto add = [&](std::string name, std::function<std::string(const CaseDirs&, const std::string&)> make, std::string what) {
        cases.push_back({ &l, "pickle-" + name, [=](const CaseDirs& d) {
            return editPickle(at(d, file), zipped, [&](const std::string& original) { return make(d, original); });
        }, hint, std::move(what), 1, Inspect::Fails });
    };
    add("os-system", [](const CaseDirs& d, const std::string&) { return pickle::osSystem(d.marker); }, kRefused);
    add("stack-global-posix-system",
        [](const CaseDirs& d, const std::string&) { return pickle::stackGlobalSystem(d.marker); }, kRefused);
    add("inst-os-system", [](const CaseDirs& d, const std::string&) { return pickle::instSystem(d.marker); },
        kRefused + "|INST|opcode");
    add("getattr-import-eval", [](const CaseDirs& d, const std::string&) { return pickle::getattrEval(d.marker); },
        kRefused);
    add("shutil-rmtree-in-state-dict",
        [](const CaseDirs& d, const std::string&) { return pickle::rmtreeInStateDict(d.victim); }, kRefused);
    add("lists-nested-100000-deep", [](const CaseDirs&, const std::string&) { return pickle::deepLists(100000); },
        kTooDeep);
    add("tuples-nested-50000-deep", [](const CaseDirs&, const std::string&) { return pickle::deepTuples(50000); },
        kTooDeep + "|MARK");
    add("billion-laughs", [](const CaseDirs&, const std::string&) {
        return pickle::billionLaughs(30, "model.embed_tokens.weight");
    }, kAnything);
    add("huge-memo-index", [](const CaseDirs&, const std::string&) { return pickle::hugeMemoPut(); }, kMemo);
    add("memo-get-never-stored", [](const CaseDirs&, const std::string&) { return pickle::memoGetNeverStored(); },
        kMemo);
    add("cut-in-half", [](const CaseDirs&, const std::string& p) { return pickle::cut(p, p.size() / 2); }, kTruncated);
    // A torch function's name changed by one letter where the pickle calls it (REDUCE): "_rebuild_tensor_v2" →
    // "_rebuild_tensor_vz" in a torch.save pickle, "torch.Size" → "torch.Sizz" in DCP's metadata. A callable
    // the allow-list does not know must be refused, not called and not skipped.
    add("reduce-of-unknown-torch-function", [zipped](const CaseDirs&, const std::string& p) {
        const std::string from = zipped ? std::string("\n_rebuild_tensor_v2\n") : std::string("\x8c\x04Size", 6);
        const std::string to = zipped ? std::string("\n_rebuild_tensor_vz\n") : std::string("\x8c\x04Sizz", 6);
        const auto at = p.find(from);
        return at == std::string::npos ? std::string() : p.substr(0, at) + to + p.substr(at + from.size());
    }, kRefused);
    // An opcode in the middle of the stream replaced by a byte that is no opcode.
    add("unknown-opcode", [](const CaseDirs&, const std::string& p) {
        const auto ops = pickle::opcodePositions(p);
        if (ops.size() < 4)
            return std::string();
        std::string q = p;
        q[ops[ops.size() / 2]] = '\xff';
        return q;
    }, kCorrupt + "|opcode");
}

void addSafetensorsCases(std::vector<Case>& cases, const Layout& l)
{
    const std::string r0 = l.rank0;
    const std::string hint0 = fileName(r0);
    auto add = [&](std::string name, std::function<std::string(const CaseDirs&)> damage, std::string what,
                   Inspect inspect = Inspect::Fails, int mergeExit = 1) {
        cases.push_back({ &l, std::move(name), std::move(damage), hint0, std::move(what), mergeExit, inspect });
    };
    auto header = [&](std::string name, std::function<void(nlohmann::json&)> edit, std::string what) {
        add(std::move(name), [=](const CaseDirs& d) { return editSafetensorsHeader(at(d, r0), edit); }, what);
    };
    add("header-length-2^63", [=](const CaseDirs& d) {
        std::string bytes = readAll(at(d, r0));
        for (int i = 0; i < 8; ++i)
            bytes[std::size_t(i)] = char(i == 7 ? 0x7F : 0xFF);
        return overwrite(at(d, r0), bytes);
    }, std::string("header|too large|too long|larger|only"));
    add("header-length-past-the-file", [=](const CaseDirs& d) {
        std::string bytes = readAll(at(d, r0));
        const std::uint64_t n = bytes.size();
        for (int i = 0; i < 8; ++i)
            bytes[std::size_t(i)] = char((n >> (8 * i)) & 0xFF);
        return overwrite(at(d, r0), bytes);
    }, std::string("header|only|truncat"));
    add("header-not-json", [=](const CaseDirs& d) { return flipByte(at(d, r0), 8); }, kCorrupt + "|JSON");
    header("offsets-overlapping", [](nlohmann::json& h) {
        // The second tensor moved 2 bytes back into the first one (same length): an overlap, and a hole at the end.
        const auto names = tensorsByOffset(h);
        auto& second = h[names.at(1)]["data_offsets"];
        second = { second[0].get<std::uint64_t>() - 2, second[1].get<std::uint64_t>() - 2 };
    }, "overlap|gap|offset|hole|not contiguous|covers");
    header("offsets-past-the-end", [](nlohmann::json& h) {
        auto& last = h[tensorsByOffset(h).back()]["data_offsets"];
        last = { last[0].get<std::uint64_t>() + 4096, last[1].get<std::uint64_t>() + 4096 };
    }, std::string("past the end|truncat|beyond|outside|offset|only|file has|need"));
    header("offsets-not-matching-shape", [](nlohmann::json& h) {
        auto& first = h[tensorsByOffset(h).front()]["shape"];
        first[0] = first[0].get<std::int64_t>() * 2;
    }, std::string("shape|bytes|size|offset"));
    header("unknown-dtype", [](nlohmann::json& h) { h[tensorsByOffset(h).front()]["dtype"] = "Q7"; },
           std::string("dtype|Q7"));
    header("negative-dimension", [](nlohmann::json& h) { h[tensorsByOffset(h).front()]["shape"][0] = -1; },
           std::string("negative|shape|dimension|not a|invalid"));
    header("dimensions-overflowing", [](nlohmann::json& h) {
        h[tensorsByOffset(h).front()]["shape"] = { std::uint64_t(1) << 40, std::uint64_t(1) << 40 };
    }, std::string("overflow|too large|shape|dimension|bytes"));
    // Flipped tensor data: safetensors has no checksum, so the file is well-formed and legitimately merges
    // (exit 0); the merge copies the bytes it was given. This row checks that it merges and stays bounded.
    add("flipped-tensor-data", [=](const CaseDirs& d) {
        return flipByte(at(d, r0), std::size_t(fs::file_size(at(d, r0)) - 10));
    }, kAnything, Inspect::Bounded, 0);
}

void addIndexCases(std::vector<Case>& cases, const Layout& l)
{
    const std::string ix = l.index;
    auto add = [&](std::string name, std::function<std::string(const CaseDirs&)> damage, std::string hint, std::string what) {
        cases.push_back({ &l, std::move(name), std::move(damage), std::move(hint), std::move(what), 1, Inspect::Fails });
    };
    // Points every tensor of the first shard at another file name.
    auto retarget = [=](const CaseDirs& d, const std::string& to) {
        auto index = nlohmann::json::parse(readAll(at(d, ix)), nullptr, false);
        if (index.is_discarded())
            return std::string("the index is not JSON");
        for (auto& [tensor, file] : index["weight_map"].items())
            if (file == fileName(l.rank0))
                file = to;
        return overwrite(at(d, ix), index.dump(2));
    };
    add("index-names-dotdot-path", [=](const CaseDirs& d) {
        // The file it names exists, outside the folder: a reader that followed it would read it.
        const fs::path outside = fs::path(d.root).parent_path() / "outside.safetensors";
        fs::copy_file(at(d, l.rank0), outside);
        return retarget(d, "../outside.safetensors");
    }, "outside.safetensors", std::string("not a file in this folder|outside|not allowed|path"));
    add("index-names-absolute-path", [=](const CaseDirs& d) {
        const fs::path outside = fs::path(d.root).parent_path() / "absolute.safetensors";
        fs::copy_file(at(d, l.rank0), outside);
        return retarget(d, outside.string());
    }, "absolute.safetensors", std::string("not a file in this folder|outside|not allowed|absolute|path"));
    add("index-names-missing-file", [=](const CaseDirs& d) { return retarget(d, "model-00009-of-00009.safetensors"); },
        "model-00009-of-00009.safetensors", kMissing);
    add("index-not-json", [=](const CaseDirs& d) { return truncateTo(at(d, ix), 40); }, "model.safetensors.index.json",
        kCorrupt + "|JSON");
    add("index-symlink-to-dev-zero", [=](const CaseDirs& d) { return symlinkTo(at(d, ix), "/dev/zero"); },
        "model.safetensors.index.json", kNotRegular + "|too large|larger");
    add("index-fifo", [=](const CaseDirs& d) { return makeFifo(at(d, ix)); }, "model.safetensors.index.json",
        kNotRegular);
}

/// Passes a JSON side file (fsdp_config.json, transformer_config.json) through `edit`.
std::string editJson(const std::string& path, const std::function<void(nlohmann::json&)>& edit)
{
    auto json = nlohmann::json::parse(readAll(path), nullptr, false);
    if (json.is_discarded())
        return path + " is not JSON";
    edit(json);
    return overwrite(path, json.dump(2));
}

/// Cases on the parts of a layout that name or size things: rank numbers in file and folder names, parallel
/// sizes in side files and args, layer numbers in tensor names, DTensor placements and mesh coordinates, and
/// DCP's chunk and storage records. Each value is made impossible (out of range, negative, past 64 bits).
void addStructureCases(std::vector<Case>& cases, const Layout& l)
{
    using pickle::Writer;
    auto add = [&](std::string name, std::function<std::string(const CaseDirs&)> damage, std::string hint,
                   std::string what) {
        cases.push_back({ &l, std::move(name), std::move(damage), std::move(hint), std::move(what), 1, Inspect::Fails });
    };
    // Sets the integer stored under `key` in a pickle to `encoded`.
    auto intCase = [&](std::string name, std::string file, bool zipped, std::string key, std::string encoded,
                       std::string hint, std::string what) {
        add(std::move(name), [=](const CaseDirs& d) {
            return editPickle(at(d, file), zipped, [&](const std::string& p) {
                const auto slot = pickle::intAfterKey(p, key);
                return slot ? pickle::replaceInt(p, *slot, encoded) : std::string();
            });
        }, std::move(hint), std::move(what));
    };
    const std::string huge = Writer::encodeInt(std::int64_t(1) << 62);
    const std::string negative = Writer::encodeInt(-1);
    const std::string wider = Writer::hugeInt(16);
    const std::string kRange = "range|too large|too many|overflow|negative|invalid|exceeds|not a|must be|bad|"
                               "at most|out of|does not fit|beyond|past";

    if (l.name == "verl-fsdp") {
        const fs::path actor = fs::path(l.rank0).parent_path();
        const std::string cfg = (actor / "fsdp_config.json").string();
        add("fsdp-config-world-size-huge",
            [=](const CaseDirs& d) { return editJson(at(d, cfg), [](auto& j) { j["world_size"] = 1000000000000LL; }); },
            "fsdp_config.json", kRange + "|world size|missing");
        add("rank-number-overflowing-in-file-name", [=](const CaseDirs& d) {
            std::error_code ec;
            fs::copy_file(at(d, l.rank1), at(d, (actor / "model_world_size_2_rank_99999999999999999999.pt").string()),
                          ec);
            return ec ? ec.message() : std::string();
        }, "99999999999999999999", kRange + "|rank");
        intCase("shard-dim-out-of-range", l.rank0, true, "dim", Writer::encodeInt(7), fileName(l.rank0),
                kRange + "|dim");
        intCase("shard-dim-negative", l.rank0, true, "dim", negative, fileName(l.rank0), kRange + "|dim");
        intCase("mesh-coordinate-out-of-range", l.rank0, true, "_coordinate_on_dim", Writer::encodeInt(5),
                fileName(l.rank0), kRange + "|coordinate|mesh|rank");
    }
    if (l.name == "megatron-legacy" || l.name == "megatron-dist") {
        // The actor folder: above model/mp_rank_XX_YYY/ for the legacy layout, above dist_ckpt/ for torch_dist.
        const fs::path dataFolder = fs::path(l.rank0).parent_path();
        const fs::path actor = l.name == "megatron-legacy" ? dataFolder.parent_path().parent_path()
                                                           : dataFolder.parent_path();
        const std::string cfg = (actor / "transformer_config.json").string();
        add("transformer-config-layers-huge",
            [=](const CaseDirs& d) { return editJson(at(d, cfg), [](auto& j) { j["num_layers"] = std::int64_t(1) << 62; }); },
            "transformer_config.json", kRange + "|layers|num_layers");
        add("transformer-config-tp-negative", [=](const CaseDirs& d) {
            return editJson(at(d, cfg), [](auto& j) { j["tensor_model_parallel_size"] = -2; });
        }, "transformer_config.json", kRange + "|tensor_model_parallel_size");
    }
    if (l.name == "megatron-legacy" || l.name == "megatron-lm") {
        const fs::path rankFolder = fs::path(l.rank0).parent_path();
        add("rank-number-overflowing-in-folder-name", [=](const CaseDirs& d) {
            std::error_code ec;
            fs::copy(at(d, rankFolder.string()),
                     at(d, (rankFolder.parent_path() / "mp_rank_99999999999999999999_000").string()),
                     fs::copy_options::recursive, ec);
            return ec ? ec.message() : std::string();
        }, "mp_rank_99999999999999999999_000", kRange + "|rank|mp_rank");
        add("layer-number-overflowing-in-tensor-name", [=](const CaseDirs& d) {
            return editPickle(at(d, l.rank0), true, [](const std::string& p) {
                return pickle::replaceInFirstText(p, "layers.0.", "layers.99999999999999999999.");
            });
        }, lastTwo(l.rank0), kRange + "|layer");
    }
    if (l.name == "megatron-lm") {
        intCase("args-tp-size-huge", l.rank0, true, "tensor_model_parallel_size", huge, lastTwo(l.rank0),
                kRange + "|tensor_model_parallel_size|TP");
        intCase("args-num-layers-negative", l.rank0, true, "num_layers", negative, lastTwo(l.rank0),
                kRange + "|num_layers|layers");
    }
    if (l.kind == FileKind::Dcp) {
        intCase("metadata-tensor-size-huge", l.metadata, false, "size", huge, ".metadata", kRange + "|size|shape");
        intCase("metadata-tensor-size-wider-than-64-bits", l.metadata, false, "size", wider, ".metadata",
                kRange + "|size|shape|integer");
        intCase("metadata-chunk-offset-past-the-tensor", l.metadata, false, "offsets", Writer::encodeInt(1000000),
                ".metadata", kRange + "|chunk|offset|outside|gap|overlap");
        intCase("metadata-storage-offset-past-the-file", l.metadata, false, "offset",
                Writer::encodeInt(1'000'000'000'000LL), fileName(l.rank0) + "|.metadata",
                kRange + "|truncat|offset|outside");
        intCase("metadata-storage-length-huge", l.metadata, false, "length", huge, ".metadata",
                kRange + "|truncat|length|outside");
    }
}

std::vector<Case>& allCases()
{
    static std::vector<Case> cases = [] {
        std::vector<Case> c;
        for (const auto& l : layouts()) {
            addFileCases(c, l);
            if (l.kind == FileKind::TorchSave)
                addTorchSaveCases(c, l);
            if (l.kind == FileKind::Dcp)
                addDcpCases(c, l);
            if (l.name == "megatron-dist")
                addDistCases(c, l);
            if (l.kind != FileKind::Safetensors)
                addPickleCases(c, l);
            if (l.kind == FileKind::Safetensors)
                addSafetensorsCases(c, l);
            if (!l.index.empty())
                addIndexCases(c, l);
            addStructureCases(c, l);
        }
        return c;
    }();
    return cases;
}

std::string caseTag(const Case& c) { return c.layout->name + "/" + c.name; }

/// A case tag as a folder name.
std::string safeName(std::string tag)
{
    std::replace(tag.begin(), tag.end(), '/', '_');
    return tag;
}

/// Temporary folders a merge leaves beside its target while it runs (".<target>.tessera-…").
QStringList leftoversBeside(const fs::path& target)
{
    QStringList found;
    const std::string prefix = "." + target.filename().string() + ".tessera-";
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(target.parent_path(), ec)) {
        const std::string name = entry.path().filename().string();
        if (name.rfind(prefix, 0) == 0 || name.find(".tessera-") != std::string::npos)
            found << QString::fromStdString(name);
    }
    return found;
}

/// True when `text` contains `hint`, or one of its '|'-separated alternatives.
bool namesFile(const QString& text, const std::string& hint)
{
    const QStringList alternatives = QString::fromStdString(hint).split(QLatin1Char('|'));
    return std::any_of(alternatives.begin(), alternatives.end(), [&](const QString& a) { return text.contains(a); });
}

/// Names and sizes of everything under `dir`, to tell whether a run changed it.
std::map<std::string, std::uintmax_t> listing(const fs::path& dir)
{
    std::map<std::string, std::uintmax_t> files;
    std::error_code ec;
    for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        std::error_code sizeEc;
        const auto size = it->is_regular_file(sizeEc) ? it->file_size(sizeEc) : 0;
        files[fs::relative(it->path(), dir, sizeEc).string()] = size;
    }
    return files;
}

} // namespace

class CorruptionMatrix : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase();
    void rejects_data();
    void rejects();
    void everyLayoutIsCovered();

private:
    std::string m_work;
};

void CorruptionMatrix::initTestCase()
{
    m_work = makeTempDir();
    // The sharded Hugging Face folder: the single-file reference re-merged with a small shard size, which is
    // how transformers' own save_pretrained shards (files model-0000i-of-0000n plus the index).
    const std::string sharded = m_work + "/hf_sharded_fixture";
    const auto made = runTesseraBounded({ "merge", "--local_dir", layoutNamed("hf-single").fixture, "--target_dir",
                                          sharded, "--max_shard_size", "100KB", "--quiet" },
                                        kRunTimeoutMs * 3);
    QVERIFY2(made.exitCode == 0, qPrintable(QStringLiteral("could not make the sharded folder: ") + made.err));
    QVERIFY(fs::exists(sharded + "/model.safetensors.index.json"));
    QVERIFY(fs::exists(sharded + "/model-00005-of-00005.safetensors"));
    for (auto& l : layouts())
        if (l.name == "hf-sharded")
            l.fixture = sharded;
}

void CorruptionMatrix::rejects_data()
{
    QTest::addColumn<int>("index");
    const auto& cases = allCases();
    for (std::size_t i = 0; i < cases.size(); ++i)
        QTest::newRow(caseTag(cases[i]).c_str()) << int(i);
}

void CorruptionMatrix::rejects()
{
    QFETCH(int, index);
    const Case& c = allCases()[std::size_t(index)];
    const Layout& l = *c.layout;

    // Every case gets its own folder: the damaged copy, the target beside it, and the payloads' tripwires.
    const fs::path dir = fs::path(m_work) / safeName(caseTag(c));
    fs::create_directories(dir);
    CaseDirs d;
    d.root = (dir / "in").string();
    d.marker = (dir / "payload-ran").string();
    d.victim = (dir / "victim").string();
    fs::create_directories(d.victim);
    copyTree(l.fixture, d.root, l.kind == FileKind::Safetensors ? std::vector<std::string> {}
                                                                 : std::vector<std::string> { "reference" });
    const std::string setup = c.damage(d);
    QVERIFY2(setup.empty(), setup.c_str());

    // Half the cases merge into a fresh target, the other half into an existing folder holding a file of
    // another name, which must come out unchanged.
    const fs::path target = dir / "out";
    const bool existingTarget = index % 2 == 1;
    if (existingTarget) {
        fs::create_directories(target);
        writeFile((target / "keep.txt").string(), "kept");
    }
    const auto before = listing(target);

    const std::string localDir = (fs::path(d.root) / l.localDir).lexically_normal().string();
    // merge and inspect only read the damaged copy, so they run side by side (both cores, half the wall time).
    BoundedProcess mergeProcess;
    BoundedProcess inspectProcess;
    mergeProcess.start({ "merge", "--local_dir", localDir, "--target_dir", target.string(), "--quiet", "--threads", "1" });
    inspectProcess.start({ "inspect", localDir, "--threads", "1" });
    const BoundedRun merge = mergeProcess.finish(kRunTimeoutMs);
    const BoundedRun inspect = inspectProcess.finish(kRunTimeoutMs);
    QStringList problems;
    const QRegularExpression what(QString::fromStdString(c.what), QRegularExpression::CaseInsensitiveOption);
    if (merge.timedOut || merge.crashed || merge.exitCode != c.mergeExit)
        problems << QStringLiteral("merge %1, expected exit %2").arg(merge.outcome()).arg(c.mergeExit);
    if (c.mergeExit != 0) {
        if (!namesFile(merge.err, c.fileHint))
            problems << QStringLiteral("the merge's message does not name '%1'").arg(QString::fromStdString(c.fileHint));
        if (!what.match(merge.err).hasMatch())
            problems << QStringLiteral("the merge's message does not say what is wrong (/%1/)").arg(QString::fromStdString(c.what));
        if (existingTarget ? listing(target) != before : fs::exists(target))
            problems << (existingTarget ? QStringLiteral("the existing target folder was changed")
                                        : QStringLiteral("the target folder was created"));
    }
    const QStringList leftovers = leftoversBeside(target);
    if (!leftovers.isEmpty())
        problems << QStringLiteral("temporary folders left beside the target: ") + leftovers.join(QStringLiteral(", "));

    if (inspect.timedOut || inspect.crashed)
        problems << QStringLiteral("inspect %1").arg(inspect.outcome());
    else if (c.inspect == Inspect::Fails) {
        if (inspect.exitCode != 1)
            problems << QStringLiteral("inspect %1, expected exit 1").arg(inspect.outcome());
        else if (!namesFile(inspect.out + inspect.err, c.fileHint))
            problems << QStringLiteral("inspect's report does not name '%1'").arg(QString::fromStdString(c.fileHint));
    }

    if (fs::exists(d.marker))
        problems << QStringLiteral("A PAYLOAD RAN: %1 exists").arg(QString::fromStdString(d.marker));
    if (!fs::exists(d.victim))
        problems << QStringLiteral("A PAYLOAD RAN: %1 was deleted").arg(QString::fromStdString(d.victim));

    const QString report = problems.join(QStringLiteral("; ")) + QStringLiteral("\n  merge stderr: ")
        + merge.err.trimmed().left(600) + QStringLiteral("\n  inspect: ")
        + QString(inspect.err + inspect.out).trimmed().left(300)
        + (existingTarget ? QStringLiteral(" [into an existing target]") : QString());
    std::error_code ec;
    fs::remove_all(dir, ec);

    QVERIFY2(problems.isEmpty(), qPrintable(report));
}

void CorruptionMatrix::everyLayoutIsCovered()
{
    // The matrix must keep reaching every layout; a layout whose cases were all dropped would pass silently.
    std::map<std::string, int> perLayout;
    for (const auto& c : allCases())
        ++perLayout[c.layout->name];
    for (const auto& l : layouts())
        QVERIFY2(perLayout[l.name] >= 10, (l.name + " has too few corruption cases").c_str());
}

QTEST_GUILESS_MAIN(CorruptionMatrix)
#include "tst_corruption_matrix.moc"
