// SPDX-License-Identifier: GPL-3.0-or-later
#include "split/split_engine.h"
#include "split/split_training.h"
#include "io/printable.h"

#include "io/byte_size.h"
#include "io/durable_file.h"
#include "io/guarded_read.h"
#include "io/path_kinds.h"
#include "io/text_file.h"
#include "merge/box_copy.h"
#include "merge/hf_output.h"
#include "merge/merge_engine.h"
#include "publish/staged_run.h"
#include "publish/target_checks.h"
#include "merge/source_files.h"
#include "io/mapped_file.h"
#include "pickle/dcp_metadata_writer.h"
#include "pickle/torch_save_writer.h"
#include "parallel.h"
#include "text_util.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace tessera {

namespace {

bool isCanceled(const SplitRunOptions& o)
{
    return (o.cancel && o.cancel->load()) || (o.progress && o.progress->isCanceled());
}

/// Names a split target must not already hold: another checkpoint there would mix with the new one.
bool looksLikeCheckpointFile(const std::string& name)
{
    return startsWith(name, "model_world_size_") || startsWith(name, "optim_world_size_")
        || startsWith(name, "extra_state_world_size_") || endsWith(name, ".distcp") || name == ".metadata"
        || startsWith(name, "mp_rank_") || name == "fsdp_config.json" || name == "transformer_config.json"
        || name == "dist_ckpt" || name == "release" || startsWith(name, "iter_")
        || name == "latest_checkpointed_iteration.txt";
}

/// One output file while it is written.
struct OpenFile {
    std::string path;
    std::FILE* file = nullptr;
    std::unique_ptr<TorchSaveWriter> writer; ///< StateDict files
    std::uint64_t cursor = 0;                ///< DcpItems files: where the next archive starts
    std::vector<std::pair<std::uint64_t, std::uint64_t>> items; ///< DcpItems: (offset, length) per tensor
    ~OpenFile()
    {
        if (file)
            std::fclose(file);
    }
};

/// Lets a split of many ranks keep one descriptor per output file open.
void raiseOpenFileLimit(std::size_t needed)
{
    rlimit limit {};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= needed + 64)
        return;
    limit.rlim_cur = std::min<rlim_t>(limit.rlim_max, static_cast<rlim_t>(needed + 64));
    ::setrlimit(RLIMIT_NOFILE, &limit);
}

/// Progress shared by the writes of one split.
struct Meter {
    Meter(const SplitRunOptions& o, std::uint64_t t)
        : options(o), total(o.progressTotal ? o.progressTotal : t), done(o.progressBase) { }
    const SplitRunOptions& options;
    std::uint64_t total = 0;
    std::uint64_t done = 0;
    std::mutex mutex;
    void add(std::uint64_t bytes, const std::string& name)
    {
        std::lock_guard<std::mutex> lock(mutex);
        done += bytes;
        if (options.progress)
            options.progress->report(done, total, name);
    }
};

/// A model tensor's bytes while output tensors are cut from it: assembled in a buffer, or used in place.
struct ModelTensor {
    PageBuffer buffer;
    std::shared_ptr<MappedFile> map; ///< set when the bytes are read in place from a source file
    const std::uint8_t* data = nullptr;
    std::uint64_t offset = 0, bytes = 0;
    ~ModelTensor()
    {
        if (map)
            map->adviseDontNeed(offset, bytes); // read once: its pages need not stay resident
    }
    /// Runs `read` over `data`; when that is a source file's mapping, guarded, so a source truncated by another
    /// process meanwhile is an error naming it rather than a SIGBUS (see io/guarded_read.h).
    template <typename Read>
    Status guardedRead(Read&& read) const
    {
        if (!map) {
            read();
            return Status::success();
        }
        return runGuardedRead(read) ? Status::success() : Status(fileChangedError(map->path(), map->size()));
    }
};
using ModelTensors = std::map<std::size_t, std::unique_ptr<ModelTensor>>;

