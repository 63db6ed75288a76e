// SPDX-License-Identifier: GPL-3.0-or-later
#include "shardtreemodel.h"

#include "mapping/lora.h"
#include "provenance.h"

#include "coreconvert.h"
#include "roles.h"

#include <QRegularExpression>

#include <algorithm>
#include <map>
#include <tuple>

#include <unordered_map>

namespace tessera::ui {

namespace {

// internalId layout: the node kind in the top 4 bits, then for pieces the entry index and the piece's row,
// for other nodes the index into their table. 64-bit quintptr keeps 2^40 entries × 2^20 pieces addressable.
static_assert(sizeof(quintptr) == 8, "the shard tree packs two indices into a 64-bit internalId");
constexpr int kKindShift = 60;
constexpr int kPieceBits = 20;
constexpr quintptr kPayloadMask = (quintptr(1) << kKindShift) - 1;
constexpr quintptr kPieceMask = (quintptr(1) << kPieceBits) - 1;

quintptr makeId(ShardTreeModel::NodeKind kind, quintptr payload)
{
    return (quintptr(kind) << kKindShift) | (payload & kPayloadMask);
}

QString joinLines(const QString& a, const QString& b) { return a.isEmpty() ? b : a + QLatin1Char('\n') + b; }

QString rankRange(int first, int last)
{
    if (first < 0)
        return {};
    if (first == last)
        return ShardTreeModel::tr("rank %1").arg(first);
    return ShardTreeModel::tr("ranks %1–%2").arg(first).arg(last);
}

} // namespace

ShardTreeModel::ShardTreeModel(QObject* parent) : QAbstractItemModel(parent) { }

ShardTreeModel::~ShardTreeModel() = default;

void ShardTreeModel::setCheckpoint(CheckpointPtr checkpoint)
{
    beginResetModel();
    m_checkpoint = std::move(checkpoint);
    rebuild();
    endResetModel();
}

void ShardTreeModel::setGroupBy(GroupBy groupBy)
{
    if (groupBy == m_groupBy)
        return;
    beginResetModel();
    m_groupBy = groupBy;
    rebuild();
    endResetModel();
}

void ShardTreeModel::setProblemColor(const QColor& color)
{
    if (color == m_problemColor)
        return;
    m_problemColor = color;
    // Only the foreground changes and views repaint on palette changes anyway; a reset would collapse the tree.
}

namespace {

/// Where a tensor sits in the model, for the By tensor order: (part, stack, layer).
struct ModelPosition {
    int part = 2;       ///< 0 embeddings, 1 a layer stack, 2 anything else (final norms), 3 the output head
    std::string stack;  ///< the text before "layers.": decoder, vision tower, … keep their own order
    long long layer = -1;
    bool operator<(const ModelPosition& o) const
    {
        return std::tie(part, stack, layer) < std::tie(o.part, o.stack, o.layer);
    }
};

/// The first "<stack>layers.<n>." (or blocks., h.) in `name`: a plain scan, since a tree of 100,000 tensors is
/// ordered on every rebuild.
bool findLayer(const std::string& name, std::string& stack, long long& layer)
{
    for (const char* word : { "layers.", "blocks.", "h." }) {
        const std::size_t length = std::char_traits<char>::length(word);
        for (std::size_t at = name.find(word); at != std::string::npos; at = name.find(word, at + 1)) {
            if (at > 0 && name[at - 1] != '.')
                continue;
            std::size_t end = at + length;
            long long n = 0;
            while (end < name.size() && end - at - length < 9 && name[end] >= '0' && name[end] <= '9')
                n = n * 10 + (name[end++] - '0');
            if (end == at + length || end >= name.size() || name[end] != '.')
                continue;
            stack = name.substr(0, at);
            layer = n;
            return true;
        }
    }
    return false;
}

ModelPosition modelPosition(const std::string& name)
{
    ModelPosition p;
    if (findLayer(name, p.stack, p.layer)) {
        p.part = 1;
    } else if (name.find("layers.") != std::string::npos) {
        p.part = 1; // torch_dist's stacked layers: one tensor for all of them
        p.stack = name.substr(0, name.find("layers."));
    } else if (name.find("embed") != std::string::npos || name.find(".wte.") != std::string::npos) {
        p.part = 0;
    } else if (name.rfind("output_layer", 0) == 0 || name.rfind("lm_head", 0) == 0 || name.rfind("score.", 0) == 0) {
        p.part = 3;
    }
    return p;
}

} // namespace

void ShardTreeModel::rebuild()
{
    m_chain.clear();
    m_groups.clear();
    m_entries.clear();
    m_topEntries.clear();
    m_firstEntryOfTensor.clear();
    m_tensorProblems.clear();
    m_tensorNotes.clear();
    m_rootProblems.clear();
    if (!m_checkpoint)
        return;
    describeLora();
    if (const Provenance provenance = readProvenance(*m_checkpoint); provenance.found)
        for (std::size_t i = 0; i < m_checkpoint->tensors.size(); ++i) {
            const QString text = provenance.tensors.value(qs(m_checkpoint->tensors[i].name));
            if (!text.isEmpty())
                m_tensorNotes[i] = text; // a merged model has no LoRA factors of its own to describe
        }
    buildChain();
    m_tensorProblems.resize(m_checkpoint->tensors.size());
    m_firstEntryOfTensor.assign(m_checkpoint->tensors.size(), -1);
    std::unordered_map<std::string, int> groupByFile;
    if (m_groupBy == GroupBy::File)
        groupPiecesByFile(groupByFile);
    else
        listTensorsInModelOrder();
    attachProblems(groupByFile);
}

void ShardTreeModel::buildChain()
{
    const auto& info = *m_checkpoint;
    // run → step → role from the folder names verl and Megatron write (…/RUN/global_step_N/actor).
    const QString root = qs(info.root);
    const QStringList parts = root.split(QLatin1Char('/'), Qt::SkipEmptyParts);
    static const QRegularExpression stepPattern(QStringLiteral("^(global_step_\\d+|iter_\\d+)$"));
    int step = -1;
    for (int i = parts.size() - 1; i >= 0; --i) {
        if (stepPattern.match(parts[i]).hasMatch()) {
            step = i;
            break;
        }
    }
    auto prefix = [&](int count) -> QString {
        return QStringLiteral("/") + QStringList(parts.mid(0, count)).join(QLatin1Char('/'));
    };
    if (step > 0) {
        m_chain.push_back({ parts[step - 1], prefix(step) });
        m_chain.push_back({ parts[step], prefix(step + 1) });
        if (step + 1 < parts.size())
            m_chain.push_back({ QStringList(parts.mid(step + 1)).join(QLatin1Char('/')), root });
    } else {
        m_chain.push_back({ parts.isEmpty() ? root : parts.last(), root });
    }
}

int ShardTreeModel::groupOfFile(const std::string& file, std::unordered_map<std::string, int>& groupByFile)
{
    auto it = groupByFile.find(file);
    if (it != groupByFile.end())
        return it->second;
    Group group;
    group.name = file.empty() ? tr("(no file)") : fileNameUnder(file, m_checkpoint->root);
    group.path = qs(file);
    m_groups.push_back(std::move(group));
    const int index = static_cast<int>(m_groups.size()) - 1;
    groupByFile.emplace(file, index);
    return index;
}

void ShardTreeModel::groupPiecesByFile(std::unordered_map<std::string, int>& groupByFile)
{
    const auto& info = *m_checkpoint;
    auto groupFor = [&](const std::string& file) { return groupOfFile(file, groupByFile); };
    for (const auto& file : info.files)
        groupFor(file);
    int noPieces = -1;
    for (std::size_t t = 0; t < info.tensors.size(); ++t) {
        const auto& tensor = info.tensors[t];
        if (tensor.pieces.empty()) {
            if (noPieces < 0) {
                m_groups.push_back({ tr("(tensors without pieces)"), {}, -1, -1, 0, {}, {} });
                noPieces = static_cast<int>(m_groups.size()) - 1;
            }
            auto& group = m_groups[noPieces];
            m_entries.push_back({ static_cast<int>(t), noPieces, static_cast<int>(group.entries.size()), 0, {} });
            group.entries.push_back(static_cast<int>(m_entries.size()) - 1);
            if (m_firstEntryOfTensor[t] < 0)
                m_firstEntryOfTensor[t] = static_cast<int>(m_entries.size()) - 1;
            continue;
        }
        for (std::size_t p = 0; p < tensor.pieces.size(); ++p) {
            const auto& piece = tensor.pieces[p];
            const int g = groupFor(piece.file);
            auto& group = m_groups[g];
            // Tensors are visited in order, so a tensor's pieces in one file are always the group's last entry.
            if (group.entries.empty() || m_entries[group.entries.back()].tensor != static_cast<int>(t)) {
                m_entries.push_back({ static_cast<int>(t), g, static_cast<int>(group.entries.size()), 0, {} });
                group.entries.push_back(static_cast<int>(m_entries.size()) - 1);
                if (m_firstEntryOfTensor[t] < 0)
                    m_firstEntryOfTensor[t] = static_cast<int>(m_entries.size()) - 1;
            }
            auto& entry = m_entries[group.entries.back()];
            entry.pieces.push_back(static_cast<int>(p));
            const auto bytes = pieceBytes(piece);
            entry.bytes += bytes;
            group.bytes += bytes;
            if (piece.rank >= 0) {
                group.firstRank = group.firstRank < 0 ? piece.rank : std::min(group.firstRank, piece.rank);
                group.lastRank = std::max(group.lastRank, piece.rank);
            }
        }
    }
}

void ShardTreeModel::listTensorsInModelOrder()
{
    const auto& info = *m_checkpoint;
    m_entries.reserve(info.tensors.size());
    m_topEntries.reserve(info.tensors.size());
    for (std::size_t t = 0; t < info.tensors.size(); ++t) {
        Entry entry { static_cast<int>(t), -1, 0, info.tensors[t].nbytes(), {} };
        entry.pieces.resize(info.tensors[t].pieces.size());
        for (std::size_t p = 0; p < entry.pieces.size(); ++p)
            entry.pieces[p] = static_cast<int>(p);
        m_entries.push_back(std::move(entry));
        m_topEntries.push_back(static_cast<int>(t));
        m_firstEntryOfTensor[t] = static_cast<int>(t);
    }
    // The model's order: embeddings, layers 0…N numerically (checkpoint order within a layer), the rest, the
    // head — not the order files or dicts happen to list them in (layers.10 before layers.2).
    std::vector<ModelPosition> positions;
    positions.reserve(info.tensors.size());
    for (const auto& tensor : info.tensors)
        positions.push_back(modelPosition(tensor.name));
    std::stable_sort(m_topEntries.begin(), m_topEntries.end(),
                     [&](int a, int b) { return positions[std::size_t(a)] < positions[std::size_t(b)]; });
    for (std::size_t row = 0; row < m_topEntries.size(); ++row)
        m_entries[std::size_t(m_topEntries[row])].row = static_cast<int>(row);
}

void ShardTreeModel::attachProblems(const std::unordered_map<std::string, int>& groupByFile)
{
    const auto& info = *m_checkpoint;
    std::unordered_map<std::string, int> tensorByName;
    tensorByName.reserve(info.tensors.size());
    for (std::size_t t = 0; t < info.tensors.size(); ++t)
        tensorByName.emplace(info.tensors[t].name, static_cast<int>(t));
    for (const auto& problem : info.problems) {
        // A reader's error may start with the file it is about; the row already names that file.
        QString message = qs(problem.message);
        if (const QString file = qs(problem.file) + QLatin1String(": "); !problem.file.empty() && message.startsWith(file))
            message = message.mid(file.size());
        if (!problem.tensor.empty()) {
            auto it = tensorByName.find(problem.tensor);
            if (it != tensorByName.end()) {
                m_tensorProblems[it->second] = joinLines(m_tensorProblems[it->second], message);
                continue;
            }
        }
        if (!problem.file.empty() && m_groupBy == GroupBy::File) {
            auto it = groupByFile.find(problem.file);
            if (it == groupByFile.end()) {
                // Problems may name a file relative to the root.
                for (auto candidate = groupByFile.begin(); candidate != groupByFile.end(); ++candidate) {
                    const auto& path = candidate->first;
                    if (path.size() > problem.file.size()
                        && path.compare(path.size() - problem.file.size(), problem.file.size(), problem.file) == 0) {
                        it = candidate;
                        break;
                    }
                }
            }
            if (it != groupByFile.end()) {
                auto& group = m_groups[it->second];
                group.problem = joinLines(group.problem, message);
                continue;
            }
        }
        m_rootProblems = joinLines(m_rootProblems, qs(problem.text()));
    }
}

ShardTreeModel::NodeKind ShardTreeModel::kindOf(const QModelIndex& index) const
{
    return static_cast<NodeKind>(index.internalId() >> kKindShift);
}

std::uint64_t ShardTreeModel::payloadOf(const QModelIndex& index) const { return index.internalId() & kPayloadMask; }

QModelIndex ShardTreeModel::index(int row, int column, const QModelIndex& parent) const
{
    if (row < 0 || column < 0 || column >= ColumnCount || row >= rowCount(parent))
        return {};
    if (!parent.isValid())
        return createIndex(row, column, makeId(NodeKind::Chain, 0));
    const auto payload = payloadOf(parent);
    switch (kindOf(parent)) {
    case NodeKind::Chain:
        if (static_cast<int>(payload) < chainRow())
            return createIndex(row, column, makeId(NodeKind::Chain, payload + 1));
        if (m_groupBy == GroupBy::File)
            return createIndex(row, column, makeId(NodeKind::Group, quintptr(row)));
        return createIndex(row, column, makeId(NodeKind::Entry, quintptr(m_topEntries[row])));
    case NodeKind::Group:
        return createIndex(row, column, makeId(NodeKind::Entry, quintptr(m_groups[payload].entries[row])));
    case NodeKind::Entry:
        return createIndex(row, column, makeId(NodeKind::Piece, (quintptr(payload) << kPieceBits) | quintptr(row)));
    case NodeKind::Piece:
        break;
    }
    return {};
}

QModelIndex ShardTreeModel::parent(const QModelIndex& child) const
{
    if (!child.isValid())
        return {};
    const auto payload = payloadOf(child);
    switch (kindOf(child)) {
    case NodeKind::Chain:
        return payload == 0 ? QModelIndex() : createIndex(0, 0, makeId(NodeKind::Chain, payload - 1));
    case NodeKind::Group:
        return createIndex(0, 0, makeId(NodeKind::Chain, quintptr(chainRow())));
    case NodeKind::Entry: {
        const auto& entry = m_entries[payload];
        if (entry.group < 0)
            return createIndex(0, 0, makeId(NodeKind::Chain, quintptr(chainRow())));
        return createIndex(entry.group, 0, makeId(NodeKind::Group, quintptr(entry.group)));
    }
    case NodeKind::Piece: {
        const auto entry = payload >> kPieceBits;
        return createIndex(m_entries[entry].row, 0, makeId(NodeKind::Entry, entry));
    }
    }
    return {};
}

int ShardTreeModel::rowCount(const QModelIndex& parent) const
{
    if (!parent.isValid())
        return m_chain.empty() ? 0 : 1;
    if (parent.column() != 0)
        return 0;
    const auto payload = payloadOf(parent);
    switch (kindOf(parent)) {
    case NodeKind::Chain:
        if (static_cast<int>(payload) < chainRow())
            return 1;
        return static_cast<int>(m_groupBy == GroupBy::File ? m_groups.size() : m_topEntries.size());
    case NodeKind::Group:
        return static_cast<int>(m_groups[payload].entries.size());
    case NodeKind::Entry:
        return static_cast<int>(m_entries[payload].pieces.size());
    case NodeKind::Piece:
        return 0;
    }
    return 0;
}

int ShardTreeModel::columnCount(const QModelIndex& parent) const
{
    (void)parent;
    return ColumnCount;
}

QVariant ShardTreeModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return {};
    switch (section) {
    case NameColumn:
        return tr("Name");
    case SizeColumn:
        return tr("Size");
    case DTypeColumn:
        return tr("DType");
    case ShapeColumn:
        return tr("Shape");
    case PlacementColumn:
        return tr("Placement");
    case ProblemColumn:
        return tr("Problem");
    default:
        return {};
    }
}

