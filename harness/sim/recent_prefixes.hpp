// Resuming work over texts that mostly begin alike. The prompts of one
// framing repeat the same few-shot examples before each question, and so do
// the canonical bodies the content hash is taken over; work that runs left
// to right through a text (a token count, a streaming hash) records its
// state at checkpoints, and the next text starts from the last checkpoint
// inside the prefix it shares with one of the few texts seen last. Counting
// and hashing those shared kilobytes again took 5 of the 26 us the
// simulator's own code spent on a request of the official set.
#pragma once

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace diffeval::sim {

// The length of the longest common prefix of `a` and `b`, compared a block
// at a time (memcmp compares many bytes per instruction, a loop one).
inline size_t common_prefix(std::string_view a, std::string_view b) {
    constexpr size_t k_block = 64;
    const size_t n = std::min(a.size(), b.size());
    size_t i = 0;
    while (i + k_block <= n && std::memcmp(a.data() + i, b.data() + i, k_block) == 0) {
        i += k_block;
    }
    while (i < n && a[i] == b[i]) {
        ++i;
    }
    return i;
}

// The last `N` texts one piece of work went through, with its `State` at
// checkpoints: after resume(text), the caller goes on from the offset and
// state returned, calls checkpoint() as it passes points where its state
// depends on the text before them only, and finish(text) at the end.
template <typename State, size_t N = 4> class RecentPrefixes {
public:
    // Where to go on with `text`: the furthest checkpoint of a remembered
    // text within the prefix it shares with `text`, or 0 and `initial`.
    std::pair<size_t, State> resume(std::string_view text, const State& initial) {
        std::pair<size_t, State> from{0, initial};
        size_t best = N;
        for (size_t i = 0; i < N; ++i) {
            const auto& marks = m_slots[i].marks;
            const size_t common = common_prefix(text, m_slots[i].text);
            auto mark = std::upper_bound(marks.begin(), marks.end(), common,
                                         [](size_t n, const auto& m) { return n < m.first; });
            if (mark != marks.begin() && std::prev(mark)->first > from.first) {
                from = *std::prev(mark);
                best = i;
            }
        }
        if (best == N) { // nothing shared: the slots are replaced in turn
            best = m_next;
            m_next = (m_next + 1) % N;
        }
        m_current = best;
        auto& marks = m_slots[best].marks;
        marks.erase(std::find_if(marks.begin(), marks.end(),
                                 [&](const auto& m) { return m.first > from.first; }),
                    marks.end());
        return from;
    }

    // The work's state after the first `offset` bytes of the text.
    void checkpoint(size_t offset, const State& state) {
        m_slots[m_current].marks.emplace_back(offset, state);
    }

    void finish(std::string_view text) { m_slots[m_current].text.assign(text); }

private:
    struct Slot {
        std::string text;
        std::vector<std::pair<size_t, State>> marks; // offsets ascending
    };
    std::array<Slot, N> m_slots;
    size_t m_current = 0;
    size_t m_next = 0; // the slot a text sharing nothing replaces
};

} // namespace diffeval::sim