/// The piece holding model tensor `pt` whole and contiguous in the dtype written (a Hugging Face model's
/// tensors, a single torch.save file's): its bytes are used in place through the mapping instead of being
/// copied into a buffer first. nullptr when the tensor must be assembled.
const Piece* inPlacePiece(const TensorInfo& t, const PlannedTensor& pt)
{
    if (pt.delta || pt.mode != CopyMode::Direct || pt.pieces.size() != 1)
        return nullptr;
    const Piece& p = t.pieces[pt.pieces.front()];
    const bool whole = p.role == PieceRole::Primary && p.shape == t.shape && p.storedDtype == pt.dtype
        && isContiguous(p.shape, p.strides);
    return whole ? &p : nullptr;
}

Result<std::unique_ptr<ModelTensor>> readModelTensor(SourceFiles& files, const TensorInfo& t, const PlannedTensor& pt,
                                                     const std::function<bool()>& canceled)
{
    auto m = std::make_unique<ModelTensor>();
    if (const Piece* p = inPlacePiece(t, pt)) {
        TESSERA_TRY(files.verifyStorage(*p, canceled));
        auto map = files.map(p->file);
        TESSERA_TRY(map);
        if (p->dataOffset > (*map)->size() || pt.bytes > (*map)->size() - p->dataOffset)
            return pastEndError(p->file, t.name, (*map)->size());
        m->map = *map;
        m->offset = p->dataOffset;
        m->bytes = pt.bytes;
        m->data = (*map)->view().data() + p->dataOffset;
        m->map->adviseWillNeed(m->offset, m->bytes);
        return m;
    }
    auto buffer = PageBuffer::allocate(std::max<std::uint64_t>(pt.bytes, 1));
    TESSERA_TRY(buffer);
    m->buffer = std::move(*buffer);
    m->data = m->buffer.data();
    if (pt.bytes)
        TESSERA_TRY(materializeTensor(files, t, pt, m->buffer.data(), canceled));
    return m;
}

/// Appends the local tensor `t` (its fragments read from `sources`, the model tensors at hand) and its storage
/// padding to an archive whose storage `t` is begun.
Status appendLocalTensor(TorchSaveWriter& writer, const SplitTensor& t, const MergePlan& model,
                         const ModelTensors& sources, Meter& meter)
{
    const std::size_t esize = dtypeSize(t.spec.dtype);
    const std::uint64_t bytes = t.bytes();
    // `from`: the model tensor the bytes are read from when it may be a source file's mapping. The writer
    // checksums and writes what it is given, so bytes from a mapping pass through a guarded copy first.
    std::unique_ptr<std::uint8_t[]> staging;
    auto stream = [&](const std::uint8_t* data, const ModelTensor* from) -> Status {
        if (from && from->map && !staging)
            staging.reset(new std::uint8_t[static_cast<std::size_t>(std::min(kMergeChunkBytes, bytes))]);
        for (std::uint64_t off = 0; off < bytes; off += kMergeChunkBytes) {
            if (isCanceled(meter.options))
                return canceledError();
            const std::uint64_t n = std::min(kMergeChunkBytes, bytes - off);
            const std::uint8_t* chunk = data + off;
            if (from && from->map) {
                TESSERA_TRY(from->guardedRead([&] { std::memcpy(staging.get(), chunk, static_cast<std::size_t>(n)); }));
                chunk = staging.get();
            }
            TESSERA_TRY(writer.append(chunk, n));
            meter.add(n, t.spec.name);
        }
        return Status::success();
    };
    if (bytes) {
        const SplitFragment* whole = t.fragments.size() == 1 ? &t.fragments.front() : nullptr;
        const Shape& sourceShape = whole ? model.tensors[whole->source].shape : Shape {};
        if (whole && !whole->localElement && whole->sourceBoxShape.empty() && whole->shape == t.spec.shape
            && boxIsContiguousInTensor(whole->sourceOffsets, whole->shape, sourceShape)) {
            // A block of whole rows (FSDP's Shard(0)): written straight from the assembled tensor.
            const ModelTensor& from = *sources.at(whole->source);
            const std::uint8_t* src = from.data + elementOffset(whole->sourceOffsets, globalStrides(sourceShape)) * esize;
            TESSERA_TRY(stream(src, &from));
        } else {
            auto local = PageBuffer::allocate(bytes);
            TESSERA_TRY(local);
            const Shape localStrides = globalStrides(t.spec.shape);
            for (const auto& f : t.fragments) {
                const Shape& shape = f.sourceBoxShape.empty() ? model.tensors[f.source].shape : f.sourceBoxShape;
                const Shape srcStrides = globalStrides(shape);
                const std::uint64_t at = f.localElement ? *f.localElement : elementOffset(f.localOffsets, localStrides);
                const ModelTensor& from = *sources.at(f.source);
                TESSERA_TRY(from.guardedRead([&] {
                    copyBox(from.data + elementOffset(f.sourceOffsets, srcStrides) * esize, srcStrides, f.shape, esize,
                            local->data() + at * esize, f.localElement ? f.localStrides : localStrides);
                }));
            }
            TESSERA_TRY(stream(local->data(), nullptr));
        }
    }
    return writer.appendZeros(t.spec.storageBytes() - bytes);
}

