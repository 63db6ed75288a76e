// SPDX-License-Identifier: GPL-3.0-or-later
#include "model/coverage.h"

#include "model/placement.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <utility>

namespace tessera {

namespace {

constexpr size_t kMaxMessagesPerKind = 8;

/// A box in the global tensor: [lo, hi) per dim.
struct Box {
    Shape lo;
    Shape hi;
};

constexpr std::uint64_t kSaturated = std::numeric_limits<std::uint64_t>::max();

/// Element count, saturated: a shape claimed by a hostile file ([2⁶², 64]) must not wrap to a small number (or
/// to 0, which would hide every gap).
std::uint64_t volume(const Box& box)
{
    std::uint64_t v = 1;
    for (size_t d = 0; d < box.lo.size(); ++d) {
        const auto n = static_cast<std::uint64_t>(std::max<std::int64_t>(0, box.hi[d] - box.lo[d]));
        if (n == 0)
            return 0;
        v = v > kSaturated / n ? kSaturated : v * n;
    }
    return v;
}

bool intersects(const Box& a, const Box& b)
{
    for (size_t d = 0; d < a.lo.size(); ++d)
        if (a.lo[d] >= b.hi[d] || b.lo[d] >= a.hi[d])
            return false;
    return true;
}

bool contains(const Box& outer, const Box& inner)
{
    for (size_t d = 0; d < outer.lo.size(); ++d)
        if (inner.lo[d] < outer.lo[d] || inner.hi[d] > outer.hi[d])
            return false;
    return true;
}

Box intersection(const Box& a, const Box& b)
{
    Box out = a;
    for (size_t d = 0; d < a.lo.size(); ++d) {
        out.lo[d] = std::max(a.lo[d], b.lo[d]);
        out.hi[d] = std::min(a.hi[d], b.hi[d]);
    }
    return out;
}

std::string text(const Box& box)
{
    Shape shape(box.lo.size());
    for (size_t d = 0; d < box.lo.size(); ++d)
        shape[d] = box.hi[d] - box.lo[d];
    return boxText(box.lo, shape);
}

std::string baseName(const std::string& path)
{
    const auto slash = path.find_last_of('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

/// "rank 3 (model_rank_3.pt)", or "piece 5 (…)" when the rank is unknown.
std::string pieceName(const Piece& piece, size_t index)
{
    std::string out = piece.rank >= 0 ? "rank " + std::to_string(piece.rank) : "piece " + std::to_string(index);
    if (!piece.file.empty())
        out += " (" + baseName(piece.file) + ")";
    return out;
}

/// Collects messages of one kind, keeping the first few and counting the rest.
class MessageList {
public:
    explicit MessageList(std::string kind) : m_kind(std::move(kind)) { }
    void add(std::string message)
    {
        if (m_messages.size() < kMaxMessagesPerKind)
            m_messages.push_back(std::move(message));
        else
            ++m_dropped;
    }
    bool empty() const { return m_messages.empty(); }
    bool full() const { return m_messages.size() >= kMaxMessagesPerKind; }
    /// Says that the search stopped early, so the count of the rest is unknown.
    void stopCounting() { m_uncounted = true; }
    void appendTo(std::vector<std::string>& out) const
    {
        out.insert(out.end(), m_messages.begin(), m_messages.end());
        if (m_uncounted)
            out.push_back("… and more " + m_kind);
        else if (m_dropped)
            out.push_back("… and " + std::to_string(m_dropped) + " more " + m_kind);
    }

private:
    std::string m_kind;
    std::vector<std::string> m_messages;
    size_t m_dropped = 0;
    bool m_uncounted = false;
};

/// One box that provides elements: a Primary piece, or a whole Partial-term group.
struct Cover {
    Box box;
    std::string who;
};

/// Reports pairs of intersecting covers. Sweeps along the dim with the most distinct starts so the active set
/// stays small for the usual grid tilings (a Shard(1) tiling sweeps dim 1, not the dim every box spans).
void findOverlaps(const std::vector<Cover>& covers, size_t ndim, MessageList& messages, bool& anyOverlap)
{
    if (covers.size() < 2)
        return;
    std::vector<size_t> order(covers.size());
    for (size_t i = 0; i < order.size(); ++i)
        order[i] = i;
    if (ndim == 0) {
        // Every pair of 0-dim boxes is the same single element.
        for (size_t i = 1; i < covers.size(); ++i) {
            anyOverlap = true;
            messages.add(covers[0].who + " and " + covers[i].who + " both provide the tensor's single element");
        }
        return;
    }
    size_t sweepDim = 0;
    size_t bestDistinct = 0;
    for (size_t d = 0; d < ndim; ++d) {
        std::set<std::int64_t> starts;
        for (const auto& c : covers)
            starts.insert(c.box.lo[d]);
        if (starts.size() > bestDistinct) {
            bestDistinct = starts.size();
            sweepDim = d;
        }
    }
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return covers[a].box.lo[sweepDim] < covers[b].box.lo[sweepDim];
    });
    std::vector<size_t> active;
    for (size_t i : order) {
        const Box& box = covers[i].box;
        // Drop covers that end before this one starts along the sweep dim.
        active.erase(std::remove_if(active.begin(), active.end(),
                                    [&](size_t a) { return covers[a].box.hi[sweepDim] <= box.lo[sweepDim]; }),
                     active.end());
        for (size_t a : active) {
            if (!intersects(covers[a].box, box))
                continue;
            // One shard listed 10,000 times overlaps itself 50 million times; a full list of examples is enough.
            if (messages.full()) {
                messages.stopCounting();
                anyOverlap = true;
                return;
            }
            anyOverlap = true;
            const Box common = intersection(covers[a].box, box);
            messages.add(covers[a].who + " " + text(covers[a].box) + " and " + covers[i].who + " " + text(box)
                         + " overlap on " + text(common));
        }
        active.push_back(i);
    }
}

/// Finds a box of `region` that no cover touches, bisecting at cover boundaries; nullopt-like false when covered.
/// `exactVolumes` says the covers do not overlap, so summed intersection volumes measure coverage exactly.
bool findGap(const Box& region, const std::vector<const Box*>& boxes, bool exactVolumes, Box& gap)
{
    std::vector<const Box*> inside;
    std::uint64_t covered = 0;
    for (const Box* b : boxes) {
        if (!intersects(*b, region))
            continue;
        if (contains(*b, region))
            return false;
        inside.push_back(b);
        covered += volume(intersection(*b, region));
    }
    if (inside.empty()) {
        gap = region;
        return true;
    }
    if (exactVolumes && covered == volume(region))
        return false;
    // Split along the dim with the most cover boundaries strictly inside the region, at their median.
    size_t bestDim = 0;
    std::vector<std::int64_t> bestCuts;
    for (size_t d = 0; d < region.lo.size(); ++d) {
        std::vector<std::int64_t> cuts;
        for (const Box* b : inside) {
            if (b->lo[d] > region.lo[d] && b->lo[d] < region.hi[d])
                cuts.push_back(b->lo[d]);
            if (b->hi[d] > region.lo[d] && b->hi[d] < region.hi[d])
                cuts.push_back(b->hi[d]);
        }
        std::sort(cuts.begin(), cuts.end());
        cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
        if (cuts.size() > bestCuts.size()) {
            bestCuts = std::move(cuts);
            bestDim = d;
        }
    }
    if (bestCuts.empty())
        return false; // every remaining cover spans the region in every dim, so it is covered
    const std::int64_t cut = bestCuts[bestCuts.size() / 2];
    Box low = region;
    Box high = region;
    low.hi[bestDim] = cut;
    high.lo[bestDim] = cut;
    return findGap(low, inside, exactVolumes, gap) || findGap(high, inside, exactVolumes, gap);
}

} // namespace

namespace {
std::vector<std::string> coverageFindings(const TensorInfo& tensor, bool gapsOnly);
} // namespace

std::vector<std::string> checkCoverage(const TensorInfo& tensor) { return coverageFindings(tensor, false); }

std::string checkGaps(const TensorInfo& tensor)
{
    auto found = coverageFindings(tensor, true);
    return found.empty() ? std::string() : found.front();
}

namespace {
/// The pieces of a tensor sorted by what they provide; the ones that provide nothing are left out.
struct SortedPieces {
    std::vector<Cover> covers;                                           ///< Primary pieces
    std::map<std::pair<Shape, Shape>, std::vector<size_t>> partialGroups; ///< box → PartialTerm piece indices
    std::vector<size_t> replicas;
};

/// Sorts the pieces by role, reporting a wrong rank or a box outside the tensor (what remains inside still covers).
SortedPieces sortPieces(const TensorInfo& tensor, const Box& whole, MessageList& shapeMessages)
{
    const size_t ndim = tensor.shape.size();
    SortedPieces sorted;
    for (size_t i = 0; i < tensor.pieces.size(); ++i) {
        const Piece& piece = tensor.pieces[i];
        if (piece.offsets.size() != ndim || piece.shape.size() != ndim) {
            shapeMessages.add(pieceName(piece, i) + " has " + std::to_string(piece.offsets.size()) + " offsets and a "
                              + std::to_string(piece.shape.size()) + "-dim shape, but the tensor has "
                              + std::to_string(ndim) + " dims");
            continue;
        }
        bool negative = false;
        bool zeroSize = false;
        for (size_t d = 0; d < ndim; ++d) {
            negative = negative || piece.shape[d] < 0;
            zeroSize = zeroSize || piece.shape[d] == 0;
        }
        if (negative) {
            shapeMessages.add(pieceName(piece, i) + " has a negative box size " + boxText({}, piece.shape));
            continue;
        }
        if (zeroSize)
            continue;
        Box box { piece.offsets, piece.offsets };
        for (size_t d = 0; d < ndim; ++d)
            box.hi[d] += piece.shape[d];
        if (!contains(whole, box)) {
            shapeMessages.add(pieceName(piece, i) + " box " + text(box) + " reaches outside the tensor of shape "
                              + boxText({}, tensor.shape));
            box = intersection(box, whole); // what remains still covers elements
            if (volume(box) == 0)
                continue;
        }
        switch (piece.role) {
        case PieceRole::Primary:
            sorted.covers.push_back(Cover { box, pieceName(piece, i) });
            break;
        case PieceRole::PartialTerm:
            sorted.partialGroups[{ piece.offsets, piece.shape }].push_back(i);
            break;
        case PieceRole::Replica:
            sorted.replicas.push_back(i);
            break;
        }
    }
    return sorted;
}

/// A Partial-term group covers its box once, whatever its number of terms; a group with fewer terms than the
/// others is missing one. Returns the boxes the groups cover (originals a replica may copy).
std::set<std::pair<Shape, Shape>> coverPartialGroups(const TensorInfo& tensor, const Box& whole, SortedPieces& sorted,
                                                     MessageList& partialMessages)
{
    const size_t ndim = tensor.shape.size();
    std::set<std::pair<Shape, Shape>> originals;
    size_t expectedTerms = 0;
    for (const auto& [key, members] : sorted.partialGroups)
        expectedTerms = std::max(expectedTerms, members.size());
    for (const auto& [key, members] : sorted.partialGroups) {
        const Piece& first = tensor.pieces[members.front()];
        Box box { key.first, key.first };
        for (size_t d = 0; d < ndim; ++d)
            box.hi[d] += key.second[d];
        box = intersection(box, whole);
        sorted.covers.push_back(Cover { box, "the Partial terms of " + pieceName(first, members.front())
                                                 + (members.size() > 1 ? " and " + std::to_string(members.size() - 1)
                                                            + " other piece(s)"
                                                                       : std::string()) });
        originals.insert(key);
        if (members.size() != expectedTerms)
            partialMessages.add("box " + text(box) + " has " + std::to_string(members.size())
                                + " Partial term(s) (first: " + pieceName(first, members.front())
                                + ") but other boxes have " + std::to_string(expectedTerms)
                                + "; a term is missing, so the sum would be wrong");
    }
    return originals;
}

/// Reports replicas whose box no primary piece (or Partial-term group, already in `originals`) has.
void checkReplicas(const TensorInfo& tensor, const std::vector<size_t>& replicas,
                   std::set<std::pair<Shape, Shape>> originals, MessageList& replicaMessages)
{
    const size_t ndim = tensor.shape.size();
    for (const auto& piece : tensor.pieces)
        if (piece.role == PieceRole::Primary)
            originals.insert({ piece.offsets, piece.shape });
    for (size_t i : replicas) {
        const Piece& piece = tensor.pieces[i];
        if (!originals.count({ piece.offsets, piece.shape })) {
            Box box { piece.offsets, piece.offsets };
            for (size_t d = 0; d < ndim; ++d)
                box.hi[d] += piece.shape[d];
            replicaMessages.add(pieceName(piece, i) + " is a replica of box " + text(box)
                                + ", but no primary piece has that box");
        }
    }
}

/// Gaps: without overlaps the union's volume is the sum of volumes, so a shortfall is the missing count. Empty
/// when every element is covered.
std::string findGapMessage(const TensorInfo& tensor, const Box& whole, const std::vector<Cover>& covers, bool anyOverlap)
{
    std::uint64_t coveredVolume = 0;
    std::vector<const Box*> boxes;
    for (const auto& c : covers) {
        const std::uint64_t v = volume(c.box);
        coveredVolume = coveredVolume > kSaturated - v ? kSaturated : coveredVolume + v;
        boxes.push_back(&c.box);
    }
    const std::uint64_t numel = volume(whole);
    std::string gapMessage;
    if (numel > 0 && (anyOverlap || coveredVolume < numel)) {
        Box gap;
        if (findGap(whole, boxes, !anyOverlap, gap)) {
            gapMessage = "no piece provides box " + text(gap);
            if (!anyOverlap)
                gapMessage += "; " + std::to_string(numel - coveredVolume) + " of " + std::to_string(numel)
                    + " elements are missing in all";
            if (covers.empty())
                gapMessage = "no piece provides any element of the tensor of shape " + boxText({}, tensor.shape);
        }
    }
    return gapMessage;
}

std::vector<std::string> coverageFindings(const TensorInfo& tensor, bool gapsOnly)
{
    const size_t ndim = tensor.shape.size();
    MessageList shapeMessages("pieces with a wrong rank or box outside the tensor");
    MessageList overlapMessages("overlapping pieces");
    MessageList replicaMessages("replica pieces without an original");
    MessageList partialMessages("Partial-term problems");
    std::vector<std::string> out;

    for (auto size : tensor.shape)
        if (size < 0) {
            if (gapsOnly)
                return out; // not a gap: the full check reports it
            out.push_back("the tensor's shape " + boxText({}, tensor.shape) + " has a negative size");
            return out;
        }

    Box whole { Shape(ndim, 0), tensor.shape };
    SortedPieces sorted = sortPieces(tensor, whole, shapeMessages);
    std::set<std::pair<Shape, Shape>> originals = coverPartialGroups(tensor, whole, sorted, partialMessages);
    checkReplicas(tensor, sorted.replicas, std::move(originals), replicaMessages);

    bool anyOverlap = false;
    findOverlaps(sorted.covers, ndim, overlapMessages, anyOverlap);
    const std::string gapMessage = findGapMessage(tensor, whole, sorted.covers, anyOverlap);

    if (gapsOnly) {
        if (!gapMessage.empty())
            out.push_back(gapMessage);
        return out;
    }
    shapeMessages.appendTo(out);
    overlapMessages.appendTo(out);
    if (!gapMessage.empty())
        out.push_back(gapMessage);
    replicaMessages.appendTo(out);
    partialMessages.appendTo(out);
    return out;
}
} // namespace

namespace {
/// Clears `mask` (row-major over `shape`) over `box`.
void markCovered(std::vector<std::uint8_t>& mask, const Shape& shape, const Box& box)
{
    const size_t ndim = shape.size();
    if (ndim == 0) {
        mask[0] = 0;
        return;
    }
    const std::int64_t run = box.hi[ndim - 1] - box.lo[ndim - 1];
    Shape at = box.lo; // the current row's first element; the last dim stays at lo
    while (true) {
        std::uint64_t flat = 0;
        for (size_t d = 0; d < ndim; ++d)
            flat = flat * static_cast<std::uint64_t>(shape[d]) + static_cast<std::uint64_t>(at[d]);
        std::fill_n(mask.begin() + static_cast<std::ptrdiff_t>(flat), run, std::uint8_t(0));
        size_t d = ndim - 1;
        while (d-- > 0) {
            if (++at[d] < box.hi[d])
                break;
            at[d] = box.lo[d];
        }
        if (d == static_cast<size_t>(-1))
            return;
    }
}
} // namespace

std::vector<std::uint8_t> missingElementMask(const TensorInfo& tensor, std::uint64_t& missing)
{
    missing = 0;
    const size_t ndim = tensor.shape.size();
    for (auto size : tensor.shape)
        if (size <= 0)
            return {};
    const Box whole { Shape(ndim, 0), tensor.shape };
    const std::uint64_t numel = volume(whole);
    std::vector<Cover> covers;
    std::set<std::pair<Shape, Shape>> partialBoxes;
    for (const Piece& piece : tensor.pieces) {
        if (piece.role == PieceRole::Replica || piece.offsets.size() != ndim || piece.shape.size() != ndim)
            continue;
        if (piece.role == PieceRole::PartialTerm && !partialBoxes.insert({ piece.offsets, piece.shape }).second)
            continue; // a Partial-term group provides its box once
        Box box { piece.offsets, piece.offsets };
        for (size_t d = 0; d < ndim; ++d)
            box.hi[d] += std::max<std::int64_t>(piece.shape[d], 0);
        box = intersection(box, whole);
        if (volume(box) > 0)
            covers.push_back(Cover { box, {} });
    }
    std::uint64_t coveredVolume = 0;
    for (const auto& c : covers) {
        const std::uint64_t v = volume(c.box);
        coveredVolume = coveredVolume > kSaturated - v ? kSaturated : coveredVolume + v;
    }
    if (coveredVolume == numel) {
        // Equal volumes tile the tensor unless two covers overlap (then some other element is left out).
        MessageList ignored("overlaps");
        bool anyOverlap = false;
        findOverlaps(covers, ndim, ignored, anyOverlap);
        if (!anyOverlap)
            return {};
    }
    std::vector<std::uint8_t> mask(static_cast<size_t>(numel), 1);
    for (const auto& c : covers)
        markCovered(mask, tensor.shape, c.box);
    missing = static_cast<std::uint64_t>(std::count(mask.begin(), mask.end(), std::uint8_t(1)));
    if (missing == 0)
        return {};
    return mask;
}

} // namespace tessera