QVariant ShardTreeModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid))
        return {};
    const auto payload = payloadOf(index);
    switch (kindOf(index)) {
    case NodeKind::Chain:
        return chainData(static_cast<int>(payload), index.column(), role);
    case NodeKind::Group:
        return groupData(static_cast<int>(payload), index.column(), role);
    case NodeKind::Entry:
        return entryData(static_cast<int>(payload), index.column(), role);
    case NodeKind::Piece:
        return pieceData(static_cast<int>(payload >> kPieceBits), static_cast<int>(payload & kPieceMask),
                         index.column(), role);
    }
    return {};
}

QVariant ShardTreeModel::chainData(int chain, int column, int role) const
{
    const auto& info = *m_checkpoint;
    const bool last = chain == chainRow();
    const QString problem = last ? m_rootProblems : QString();
    switch (role) {
    case NodeKindRole:
        return static_cast<int>(NodeKind::Chain);
    case TensorIndexRole:
    case PieceIndexRole:
    case RankRole:
        return -1;
    case ProblemRole:
        return problem;
    case Qt::ForegroundRole:
        return problem.isEmpty() ? QVariant() : QVariant(m_problemColor);
    case Qt::ToolTipRole:
        return problem.isEmpty() ? m_chain[chain].path : problem;
    case SortRole:
        if (column == SizeColumn)
            return last ? QVariant::fromValue<qulonglong>(info.totalBytes()) : QVariant();
        [[fallthrough]];
    case Qt::DisplayRole:
        switch (column) {
        case NameColumn:
            return m_chain[chain].name;
        case SizeColumn:
            return last ? bytesText(info.totalBytes()) : QString();
        case ShapeColumn:
            return last ? countText(static_cast<long long>(info.tensors.size()), tr("tensor"), tr("tensors")) : QString();
        case PlacementColumn:
            if (!last)
                return {};
            if (info.parallel.worldSize > 0)
                return tr("%1 · world size %2").arg(qs(info.layout)).arg(info.parallel.worldSize);
            return qs(info.layout);
        case ProblemColumn:
            return problem.section(QLatin1Char('\n'), 0, 0);
        default:
            return {};
        }
    default:
        return {};
    }
}