/// Writes output tensor `index` of `f` into its open file: a storage of the state dict, or a DCP item.
Status writeOutputTensor(const SplitFile& f, std::size_t index, OpenFile& o, const MergePlan& model,
                         const ModelTensors& assembled, Meter& meter)
{
    const SplitTensor& t = f.tensors[index];
    if (f.kind == SplitFile::Kind::StateDict) {
        TESSERA_TRY(o.writer->beginStorage(index));
        TESSERA_TRY(appendLocalTensor(*o.writer, t, model, assembled, meter));
        return o.writer->endStorage();
    }
    auto item = TorchSaveWriter::begin(o.file, o.path, f.archiveName, { t.spec }, TorchSaveWriter::Value::BareTensor);
    TESSERA_TRY(item);
    TESSERA_TRY((*item)->beginStorage(0));
    TESSERA_TRY(appendLocalTensor(**item, t, model, assembled, meter));
    TESSERA_TRY((*item)->endStorage());
    auto length = (*item)->finish();
    TESSERA_TRY(length);
    o.items[index] = { o.cursor, *length };
    o.cursor += *length;
    return Status::success();
}

Status finishFile(OpenFile& f, bool sync)
{
    if (f.writer) {
        auto size = f.writer->finish();
        TESSERA_TRY(size);
    }
    if (std::fflush(f.file) != 0 || (sync && ::fdatasync(::fileno(f.file)) != 0))
        return makeError(f.path + ": cannot be written to disk: " + std::strerror(errno));
    const int closed = std::fclose(f.file);
    f.file = nullptr;
    if (closed != 0)
        return makeError(f.path + ": cannot be closed: " + std::strerror(errno));
    return Status::success();
}

/// The DCP records of the items written for `files` (their chunks in rank order), appended to `records`.
void appendDcpRecords(const std::vector<SplitFile>& files, const SplitItems& items, const std::string& dcpFolder,
                      std::vector<DcpTensorRecord>& records)
{
    std::map<std::string, std::size_t> index;
    for (std::size_t fi = 0; fi < files.size(); ++fi) {
        const SplitFile& f = files[fi];
        for (std::size_t ti = 0; ti < f.tensors.size(); ++ti) {
            const SplitTensor& t = f.tensors[ti];
            auto [it, inserted] = index.emplace(t.spec.name, records.size());
            if (inserted)
                records.push_back({ t.spec.name, t.spec.dtype, t.globalShape, {}, nullptr });
            const auto [offset, length] = items[fi][ti];
            const std::string relative = dcpFolder.empty() ? f.name : f.name.substr(dcpFolder.size() + 1);
            records[it->second].chunks.push_back({ t.chunkOffsets, t.spec.shape, relative, offset, length });
        }
    }
}

