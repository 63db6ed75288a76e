// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "checkpointptr.h"

#include <QWidget>

class QLineEdit;

namespace tessera::ui {

/// Compare the loaded checkpoint with another one tensor by tensor (`tessera diff A B`). A placeholder until
/// the diff engine exists: it shows the two sides and the tolerances the comparison will use.
class DiffPage : public QWidget {
    Q_OBJECT
public:
    explicit DiffPage(QWidget* parent = nullptr);
    ~DiffPage() override;

    void setCheckpoint(CheckpointPtr checkpoint);
    void setReferenceDir(const QString& dir);
    QString referenceDir() const;

private:
    QLineEdit* m_left;
    QLineEdit* m_right;
};

} // namespace tessera::ui
