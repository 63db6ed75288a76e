// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "checkpointptr.h"

#include <QWidget>

class QLabel;
class QPushButton;

namespace tessera::ui {

class MeshView;
class PlacementView;

/// Where the selected tensor's pieces are: the folded 2-D drawing beside the device mesh, a header naming the
/// tensor, its problems in red, and a line describing the piece under the mouse.
class PlacementPage : public QWidget {
    Q_OBJECT
public:
    explicit PlacementPage(QWidget* parent = nullptr);
    ~PlacementPage() override;

    void setCheckpoint(CheckpointPtr checkpoint);
    void showTensor(int tensorIndex, int pieceIndex = -1);
    int tensorIndex() const { return m_tensor; }
    QPushButton* statisticsButton() const { return m_statistics; }
    PlacementView* placementView() const { return m_view; }
    MeshView* meshView() const { return m_mesh; }

Q_SIGNALS:
    /// Statistics… was pressed for the tensor shown.
    void statisticsRequested(int tensorIndex);

protected:
    void changeEvent(QEvent* event) override;

private:
    void updateHeader();
    void showHover(int pieceIndex, const QString& text);

    CheckpointPtr m_checkpoint;
    int m_tensor = -1;
    int m_piece = -1;
    QLabel* m_title;
    QLabel* m_details;
    QLabel* m_problems;
    PlacementView* m_view;
    MeshView* m_mesh;
    QLabel* m_meshTitle;
    QLabel* m_legend;
    QLabel* m_hover;
    QPushButton* m_statistics;
};

} // namespace tessera::ui
