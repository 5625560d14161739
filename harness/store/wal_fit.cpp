// Whether the -wal beside a database fits it; see wal_fit.hpp. The log's
// format is SQLite's (https://www.sqlite.org/fileformat2.html#walformat):
// a 32-byte header, then frames of a 24-byte header and one page, every
// number big-endian, each frame's checksum continuing the one before it.
#include <harness/store/wal_fit.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string_view>
#include <vector>

namespace diffeval::store {

namespace {

uint32_t be32(const unsigned char* p) {
    return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// SQLite's running checksum over `n` bytes (a multiple of 8) of `p`, read as
// 32-bit words in the byte order the log's magic number names.
void checksum(const unsigned char* p, size_t n, bool big_endian, std::array<uint32_t, 2>& sum) {
    const auto word = [&](size_t at) {
        return big_endian ? be32(p + at)
                          : (uint32_t{p[at + 3]} << 24) | (uint32_t{p[at + 2]} << 16) |
                                (uint32_t{p[at + 1]} << 8) | uint32_t{p[at]};
    };
    for (size_t at = 0; at + 8 <= n; at += 8) {
        sum[0] += word(at) + sum[1];
        sum[1] += word(at + 4) + sum[0];
    }
}

// The database's page size from its header, or 0 when it has none.
uint64_t page_size_of(const std::string& db) {
    std::ifstream in(db, std::ios::binary);
    std::array<unsigned char, 18> h{};
    if (!in.read(reinterpret_cast<char*>(h.data()), h.size()) ||
        std::string_view(reinterpret_cast<const char*>(h.data()), 16) !=
            std::string_view("SQLite format 3\0", 16)) {
        return 0;
    }
    const uint32_t raw = (uint32_t{h[16]} << 8) | h[17];
    return raw == 1 ? 65536 : raw;
}

} // namespace

std::optional<std::string> log_that_does_not_fit(const std::string& db) {
    const std::string wal = db + "-wal";
    std::error_code ec;
    const auto wal_bytes = std::filesystem::file_size(wal, ec);
    if (ec || wal_bytes < 32) {
        return std::nullopt;
    }
    const auto db_bytes = std::filesystem::file_size(db, ec);
    const uint64_t db_page = page_size_of(db);
    if (ec || db_bytes == 0 || db_page == 0) {
        return std::nullopt; // a new file, or no SQLite: said where it is opened
    }
    std::ifstream in(wal, std::ios::binary);
    std::array<unsigned char, 32> header{};
    if (!in.read(reinterpret_cast<char*>(header.data()), header.size())) {
        return std::nullopt;
    }
    const uint32_t magic = be32(header.data());
    if (magic != 0x377f0682 && magic != 0x377f0683) {
        return std::nullopt; // SQLite reads no frame of it either
    }
    const bool big_endian = (magic & 1) != 0;
    const uint64_t page = be32(header.data() + 8);
    if (page < 512 || page > 65536 || (page & (page - 1)) != 0) {
        return std::nullopt;
    }
    std::array<uint32_t, 2> sum{};
    checksum(header.data(), 24, big_endian, sum);
    if (sum[0] != be32(header.data() + 24) || sum[1] != be32(header.data() + 28)) {
        return std::nullopt; // no valid header: SQLite ignores the log
    }
    // Each committed transaction in turn. One whose commit leaves the
    // database smaller than before (than the file, for the first) shrank
    // it: only a VACUUM does, and a VACUUM writes every page of the
    // database it leaves. A shrinking commit that did not is no commit of
    // this file's (another database's log: a few pages of a smaller one).
    const uint64_t file_pages = db_bytes / db_page;
    uint64_t before = file_pages;
    uint64_t committed = 0;
    std::optional<uint64_t> foreign; // the size of the first shrink no VACUUM made
    // The transaction's distinct pages: a whole rewrite of N pages takes N
    // frames, so pages past the log's frame count need no mark (bounded
    // memory for any log: a bit a frame).
    const uint64_t frames = (wal_bytes - 32) / (24 + page);
    std::vector<bool> marked(frames + 1, false);
    std::vector<uint32_t> written; // the marked pages, to clear
    uint32_t highest = 0;
    std::vector<unsigned char> frame(24 + page);
    while (in.read(reinterpret_cast<char*>(frame.data()),
                   static_cast<std::streamsize>(frame.size()))) {
        if (std::memcmp(frame.data() + 8, header.data() + 16, 8) != 0) {
            break; // another generation's salts: the log ends here
        }
        checksum(frame.data(), 8, big_endian, sum);
        checksum(frame.data() + 24, page, big_endian, sum);
        if (sum[0] != be32(frame.data() + 16) || sum[1] != be32(frame.data() + 20)) {
            break;
        }
        const uint32_t number = be32(frame.data());
        if (number <= frames && !marked[number]) {
            marked[number] = true;
            written.push_back(number);
        }
        highest = std::max(highest, number);
        const uint32_t size = be32(frame.data() + 4);
        if (size == 0) {
            continue;
        }
        const bool rewrote_all = !marked[0] && written.size() == size && highest == size;
        if (size < before && !rewrote_all && !foreign) {
            foreign = size;
        }
        before = size;
        committed = size;
        for (const uint32_t n : written) {
            marked[n] = false;
        }
        written.clear();
        highest = 0;
    }
    if (committed == 0) {
        return std::nullopt; // nothing committed: SQLite applies nothing
    }
    const auto shown = [&](const std::string& why) {
        return fmt::format("{} is not the log of {}: {}; it is another database's log, or one a "
                           "crashed run left for an earlier file of this name, and SQLite would "
                           "fold it into {}. Move {} and {}-shm away (or restore {} together "
                           "with the log it was copied with), then run the command again",
                           wal, db, why, db, wal, db, db);
    };
    if (page != db_page) {
        return shown(fmt::format("its pages are {} bytes, the file's {}", page, db_page));
    }
    if (foreign) {
        return shown(fmt::format("a commit in it leaves the database {} pages, where the file "
                                 "holds {}, and rewrites only some of them, as no VACUUM does "
                                 "(SQLite would cut the file to {} pages)",
                                 *foreign, file_pages, *foreign));
    }
    return std::nullopt;
}

} // namespace diffeval::store