QVariant ShardTreeModel::groupData(int groupIndex, int column, int role) const
{
    const auto& group = m_groups[groupIndex];
    switch (role) {
    case NodeKindRole:
        return static_cast<int>(NodeKind::Group);
    case TensorIndexRole:
    case PieceIndexRole:
        return -1;
    case RankRole:
        return group.firstRank == group.lastRank ? group.firstRank : -1;
    case ProblemRole:
        return group.problem;
    case Qt::ForegroundRole:
        return group.problem.isEmpty() ? QVariant() : QVariant(m_problemColor);
    case Qt::ToolTipRole:
        return group.problem.isEmpty() ? group.path : QString(group.path + QLatin1Char('\n') + group.problem);
    case SortRole:
        if (column == SizeColumn)
            return QVariant::fromValue<qulonglong>(group.bytes);
        if (column == ShapeColumn)
            return static_cast<int>(group.entries.size());
        [[fallthrough]];
    case Qt::DisplayRole:
        switch (column) {
        case NameColumn:
            return group.name;
        case SizeColumn:
            return bytesText(group.bytes);
        case ShapeColumn:
            return countText(static_cast<long long>(group.entries.size()), tr("tensor"), tr("tensors"));
        case PlacementColumn:
            return rankRange(group.firstRank, group.lastRank);
        case ProblemColumn:
            return group.problem.section(QLatin1Char('\n'), 0, 0);
        default:
            return {};
        }
    default:
        return {};
    }
}

