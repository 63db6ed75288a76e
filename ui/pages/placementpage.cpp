// SPDX-License-Identifier: GPL-3.0-or-later
#include "placementpage.h"

#include "coreconvert.h"
#include "widgets/meshview.h"
#include "widgets/placementview.h"
#include "widgets/rankcolors.h"

#include <QEvent>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QVBoxLayout>

#include <algorithm>

namespace tessera::ui {

PlacementPage::PlacementPage(QWidget* parent)
    : QWidget(parent)
    , m_title(new QLabel(this))
    , m_details(new QLabel(this))
    , m_problems(new QLabel(this))
    , m_view(new PlacementView(this))
    , m_mesh(new MeshView(this))
    , m_meshTitle(new QLabel(tr("Device mesh"), this))
    , m_legend(new QLabel(this))
    , m_hover(new QLabel(this))
    , m_statistics(new QPushButton(tr("Statistics…"), this))
{
    m_statistics->setToolTip(tr("Min, max, mean, std, NaN, Inf, zeros and a histogram of this tensor, with no B"));
    connect(m_statistics, &QPushButton::clicked, this, [this] {
        if (m_tensor >= 0)
            Q_EMIT statisticsRequested(m_tensor);
    });
    QFont titleFont = m_title->font();
    titleFont.setBold(true);
    titleFont.setPointSizeF(titleFont.pointSizeF() * 1.15);
    m_title->setFont(titleFont);
    m_title->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_details->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_problems->setWordWrap(true);
    m_problems->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_hover->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_hover->setAlignment(Qt::AlignLeft | Qt::AlignTop);
    m_hover->setMinimumHeight(m_hover->fontMetrics().height() * 4 + 8);
    m_legend->setWordWrap(true);
    m_legend->setAlignment(Qt::AlignLeft | Qt::AlignTop);
    QFont meshFont = m_meshTitle->font();
    meshFont.setBold(true);
    m_meshTitle->setFont(meshFont);

    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(10, 8, 10, 8);
    auto* titleRow = new QHBoxLayout;
    titleRow->addWidget(m_title, 1);
    titleRow->addWidget(m_statistics);
    layout->addLayout(titleRow);
    layout->addWidget(m_details);
    layout->addWidget(m_problems);
    auto* body = new QHBoxLayout;
    body->addWidget(m_view, 1);
    auto* side = new QVBoxLayout;
    side->addWidget(m_meshTitle);
    side->addWidget(m_mesh);
    side->addWidget(m_legend);
    side->addStretch(1);
    auto* sidePanel = new QWidget(this);
    sidePanel->setLayout(side);
    side->setContentsMargins(8, 0, 0, 0);
    sidePanel->setFixedWidth(std::max(280, m_mesh->sizeHint().width() + 40));
    body->addWidget(sidePanel);
    layout->addLayout(body, 1);
    layout->addWidget(m_hover);

    connect(m_view, &PlacementView::hoverChanged, this, &PlacementPage::showHover);
    updateHeader();
}

PlacementPage::~PlacementPage() = default;

void PlacementPage::setCheckpoint(CheckpointPtr checkpoint)
{
    m_checkpoint = std::move(checkpoint);
    showTensor(-1);
}

void PlacementPage::showTensor(int tensorIndex, int pieceIndex)
{
    if (tensorIndex != m_tensor) {
        m_tensor = tensorIndex;
        m_view->setTensor(m_checkpoint, tensorIndex);
        m_mesh->setTensor(m_checkpoint, tensorIndex);
    }
    m_piece = pieceIndex;
    m_view->setSelectedPiece(pieceIndex);
    updateHeader();
    showHover(-1, {});
}

void PlacementPage::updateHeader()
{
    if (!m_checkpoint || m_tensor < 0 || m_tensor >= static_cast<int>(m_checkpoint->tensors.size())) {
        m_title->setText(tr("No tensor selected"));
        m_statistics->setEnabled(false);
        m_details->setText(tr("Choose a tensor or piece in the shard tree."));
        m_problems->hide();
        m_meshTitle->setText(tr("Device mesh"));
        m_legend->clear();
        return;
    }
    const auto& tensor = m_checkpoint->tensors[m_tensor];
    m_title->setText(qs(tensor.name));
    m_statistics->setEnabled(true);
    m_details->setText(tr("%1 · %2 · %3 · %4 · %5")
                           .arg(shapeText(tensor.shape), dtypeText(tensor.dtype), bytesText(tensor.nbytes()),
                                tensor.placement.empty() ? tr("plain tensor") : qs(tensor.placement),
                                countText(static_cast<long long>(tensor.pieces.size()), tr("piece"), tr("pieces"))));
    QStringList problems;
    for (const auto& problem : m_checkpoint->problems) {
        if (problem.tensor == tensor.name)
            problems << qs(problem.message);
    }
    const auto& g = m_view->geometry();
    if (problems.isEmpty() && (!g.gaps.empty() || !g.overlaps.empty()))
        problems << tr("%1 and %2 in the pieces").arg(countText(static_cast<long long>(g.gaps.size()), tr("gap"), tr("gaps")), countText(static_cast<long long>(g.overlaps.size()), tr("overlap"), tr("overlaps")));
    m_problems->setVisible(!problems.isEmpty());
    m_problems->setText(problems.join(QLatin1Char('\n')));
    QPalette pal = m_problems->palette();
    pal.setColor(QPalette::WindowText, problemColor(palette()));
    m_problems->setPalette(pal);

    m_meshTitle->setText(tr("Device mesh: %1").arg(m_mesh->meshText()));
    QString legend = tr("Filled: the rank holds a shard of this tensor.\nHatched: a replica of another rank's shard.\nDashed: nothing of this tensor.");
    if (g.dims > 2)
        legend += QLatin1Char('\n') + tr("Leading dims are folded into rows, row-major.");
    if (!g.coverageChecked && g.rows > 0 && g.cols > 0)
        legend += QLatin1Char('\n') + tr("Too many boxes to check gaps in the drawing; see problems.");
    m_legend->setText(legend);
}

void PlacementPage::showHover(int pieceIndex, const QString& text)
{
    int rank = -1;
    if (m_checkpoint && m_tensor >= 0) {
        const auto& pieces = m_checkpoint->tensors[m_tensor].pieces;
        const int piece = pieceIndex >= 0 ? pieceIndex : m_piece;
        if (piece >= 0 && piece < static_cast<int>(pieces.size()))
            rank = pieces[piece].rank;
    }
    m_mesh->setHighlightedRank(rank);
    if (!text.isEmpty())
        m_hover->setText(text);
    else if (m_piece >= 0)
        m_hover->setText(m_view->describePiece(m_piece));
    else
        m_hover->setText(m_tensor >= 0 ? tr("Hover over a piece to see its offsets, shape and file.") : QString());
}

void PlacementPage::changeEvent(QEvent* event)
{
    if (event->type() == QEvent::PaletteChange)
        updateHeader();
    QWidget::changeEvent(event);
}

} // namespace tessera::ui
