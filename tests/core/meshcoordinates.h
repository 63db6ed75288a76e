// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "model/checkpoint.h"

#include <vector>

namespace tessera::test {

/// Every coordinate of a device mesh, row-major (rank order); a 0-dim mesh has the one empty coordinate.
inline std::vector<Shape> allCoordinates(const Shape& mesh)
{
    std::vector<Shape> out;
    Shape c(mesh.size(), 0);
    while (true) {
        out.push_back(c);
        size_t d = mesh.size();
        while (d > 0) {
            --d;
            if (++c[d] < mesh[d])
                break;
            c[d] = 0;
            if (d == 0)
                return out;
        }
        if (mesh.empty())
            return out;
    }
}

} // namespace tessera::test
