// SPDX-License-Identifier: GPL-3.0-or-later
#include "terminal_progress.h"

#include "io/byte_size.h"
#include "io/printable.h"

#include <csignal>
#include <cstdio>
#include <unistd.h>

namespace tessera::cli {

namespace {
volatile std::sig_atomic_t g_interrupted = 0;

void onInterrupt(int) { g_interrupted = 1; }

std::string formatDuration(double seconds)
{
    if (seconds < 0 || seconds > 360000)
        return "--:--";
    const int s = static_cast<int>(seconds + 0.5);
    char buf[32];
    if (s >= 3600)
        std::snprintf(buf, sizeof buf, "%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60);
    else
        std::snprintf(buf, sizeof buf, "%d:%02d", s / 60, s % 60);
    return buf;
}
} // namespace

void installInterruptHandler()
{
    struct sigaction action {};
    action.sa_handler = onInterrupt;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, nullptr);
}

TerminalProgress::TerminalProgress(std::string label, Unit unit, bool quiet)
    : m_label(std::move(label)), m_unit(unit), m_enabled(!quiet && ::isatty(STDERR_FILENO)),
      m_start(std::chrono::steady_clock::now())
{
}

TerminalProgress::~TerminalProgress() { finish(); }

bool TerminalProgress::isCanceled() const { return g_interrupted != 0; }

void TerminalProgress::report(std::uint64_t done, std::uint64_t total, const std::string& text)
{
    if (!m_enabled)
        return;
    std::lock_guard<std::mutex> lock(m_mutex);
    draw(done, total, text, done == total);
}

void TerminalProgress::draw(std::uint64_t done, std::uint64_t total, const std::string& text, bool force)
{
    const auto now = std::chrono::steady_clock::now();
    if (!force && m_drawn && now - m_lastDraw < std::chrono::milliseconds(100))
        return;
    m_lastDraw = now;
    m_drawn = true;
    const double elapsed = std::chrono::duration<double>(now - m_start).count();
    const double fraction = total ? static_cast<double>(done) / static_cast<double>(total) : 0.0;
    constexpr int width = 24;
    const int filled = static_cast<int>(fraction * width);
    std::string bar(static_cast<std::size_t>(filled), '#');
    bar.resize(width, '.');
    std::string amount;
    if (m_unit == Unit::Bytes) {
        const double rate = elapsed > 0 ? static_cast<double>(done) / elapsed : 0.0;
        amount = formatBytes(done) + " / " + formatBytes(total) + "  "
            + formatBytes(static_cast<std::uint64_t>(rate)) + "/s  ETA "
            + formatDuration(rate > 0 ? static_cast<double>(total - done) / rate : -1);
    } else {
        amount = std::to_string(done) + "/" + std::to_string(total);
    }
    // The text names a tensor or file of the checkpoint: escaped, then cut to its last 40 bytes on a character
    // boundary (escaping left only whole UTF-8 sequences, whose continuation bytes are 10xxxxxx).
    std::string name = printableText(text);
    if (name.size() > 40) {
        std::size_t cut = name.size() - 39;
        while (cut < name.size() && (static_cast<unsigned char>(name[cut]) & 0xC0) == 0x80)
            ++cut;
        name = "…" + name.substr(cut);
    }
    std::fprintf(stderr, "\r\033[K%s [%s] %3d%%  %s  %s", m_label.c_str(), bar.c_str(),
                 static_cast<int>(fraction * 100), amount.c_str(), name.c_str());
    std::fflush(stderr);
}

void TerminalProgress::finish()
{
    std::lock_guard<std::mutex> lock(m_mutex);
    if (m_enabled && m_drawn) {
        std::fprintf(stderr, "\r\033[K");
        std::fflush(stderr);
        m_drawn = false;
    }
}

} // namespace tessera::cli