/// The DCP .metadata of the written items (and of the training state's, when carried).
std::string dcpMetadata(const SplitPlan& plan, const SplitItems& items, const TrainingWritten* training)
{
    std::vector<DcpTensorRecord> records;
    appendDcpRecords(plan.files, items, plan.dcpFolder, records);
    std::vector<DcpBytesRecord> bytes;
    if (training) {
        records.insert(records.end(), training->tensors.begin(), training->tensors.end());
        bytes = training->bytes;
    }
    std::string id = "tessera-split-" + std::to_string(plan.worldSize) + "-" + std::to_string(records.size());
    return dcpMetadataPickle(records, id, bytes);
}

/// Appends `length` bytes of `source` from `offset` to the open file `fd` (`path`), a chunk at a time.
Status appendRange(int fd, const std::string& path, const MappedFile& source, std::uint64_t offset, std::uint64_t length)
{
    std::vector<std::uint8_t> chunk(static_cast<std::size_t>(std::min(length, kMergeChunkBytes)));
    for (std::uint64_t done = 0; done < length;) {
        const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(chunk.size(), length - done));
        const std::uint8_t* from = source.view().data() + offset + done;
        if (!runGuardedRead([&] { std::memcpy(chunk.data(), from, n); }))
            return fileChangedError(source.path(), source.size());
        for (std::size_t written = 0; written < n;) {
            const ssize_t w = ::write(fd, chunk.data() + written, n - written);
            if (w <= 0)
                return makeError(path + ": write failed (disk full?)");
            written += static_cast<std::size_t>(w);
        }
        done += n;
    }
    return Status::success();
}

/// Appends the non-tensor entries `entries` to the DCP file `path` (relative name `relative`), each copied as it
/// was saved; returns their records.
Result<std::vector<DcpBytesRecord>> appendBytesEntries(const std::vector<DcpBytesEntry>& entries,
                                                      const std::string& path, const std::string& relative)
{
    std::vector<DcpBytesRecord> records;
    const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return makeError(path + ": cannot be opened to append to: " + std::strerror(errno));
    std::uint64_t at = static_cast<std::uint64_t>(::lseek(fd, 0, SEEK_END));
    SourceFiles sources;
    Status status = Status::success();
    for (const auto& e : entries) {
        auto map = sources.map(e.file);
        if (!map) {
            status = map.error();
            break;
        }
        if (e.offset > (*map)->size() || e.length > (*map)->size() - e.offset) {
            status = pastEndError(e.file, e.fqn, (*map)->size());
            break;
        }
        status = appendRange(fd, path, **map, e.offset, e.length);
        if (!status)
            break;
        records.push_back({ e.fqn, relative, at, e.length, e.plannerPath });
        at += e.length;
    }
    if (status && ::fdatasync(fd) != 0)
        status = makeError(path + ": cannot be written to disk: " + std::strerror(errno));
    ::close(fd);
    if (!status)
        return status.error();
    return records;
}

/// verl's run root records the newest step; written next to global_step_N/ once the step is complete, unless it
/// already names a later step (a split into an older step must not hide the newer ones).
Status writeRunIteration(const std::string& target, std::int64_t iteration, std::string& note)
{
    fs::path actor = absoluteNormal(target);
    if (actor.filename().empty())
        actor = actor.parent_path();
    const fs::path root = actor.parent_path().parent_path();
    const fs::path file = root / "latest_checkpointed_iteration.txt";
    if (auto existing = readTextFile(file.string(), 64)) {
        char* end = nullptr;
        const long long newest = std::strtoll(existing->c_str(), &end, 10);
        if (end != existing->c_str() && newest > iteration) {
            note = file.string() + " names step " + std::to_string(newest) + ", later than this one: left as it is";
            return Status::success();
        }
    }
    // Through a fresh, exclusive temporary name: a fixed one could be a link someone planted in the run folder.
    TESSERA_TRY(replaceFileAtomically(file.string(), std::to_string(iteration)));
    note = file.string() + " now says " + std::to_string(iteration);
    return Status::success();
}

/// Whether file `fi` is one this call writes (a part of a split writes only its own files).
bool isSelected(const std::vector<bool>* onlyFiles, std::size_t fi)
{
    return !onlyFiles || (*onlyFiles)[fi];
}