void ShardTreeModel::describeLora()
{
    const auto& info = *m_checkpoint;
    m_tensorNotes.assign(info.tensors.size(), QString());
    if (!tessera::hasLoraTensors(info))
        return;
    auto lora = tessera::readLoraCheckpoint(info, {});
    if (!lora)
        return; // the summary says why it cannot be merged
    std::map<std::string, int> index;
    for (std::size_t i = 0; i < info.tensors.size(); ++i)
        index.emplace(info.tensors[i].name, int(i));
    std::map<std::string, std::string> sourceOfWeight; // HF weight name → the checkpoint's name
    for (const auto& [source, hf] : lora->baseNames)
        sourceOfWeight.emplace(hf, source);
    for (const auto& m : lora->modules) {
        const QString scale = QString::number(m.scale, 'g', 6);
        for (const auto& [factor, letter] : { std::pair { m.sourceA, "A" }, std::pair { m.sourceB, "B" } })
            if (auto it = index.find(factor); it != index.end())
                m_tensorNotes[std::size_t(it->second)] = tr("LoRA %1 of %2 (r %3, scale %4): fused into %5")
                                                           .arg(QLatin1String(letter), qs(m.module))
                                                           .arg(m.rank)
                                                           .arg(scale, qs(m.weight));
        if (auto w = sourceOfWeight.find(m.weight); w != sourceOfWeight.end())
            if (auto it = index.find(w->second); it != index.end())
                m_tensorNotes[std::size_t(it->second)] = tr("LoRA-adapted (r %1, scale %2): A %3, B %4; merged as %5")
                                                           .arg(m.rank)
                                                           .arg(scale, qs(m.sourceA), qs(m.sourceB), qs(m.weight));
    }
}