/// Creates output file `f` at `o.path` and, for a state dict, starts its torch.save writer.
Status openOutputFile(const SplitFile& f, const SplitPlan& plan, OpenFile& o)
{
    TESSERA_TRY(createFolders(fs::path(o.path).parent_path().string()));
    // Never through a link: the folder is the run's own, and a link there was not put there by it.
    const int fd = ::open(o.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    o.file = fd < 0 ? nullptr : ::fdopen(fd, "wb");
    if (fd >= 0 && !o.file)
        ::close(fd);
    if (!o.file)
        return makeError(o.path + ": cannot be created: " + std::strerror(errno)
                         + (errno == EMFILE ? " (too many open files: raise `ulimit -n`)" : ""));
    if (f.kind == SplitFile::Kind::StateDict) {
        std::vector<TorchSaveTensor> specs;
        for (const auto& t : f.tensors) {
            specs.push_back(t.spec);
            if (specs.back().dtensor)
                specs.back().mesh.ranks = plan.meshRanks;
        }
        const auto value = f.tree                 ? TorchSaveWriter::Value::Tree
            : f.listChunks.empty()                ? TorchSaveWriter::Value::StateDict
            : f.chunkKeys.empty()                 ? TorchSaveWriter::Value::StateDictList
                                                  : TorchSaveWriter::Value::StateDictsInDict;
        auto writer = TorchSaveWriter::begin(o.file, o.path, f.archiveName, specs, value, f.listChunks,
                                             f.chunkKeys, f.rootItems, f.tree.get());
        TESSERA_TRY(writer);
        o.writer = std::move(*writer);
    }
    return Status::success();
}

/// One OpenFile per planned file, in plan order; only the selected ones are created. `selectedBytes` is what
/// they will hold.
Result<std::vector<std::unique_ptr<OpenFile>>> openOutputFiles(const SplitPlan& plan, const fs::path& dir,
                                                              const std::vector<bool>* onlyFiles,
                                                              std::uint64_t& selectedBytes)
{
    std::vector<std::unique_ptr<OpenFile>> open;
    for (std::size_t fi = 0; fi < plan.files.size(); ++fi) {
        const auto& f = plan.files[fi];
        auto o = std::make_unique<OpenFile>();
        o->path = (dir / f.name).string();
        if (f.kind != SplitFile::Kind::StateDict)
            o->items.resize(f.tensors.size());
        if (!isSelected(onlyFiles, fi)) {
            open.push_back(std::move(o));
            continue;
        }
        for (const auto& t : f.tensors)
            selectedBytes += t.spec.storageBytes();
        TESSERA_TRY(openOutputFile(f, plan, *o));
        open.push_back(std::move(o));
    }
    return open;
}

/// An output tensor: file and tensor index in the plan.
struct OutputRef {
    std::size_t file, tensor;
};

/// Each output tensor is written once the last model tensor it draws from is assembled; a model tensor is
/// dropped once the last output tensor drawing from it is written.
struct WriteSchedule {
    std::vector<std::vector<OutputRef>> writeAfter; ///< per model tensor: the outputs written once it is read
    std::vector<std::size_t> lastUse;               ///< per model tensor: the model tensor after which it is dropped
    std::vector<bool> used;                         ///< per model tensor: whether any selected output draws on it
};

WriteSchedule scheduleWrites(const MergePlan& model, const SplitPlan& plan, const std::vector<bool>* onlyFiles)
{
    WriteSchedule s;
    s.writeAfter.resize(model.tensors.size());
    s.lastUse.assign(model.tensors.size(), 0);
    s.used.assign(model.tensors.size(), false);
    for (std::size_t fi = 0; fi < plan.files.size(); ++fi)
        for (std::size_t ti = 0; isSelected(onlyFiles, fi) && ti < plan.files[fi].tensors.size(); ++ti) {
            std::size_t last = 0;
            for (const auto& fr : plan.files[fi].tensors[ti].fragments)
                last = std::max(last, fr.source);
            s.writeAfter[last].push_back({ fi, ti });
            for (const auto& fr : plan.files[fi].tensors[ti].fragments) {
                s.lastUse[fr.source] = std::max(s.lastUse[fr.source], last);
                s.used[fr.source] = true;
            }
        }
    return s;
}

/// Writes the output tensors `refs` (grouped by file, in order). The files are independent: their parts of this
/// tensor are written (and checksummed) in parallel.
Status writeOutputTensors(const std::vector<OutputRef>& refs, const SplitPlan& plan,
                          std::vector<std::unique_ptr<OpenFile>>& open, const MergePlan& model,
                          const ModelTensors& assembled, Meter& meter, unsigned threads)
{
    std::vector<std::size_t> groupStart;
    for (std::size_t k = 0; k < refs.size(); ++k)
        if (k == 0 || refs[k].file != refs[k - 1].file)
            groupStart.push_back(k);
    std::vector<Status> results(groupStart.size());
    parallelFor(groupStart.size(), threads, [&](std::size_t g) {
        const std::size_t end = g + 1 < groupStart.size() ? groupStart[g + 1] : refs.size();
        for (std::size_t k = groupStart[g]; k < end && results[g]; ++k)
            results[g] = writeOutputTensor(plan.files[refs[k].file], refs[k].tensor, *open[refs[k].file], model,
                                           assembled, meter);
    });
    for (const Status& status : results)
        if (!status)
            return status.error();
    return Status::success();
}

} // namespace

Status checkSplitTarget(const CheckpointInfo& info, const MergePlan& model, const SplitPlan& plan,
                        const std::string& targetDir)
{
    TESSERA_TRY(checkTarget(targetDir, {}));
    TESSERA_TRY(checkTargetApart(targetDir, mergeSourceFolders({ MergeOutput { &info, &model, "" } })));
    std::error_code ec;
    if (fs::is_directory(targetDir, ec)) {
        const auto names = plan.topLevelNames();
        std::vector<std::string> taken;
        for (const auto& entry : folderEntries(targetDir, ec)) {
            const std::string name = entry.path().filename().string();
            if (std::find(names.begin(), names.end(), name) != names.end() || looksLikeCheckpointFile(name))
                taken.push_back(name);
        }
        if (!taken.empty()) {
            std::sort(taken.begin(), taken.end());
            std::string list;
            for (std::size_t i = 0; i < taken.size() && i < 4; ++i)
                list += (i ? ", " : "") + taken[i];
            if (taken.size() > 4)
                list += ", …";
            return makeError(targetDir + " already holds a checkpoint or files of one (" + list + "); split never replaces files: "
                             "choose an empty or new folder");
        }
    }
    if (auto free = freeDiskBytes(targetDir); free && *free < plan.diskBytes)
        return makeError("not enough free disk for " + targetDir + ": the split needs about "
                         + formatBytes(plan.diskBytes) + ", " + formatBytes(*free) + " are free");
    return Status::success();
}

Result<SplitItems> writeSplitFiles(const CheckpointInfo& info, const MergePlan& model, const SplitPlan& plan,
                                   const std::string& dirText, const SplitRunOptions& options,
                                   const std::vector<bool>* onlyFiles)
{
    const fs::path dir(dirText);
    raiseOpenFileLimit(plan.files.size());
    std::uint64_t selectedBytes = 0;
    auto open = openOutputFiles(plan, dir, onlyFiles, selectedBytes);
    TESSERA_TRY(open);
    const WriteSchedule schedule = scheduleWrites(model, plan, onlyFiles);

    SourceFiles sources;
    ModelTensors assembled;
    Meter meter(options, onlyFiles ? selectedBytes : plan.totalBytes);
    const unsigned threads = resolveThreads(static_cast<int>(options.threads));
    auto canceled = [&] { return isCanceled(options); };
    for (std::size_t i = 0; i < model.tensors.size(); ++i) {
        if (canceled())
            return canceledError();
        const PlannedTensor& pt = model.tensors[i];
        if (schedule.used[i]) {
            auto tensor = readModelTensor(sources, info.tensors[pt.source], pt, canceled);
            TESSERA_TRY(tensor);
            assembled.emplace(i, std::move(*tensor));
        }
        TESSERA_TRY(writeOutputTensors(schedule.writeAfter[i], plan, *open, model, assembled, meter, threads));
        for (auto it = assembled.begin(); it != assembled.end();)
            it = schedule.lastUse[it->first] <= i ? assembled.erase(it) : std::next(it);
    }
    SplitItems items;
    for (std::size_t fi = 0; fi < open->size(); ++fi) {
        if (isSelected(onlyFiles, fi))
            TESSERA_TRY(finishFile(*(*open)[fi], options.sync));
        items.push_back(std::move((*open)[fi]->items));
    }
    return items;
}