QVariant ShardTreeModel::entryData(int entryIndex, int column, int role) const
{
    const auto& entry = m_entries[entryIndex];
    const auto& tensor = m_checkpoint->tensors[entry.tensor];
    const QString& problem = m_tensorProblems[entry.tensor];
    switch (role) {
    case NodeKindRole:
        return static_cast<int>(NodeKind::Entry);
    case TensorIndexRole:
        return entry.tensor;
    case PieceIndexRole:
        // A tensor row under a file that holds exactly one piece stands for that piece.
        return entry.group >= 0 && entry.pieces.size() == 1 ? entry.pieces.front() : -1;
    case RankRole:
        return entry.group >= 0 ? m_groups[entry.group].firstRank : -1;
    case ProblemRole:
        return problem;
    case Qt::ForegroundRole:
        return problem.isEmpty() ? QVariant() : QVariant(m_problemColor);
    case Qt::ToolTipRole: {
        QString text = qs(tensor.name) + QLatin1Char('\n')
            + (tensor.placement.empty() ? tr("plain tensor") : qs(tensor.placement));
        if (!m_tensorNotes[entry.tensor].isEmpty())
            text += QLatin1Char('\n') + m_tensorNotes[entry.tensor];
        return problem.isEmpty() ? text : QString(text + QLatin1Char('\n') + problem);
    }
    case SortRole:
        if (column == SizeColumn)
            return QVariant::fromValue<qulonglong>(entry.bytes);
        if (column == ShapeColumn)
            return QVariant::fromValue<qulonglong>(tensor.numel());
        [[fallthrough]];
    case Qt::DisplayRole:
        switch (column) {
        case NameColumn:
            return qs(tensor.name);
        case SizeColumn:
            return bytesText(entry.bytes);
        case DTypeColumn:
            return dtypeText(tensor.dtype);
        case ShapeColumn:
            return shapeText(tensor.shape);
        case PlacementColumn:
            // Under a file the box it holds says more than the tensor-wide placement repeated on every row.
            if (entry.group >= 0 && entry.pieces.size() == 1) {
                const auto& piece = tensor.pieces[entry.pieces.front()];
                const QString box = boxText(piece.offsets, piece.shape);
                return piece.role == tessera::PieceRole::Primary ? box : QString(box + QStringLiteral(" · ") + roleText(piece.role));
            }
            return tensor.placement.empty() ? tr("plain tensor") : qs(tensor.placement);
        case ProblemColumn:
            return problem.section(QLatin1Char('\n'), 0, 0);
        default:
            return {};
        }
    default:
        return {};
    }
}