Result<std::vector<std::string>> finishSplitFolder(const MergePlan& model, const SplitPlan& plan,
                                                   const std::string& dirText, const SplitItems& items,
                                                   const TrainingWritten* training)
{
    const fs::path dir(dirText);
    std::vector<std::string> files;
    for (const auto& f : plan.files)
        files.push_back(f.name);
    const bool dcp = std::any_of(plan.files.begin(), plan.files.end(),
                                 [](const SplitFile& f) { return f.kind == SplitFile::Kind::DcpItems; });
    if (dcp) {
        const fs::path folder = plan.dcpFolder.empty() ? dir : dir / plan.dcpFolder;
        TESSERA_TRY(writeFileSynced((folder / ".metadata").string(), dcpMetadata(plan, items, training)));
        files.push_back(plan.dcpFolder.empty() ? ".metadata" : plan.dcpFolder + "/.metadata");
    }
    for (const auto& [name, content] : plan.generatedFiles) {
        TESSERA_TRY(createFolders((dir / name).parent_path().string()));
        TESSERA_TRY(writeFileSynced((dir / name).string(), content));
        files.push_back(name);
    }
    for (const auto& [name, pickle] : plan.generatedPickles) {
        TESSERA_TRY(createFolders((dir / name).parent_path().string()));
        TESSERA_TRY(writeTorchSavePickle((dir / name).string(), fs::path(name).stem().string(), pickle));
        files.push_back(name);
    }
    if (!plan.dcpFolder.empty())
        TESSERA_TRY(syncFolder((dir / plan.dcpFolder).string()));
    if (!plan.config.path.empty() && !plan.config.files.empty()) {
        const fs::path side = plan.sideFolder.empty() ? dir : dir / plan.sideFolder;
        TESSERA_TRY(createFolders(side.string()));
        TESSERA_TRY(copyHfSideFiles(plan.config, side.string(), model.configEdits()));
        for (const auto& sf : plan.config.files)
            files.push_back(plan.sideFolder.empty() ? sf : plan.sideFolder + "/" + sf);
        TESSERA_TRY(syncFolder(side.string()));
    }
    return files;
}

Status recordRunIteration(const SplitPlan& plan, const std::string& outputDir, const SplitRunOptions& options,
                          std::vector<std::string>& notes)
{
    if (!plan.runIteration)
        return Status::success();
    std::string note;
    auto written = writeRunIteration(outputDir, *plan.runIteration, note);
    if (!written)
        return written.error().withContext("the checkpoint is in " + outputDir + ", but");
    notes.push_back(note);
    if (options.onNote)
        options.onNote(note);
    return Status::success();
}

Result<TrainingWritten> writeTrainingFiles(const SplitPlan& plan, const std::string& dir,
                                           const SplitRunOptions& options)
{
    TrainingWritten written;
    if (!plan.training)
        return written;
    const TrainingSplit& t = *plan.training;
    if (!t.files.files.empty()) {
        SplitRunOptions optimizer = options;
        optimizer.progressBase = plan.totalBytes;
        optimizer.progressTotal = plan.totalBytes + t.bytes;
        const CheckpointInfo& source = t.state.dcp ? t.state.dcp->tensors : t.state.optimizer->info;
        auto items = writeSplitFiles(source, t.optimizer, t.files, dir, optimizer, nullptr);
        TESSERA_TRY(items);
        for (const auto& f : t.files.files)
            written.files.push_back(f.name);
        if (t.state.dcp) {
            appendDcpRecords(t.files.files, *items, t.files.dcpFolder, written.tensors);
            for (auto& record : written.tensors)
                if (auto it = t.state.dcp->plannerPaths.find(record.fqn); it != t.state.dcp->plannerPaths.end())
                    record.plannerPath = it->second;
            const SplitFile& first = t.files.files.front();
            const std::string relative = t.files.dcpFolder.empty() ? first.name
                                                                   : first.name.substr(t.files.dcpFolder.size() + 1);
            auto bytes = appendBytesEntries(t.bytesEntries, (fs::path(dir) / first.name).string(), relative);
            TESSERA_TRY(bytes);
            written.bytes = std::move(*bytes);
        }
    }
    for (const auto& e : t.extraState) {
        if (isCanceled(options))
            return canceledError();
        auto source = TorchSaveFile::open(e.source);
        TESSERA_TRY(source);
        TESSERA_TRY(writeRenamedTorchSave(*source, (fs::path(dir) / e.name).string(), fs::path(e.name).stem().string()));
        written.files.push_back(e.name);
    }
    return written;
}

Status carryDataFile(const SplitPlan& plan, const SplitRunOptions& options, std::vector<std::string>& notes)
{
    if (!plan.training || plan.training->dataSource.empty())
        return Status::success();
    const TrainingSplit& t = *plan.training;
    // Streamed through a fresh, exclusive temporary name, as the tracker: a fixed one could be a link planted there.
    auto copied = copyFileAtomically(t.dataSource, t.dataTarget);
    if (!copied)
        return copied.error().withContext("the dataloader state could not be copied");
    notes.push_back("copied the dataloader state to " + t.dataTarget);
    if (options.onNote)
        options.onNote(notes.back());
    return Status::success();
}

Result<SplitOutcome> runSplit(const CheckpointInfo& info, const MergePlan& model, const SplitPlan& plan,
                              const std::string& targetDir, const SplitRunOptions& options)
{
    const auto start = std::chrono::steady_clock::now();
    TESSERA_TRY(checkTarget(targetDir, {}));
    auto run = StagedRun::begin(targetDir, "split", [&] { return checkSplitTarget(info, model, plan, targetDir); },
                                options.onNote);
    TESSERA_TRY(run);
    SplitRunOptions modelOptions = options;
    if (plan.training)
        modelOptions.progressTotal = plan.totalBytes + plan.training->bytes;
    auto items = writeSplitFiles(info, model, plan, run->path(), modelOptions, nullptr);
    auto training = items ? writeTrainingFiles(plan, run->path(), options) : Result<TrainingWritten>(items.error());
    if (!training)
        return training.error().isCanceled()
            ? training.error()
            : makeError(training.error().message + " (nothing was written to " + run->target() + ")");
    auto files = finishSplitFolder(model, plan, run->path(), *items, &*training);
    TESSERA_TRY(files);
    SplitOutcome outcome;
    outcome.files = std::move(*files);
    outcome.files.insert(outcome.files.end(), training->files.begin(), training->files.end());
    // The step's dataloader state before the actor folder: a split killed between the two leaves no published
    // actor without it, and its rerun writes the same bytes again.
    std::vector<std::string> dataNotes;
    if (auto carried = carryDataFile(plan, options, dataNotes); !carried)
        return makeError(carried.error().message + " (nothing was written to " + run->target() + ")");
    // What makes the folder a checkpoint goes in last.
    TESSERA_TRY(run->publish(outcome.files, { plan.keystone }));
    outcome.outputDir = run->target();
    outcome.notes = run->notes();
    outcome.notes.insert(outcome.notes.end(), dataNotes.begin(), dataNotes.end());
    TESSERA_TRY(recordRunIteration(plan, outcome.outputDir, options, outcome.notes));
    outcome.bytesWritten = plan.totalBytes + (plan.training ? plan.training->bytes : 0);
    outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return outcome;
}

} // namespace tessera