QVariant ShardTreeModel::pieceData(int entryIndex, int pieceRow, int column, int role) const
{
    const auto& entry = m_entries[entryIndex];
    const int pieceIndex = entry.pieces[pieceRow];
    const auto& piece = m_checkpoint->tensors[entry.tensor].pieces[pieceIndex];
    switch (role) {
    case NodeKindRole:
        return static_cast<int>(NodeKind::Piece);
    case TensorIndexRole:
        return entry.tensor;
    case PieceIndexRole:
        return pieceIndex;
    case RankRole:
        return piece.rank;
    case Qt::ToolTipRole:
        return tr("%1\nbox %2\nbytes at offset %3")
            .arg(qs(piece.file), boxText(piece.offsets, piece.shape))
            .arg(piece.dataOffset);
    case SortRole:
        if (column == SizeColumn)
            return QVariant::fromValue<qulonglong>(pieceBytes(piece));
        if (column == NameColumn)
            return piece.rank;
        [[fallthrough]];
    case Qt::DisplayRole:
        switch (column) {
        case NameColumn: {
            const QString who = piece.rank >= 0 ? tr("rank %1").arg(piece.rank) : tr("piece %1").arg(pieceIndex);
            return piece.role == tessera::PieceRole::Primary ? who : QString(who + QStringLiteral(" · ") + roleText(piece.role));
        }
        case SizeColumn:
            return bytesText(pieceBytes(piece));
        case DTypeColumn:
            return storedText(piece);
        case ShapeColumn:
            return shapeText(piece.shape);
        case PlacementColumn:
            if (entry.group >= 0)
                return boxText(piece.offsets, piece.shape);
            return QString(boxText(piece.offsets, piece.shape) + QStringLiteral(" in ") + fileName(piece.file));
        default:
            return {};
        }
    default:
        return {};
    }
}

QModelIndex ShardTreeModel::indexForTensor(int tensorIndex) const
{
    if (tensorIndex < 0 || tensorIndex >= static_cast<int>(m_firstEntryOfTensor.size()))
        return {};
    const int entry = m_firstEntryOfTensor[tensorIndex];
    if (entry < 0)
        return {};
    return createIndex(m_entries[entry].row, 0, makeId(NodeKind::Entry, quintptr(entry)));
}

QModelIndex ShardTreeModel::checkpointIndex() const
{
    if (m_chain.empty())
        return {};
    return createIndex(0, 0, makeId(NodeKind::Chain, quintptr(chainRow())));
}

int ShardTreeModel::tensorCount() const { return m_checkpoint ? static_cast<int>(m_checkpoint->tensors.size()) : 0; }

} // namespace tessera::ui
